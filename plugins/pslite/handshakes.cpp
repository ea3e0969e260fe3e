#include "handshakes.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>

namespace pslite {

Handshakes::Handshakes(int listen_fd, MsgType type, uint64_t max_payload, int deadline_ms, OnMessage on_message)
    : listen_fd_(listen_fd), type_(type), max_payload_(max_payload), deadline_ms_(deadline_ms), on_message_(std::move(on_message)) {}

bool Handshakes::advance(Pending& p) {
  for (;;) {
    Header h{};
    const bool have_header = p.bytes.size() >= kHeaderBytes;
    if (have_header) {
      const std::string why = decode(reinterpret_cast<const unsigned char*>(p.bytes.data()), kHeaderBytes, h);
      if (!why.empty() || h.type != type_ || h.len > max_payload_) return ++refused_, false;
      if (p.bytes.size() == kHeaderBytes + h.len) return on_message_(h, p.bytes.substr(kHeaderBytes), std::move(p.link)), false;
    }
    const size_t want = have_header ? kHeaderBytes + size_t(h.len) - p.bytes.size() : kHeaderBytes - p.bytes.size();
    char buf[512];
    const ssize_t n = p.link->read_some(buf, std::min(want, sizeof buf));  // never past this message
    if (n < 0) return ++refused_, false;                                     // it left
    if (n == 0) return true;                                                 // nothing more yet
    p.bytes.append(buf, size_t(n));
  }
}

void Handshakes::poll_once(int wait_ms) {
  const auto now = std::chrono::steady_clock::now();
  std::erase_if(pending_, [&](const Pending& p) { return p.deadline < now && (++refused_, true); });
  std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
  for (auto& p : pending_) fds.push_back({p.link->poll_fd(), POLLIN, 0});
  if (poll(fds.data(), fds.size(), wait_ms) <= 0) return;
  for (size_t i = pending_.size(); i-- > 0;)  // back to front: erasing keeps the earlier indices
    if ((fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) && !advance(pending_[i])) pending_.erase(pending_.begin() + long(i));
  if (fds[0].revents & POLLIN) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    if (pending_.size() == kMaxPending) pending_.erase(pending_.begin()), ++refused_;
    pending_.push_back({tcp_link(fd, "peer"), now + std::chrono::milliseconds(deadline_ms_), {}});
  }
}

void Handshakes::drop_all() {
  refused_ += pending_.size();
  pending_.clear();
}

}  // namespace pslite
