// The trainer <-> worker control channel (ZeroMQ in the seed): a TCP connection per worker. Workers send
// HELLO once (they are ready: joined the multicast group, can read the store), then POST every post_frequency
// (the mean version held since the last post, the seed's measure); the trainer answers with DONE when it
// stops. Messages are 24 bytes, little-endian, fixed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "fanout_gate.hpp"

namespace parameter_serving {

struct ControlMessage {
  uint32_t type;  // kHello, kPost
  uint32_t worker;
  double mean_version;
  uint64_t count;
};
static_assert(sizeof(ControlMessage) == 24, "control message is 24 bytes");
constexpr uint32_t kHello = 1, kPost = 2;
constexpr char kDone = 'D';

// A connection presents the job's channel token (32 characters, fanout_sdk::channel_token) before anything else;
// one that does not, sends an unknown message type, or posts for another worker than its HELLO named, is closed
// and counted in refused(): nothing it sent reaches the trainer's samples.
constexpr size_t kTokenBytes = 32;

// The trainer's side: listens, accepts its workers, collects their messages.
class ControlServer {
 public:
  ControlServer(const std::string& bind_ip, std::string token) : token_(std::move(token)), gate_(bind_ip, 1024) {}
  int port() const { return gate_.port(); }
  // Waits up to timeout_ms for messages (and new connections), appending what arrived.
  void poll_messages(int timeout_ms, std::vector<ControlMessage>& out);
  size_t hellos() const { return hellos_; }
  size_t open_connections() const { return gate_.open_connections(); }
  void send_done();  // to every open connection
  size_t refused() const { return gate_.refused(); }

 private:
  std::string token_;
  fanout_sdk::GatedServer gate_;  // a connection's peer is the worker its HELLO named
  size_t hellos_ = 0;
};

// The worker's side.
class ControlClient {
 public:
  ControlClient(const std::string& ip, int port, const std::string& token, int timeout_ms);
  ~ControlClient();
  void send(const ControlMessage& m);
  // Non-blocking: true once the trainer said DONE or closed the connection.
  bool trainer_done();
  void close();  // tells the trainer this worker has stopped

 private:
  int fd_ = -1;
  bool done_ = false;
};

}  // namespace parameter_serving
