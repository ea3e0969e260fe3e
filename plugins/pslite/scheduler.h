// ps-lite's scheduler and the nodes' side of it. Nodes register (AddNode "role host port hostid"); when all
// num_servers + num_workers are in, the scheduler gives ids (scheduler 1, server 8+2r, worker 9+2r, ranks in
// order of arrival) and sends everyone the node list; afterwards it only answers barriers. A node that
// disconnects before its final barrier makes the scheduler tell every other node and fail: a dead worker ends
// the job instead of hanging it. The scheduler sleeps in poll(): idle, it costs nothing.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "link.h"

namespace pslite {

struct NodeInfo {
  uint32_t id = 0;
  std::string role;  // server or worker
  std::string host;
  int port = 0;
  std::string host_id;
  int rank = 0;      // among its role
};

uint32_t server_id(int rank);
uint32_t worker_id(int rank);

class Scheduler {
 public:
  // Listens at once. A connection that does not register within a few seconds, sends something else, or
  // presents another token than `token` (when one is set) is dropped and counted; it never ends the job.
  Scheduler(const std::string& host, int port, std::string token = "");
  ~Scheduler();
  int port() const { return port_; }
  // Runs until every node passed its final barrier (returns) or one disappeared (throws, naming it).
  void run(int num_servers, int num_workers, int register_timeout_ms);
  size_t refused() const { return refused_; }

 private:
  int listen_fd_ = -1, port_ = 0;
  std::string token_;
  size_t refused_ = 0;
};

class SchedulerClient {
 public:
  // Connects (retrying until timeout_ms: the scheduler may start later), registers, waits for the node list.
  SchedulerClient(const std::string& host, int port, const std::string& role, const std::string& my_host, int my_port, int timeout_ms,
                  const std::string& token = "");
  const std::vector<NodeInfo>& nodes() const { return nodes_; }
  const NodeInfo& me() const { return me_; }
  std::vector<NodeInfo> servers() const;
  // Waits until every node reached a barrier; final: the last one (afterwards closing is expected). Throws
  // with the scheduler's reason when a node died.
  void barrier(bool final, int timeout_ms);

 private:
  std::unique_ptr<Link> link_;
  std::vector<NodeInfo> nodes_;
  NodeInfo me_;
};

// Reads one whole message (blocking up to timeout_ms) from a link: the helper the handshakes use.
bool read_message(Link& link, Header& h, std::string& payload, int timeout_ms, std::string& error);

}  // namespace pslite
