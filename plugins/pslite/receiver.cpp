#include "receiver.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <stdexcept>

namespace pslite {

Receiver::Receiver(std::function<void(Link&, const std::string&)> on_error, int spin_us)
    : on_error_(std::move(on_error)), spin_ns_(int64_t(spin_us) * 1000) {
  epfd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epfd_ < 0 || wake_fd_ < 0) throw std::runtime_error("epoll/eventfd unavailable");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the wake-up descriptor
  epoll_ctl(epfd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  threads_.emplace_back([this] { epoll_loop(); });
}

Receiver::~Receiver() {
  stop();
  close(epfd_);
  close(wake_fd_);
}

void Receiver::stop() {
  if (stopping_.exchange(true)) return;
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    threads.swap(threads_);
  }
  for (auto& t : threads) t.join();
}

void Receiver::fail(Entry& e, const std::string& why) {
  if (e.failed.exchange(true) || stopping_) return;
  on_error_(*e.link, why);
}

void Receiver::add(std::shared_ptr<Link> link, Inbound::OnHeader on_header, Inbound::OnMessage on_message) {
  auto entry = std::make_unique<Entry>(link, Inbound(std::move(on_header), std::move(on_message)));
  Entry* e = entry.get();
  std::lock_guard<std::mutex> lock(mu_);
  entries_.push_back(std::move(entry));
  if (link->poll_fd() >= 0) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.ptr = e;
    epoll_ctl(epfd_, EPOLL_CTL_ADD, link->poll_fd(), &ev);
    return;
  }
  threads_.emplace_back([this, e] {
    int64_t busy_until = 0;
    while (!stopping_ && !e->failed) {
      const uint64_t before = e->inbound.bytes();
      if (!e->inbound.pump(*e->link)) return fail(*e, e->inbound.error());
      if (spin_ns_ > 0) {  // no clock reads when polling is off (the default)
        const int64_t now = now_ns();
        if (e->inbound.bytes() != before) busy_until = now + spin_ns_;
        if (now < busy_until) continue;
      }
      e->link->wait_readable(100);
    }
  });
}

void Receiver::epoll_loop() {
  epoll_event events[64];
  int64_t busy_until = 0;
  while (!stopping_) {
    int n = epoll_wait(epfd_, events, 64, spin_ns_ > 0 && now_ns() < busy_until ? 0 : 1000);
    if (n > 0 && spin_ns_ > 0) busy_until = now_ns() + spin_ns_;
    for (int i = 0; i < n; ++i) {
      auto* e = static_cast<Entry*>(events[i].data.ptr);
      if (!e || e->failed) continue;
      if (!e->inbound.pump(*e->link)) {
        epoll_ctl(epfd_, EPOLL_CTL_DEL, e->link->poll_fd(), nullptr);
        fail(*e, e->inbound.error());
      }
    }
  }
}

}  // namespace pslite
