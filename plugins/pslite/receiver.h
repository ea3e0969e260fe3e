// Receiving for all links of a node: one epoll thread for every socket link (it sleeps in epoll_wait), and one
// thread per shared-memory link (it sleeps on the ring's futex). Each link has its own Inbound parser; the
// handlers run on the receiving thread, so a message costs at most one hand-off (to the thread waiting for it).
// With spin_us > 0 a thread keeps polling that long after a message before it sleeps again: waking a thread
// on an idle core costs about 45 us on the virtual machines here (a blocking 4 KiB TCP ping-pong takes 100 us,
// a polling one 12 us). It pays only with idle cores to spare (on a busy 2-core machine it makes round trips
// slower), so the default is 0: sleep at once, never poll.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "fanout_clock.hpp"
#include "link.h"

namespace pslite {

inline int64_t now_ns() { return fanout_sdk::monotonic_ns(); }

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

class Receiver {
 public:
  // on_error(link, why) runs once for a link that closed or sent garbage (after stop(): never).
  Receiver(std::function<void(Link&, const std::string&)> on_error, int spin_us);
  ~Receiver();
  // Starts receiving on link (kept alive by the receiver) with its own parser.
  void add(std::shared_ptr<Link> link, Inbound::OnHeader on_header, Inbound::OnMessage on_message);
  void stop();

 private:
  struct Entry {
    Entry(std::shared_ptr<Link> l, Inbound in) : link(std::move(l)), inbound(std::move(in)) {}
    std::shared_ptr<Link> link;
    Inbound inbound;
    std::atomic<bool> failed{false};
  };
  void epoll_loop();
  void fail(Entry& e, const std::string& why);
  std::function<void(Link&, const std::string&)> on_error_;
  int epfd_ = -1, wake_fd_ = -1;
  int64_t spin_ns_ = 0;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::vector<std::unique_ptr<Entry>> entries_;
  std::vector<std::thread> threads_;
};

}  // namespace pslite
