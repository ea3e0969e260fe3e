// Receiving for all links of a node: one epoll thread for every socket link (it sleeps in epoll_wait, never
// spins), and one thread per shared-memory link (it sleeps on the ring's futex). Each link has its own Inbound
// parser; the handlers run on the receiving thread, so a message costs at most one hand-off (to the thread
// waiting for it).
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "link.h"

namespace pslite {

class Receiver {
 public:
  // on_error(link, why) runs once for a link that closed or sent garbage (after stop(): never).
  explicit Receiver(std::function<void(Link&, const std::string&)> on_error);
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
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::vector<std::unique_ptr<Entry>> entries_;
  std::vector<std::thread> threads_;
};

}  // namespace pslite
