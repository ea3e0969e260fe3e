// KVWorker / KVServer in the spirit of ps-lite: 64-bit keys, values of any length, the key space split into one
// contiguous range per server, a request fanned out by range (one message per key), and a single-request
// PushPull. Requests are asynchronous and return a timestamp to wait() on; a pulled value is received straight
// into the caller's buffer. Each worker-server pair uses TCP or, when both run on one host, shared memory.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "receiver.h"
#include "scheduler.h"
#include "value_buffer.h"

namespace pslite {

enum class Transport { Auto, Tcp, Shm, Ibverbs };
// "auto", "tcp", "shm", "ibverbs"; DMLC_ENABLE_RDMA (ibverbs/1) selects ibverbs. Throws naming the value.
Transport parse_transport(const std::string& text);
std::string transport_name(Transport t);
// Empty when RDMA verbs can be used here, else why not (no headers at build time, no device).
std::string rdma_unavailable_reason();

// The first key of server s's range (of n servers).
uint64_t range_begin(int server, int servers);
int server_of(uint64_t key, int servers);

class KVServer {
 public:
  // spin_us: how long receiving threads keep polling after a message before they sleep (see receiver.h).
  // token: what a worker must present in its Hello ("": nothing asked, as ps-lite). A connection without it,
  // or that says nothing, is dropped and counted (refused()); a worker's push larger than the largest value it
  // declared in its Hello closes its link before anything is allocated.
  KVServer(const std::string& host, int port, Transport transport, int spin_us, std::string token = "");
  ~KVServer();
  int port() const { return port_; }
  void start(uint32_t my_id);
  void stop();
  uint64_t messages() const { return messages_; }
  uint64_t refused() const { return refused_; }  // connections dropped: strangers, wrong token, oversized pushes
  std::vector<std::string> link_descriptions();

 private:
  struct Peer;
  void accept_loop();
  void hello(const Header& h, const std::string& payload, std::unique_ptr<Link> tcp);
  void serve(std::shared_ptr<Link> link, uint64_t max_value);
  int listen_fd_ = -1, port_ = 0;
  uint32_t id_ = 0;
  Transport transport_;
  std::mutex store_mu_;
  std::unordered_map<uint64_t, std::shared_ptr<ValueBuffer>> store_;
  std::unique_ptr<Receiver> receiver_;
  std::thread acceptor_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> messages_{0};
  std::atomic<uint64_t> refused_{0};
  std::string token_;
  std::mutex peers_mu_;
  std::vector<std::shared_ptr<Peer>> peers_;
};

struct KVItem {
  uint64_t key;
  const char* value = nullptr;  // push: the bytes to send
  size_t len = 0;
  char* out = nullptr;          // pull: where the value goes (at most cap bytes)
  size_t cap = 0;
  size_t* out_len = nullptr;    // pull: the value's length
};

class KVWorker {
 public:
  // Connects to every server (shared memory with those on this host unless transport says otherwise).
  // spin_us: how long wait() and the receiving threads poll before they sleep (see receiver.h).
  // token: the job's channel token, presented in every Hello; max_value: the largest value it will push (the
  // servers refuse larger ones).
  KVWorker(const std::vector<NodeInfo>& servers, uint32_t my_id, Transport transport, size_t shm_ring_bytes, int timeout_ms,
           int spin_us, const std::string& token, uint64_t max_value);
  ~KVWorker();
  uint64_t push(const std::vector<KVItem>& items) { return request(MsgType::Push, items); }
  uint64_t pull(const std::vector<KVItem>& items) { return request(MsgType::Pull, items); }
  uint64_t pushpull(const std::vector<KVItem>& items) { return request(MsgType::PushPull, items); }
  // Waits for every response of request ts; throws when a server went away or a value did not fit.
  void wait(uint64_t ts);
  // Requests outstanding (sent or being sent, not answered) when the last request was issued.
  size_t depth_at_last_request();
  std::string transport_to(int server) const { return links_[size_t(server)]->describe(); }
  int servers() const { return int(links_.size()); }

 private:
  uint64_t request(MsgType type, const std::vector<KVItem>& items);
  struct Pending {
    uint64_t ts;
    char* out;
    size_t cap;
    size_t* out_len;
  };
  uint32_t id_;
  std::vector<std::shared_ptr<Link>> links_;
  Receiver receiver_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<uint64_t, Pending> pending_;
  std::unordered_map<uint64_t, size_t> remaining_;  // per ts
  uint64_t next_ts_ = 1, next_request_ = 1;
  size_t last_depth_ = 0;
  std::string failure_;
  int64_t spin_ns_ = 0;
};

}  // namespace pslite
