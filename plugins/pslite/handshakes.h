// Connections to a listening port whose first message is awaited, all at once: one poll over the listener and
// every pending connection, each message read as its bytes come. A silent or slow stranger costs its slot and
// its deadline, never the time of the peers behind it (read one after the other, 40 silent connections took
// 200 s and failed a job). The scheduler's registrations and a server's worker hellos both come this way.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "link.h"

namespace pslite {

class Handshakes {
 public:
  // A whole first message of the expected type; the receiver keeps the link or lets it go.
  using OnMessage = std::function<void(const Header& h, const std::string& payload, std::unique_ptr<Link> link)>;
  // type: the first message a peer must send; max_payload: its size at most (a header announcing more is a
  // stranger's, refused before anything is allocated); deadline_ms: how long a connection may take to send it.
  Handshakes(int listen_fd, MsgType type, uint64_t max_payload, int deadline_ms, OnMessage on_message);
  // Waits up to wait_ms for connections and bytes, then accepts, reads, hands over whole messages and drops the
  // expired, malformed and departed connections (counted in refused()).
  void poll_once(int wait_ms);
  // Drops the connections still pending, counting them refused.
  void drop_all();
  uint64_t refused() const { return refused_; }

 private:
  struct Pending {
    std::unique_ptr<Link> link;
    std::chrono::steady_clock::time_point deadline;
    std::string bytes;  // what came so far: the header, then the payload it announces
  };
  bool advance(Pending& p);  // false once p is over (handed over or refused)
  int listen_fd_;
  MsgType type_;
  uint64_t max_payload_;
  int deadline_ms_;
  OnMessage on_message_;
  std::vector<Pending> pending_;
  uint64_t refused_ = 0;
  static constexpr size_t kMaxPending = 256;  // connections awaited at once (the oldest goes first)
};

}  // namespace pslite
