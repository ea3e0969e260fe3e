#include "common/held_lines.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

#include "common/clock.h"

namespace fanout {

void HeldLinesBuf::write_if_held_long() {
  if (held_.empty() || held_.back() != '\n') return;  // a line is written whole
  if (held_.size() >= kMaxHeldBytes || monotonic_ns() - held_since_ns_ >= max_hold_ns_) failed_ |= sync() != 0;
}

HeldLinesBuf::int_type HeldLinesBuf::overflow(int_type c) {
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  if (held_.empty()) held_since_ns_ = monotonic_ns();
  held_ += traits_type::to_char_type(c);
  write_if_held_long();
  return c;
}

std::streamsize HeldLinesBuf::xsputn(const char* s, std::streamsize n) {
  if (n <= 0) return 0;
  if (held_.empty()) held_since_ns_ = monotonic_ns();
  held_.append(s, size_t(n));
  write_if_held_long();
  return n;
}

int HeldLinesBuf::sync() {
  size_t done = 0;
  while (done < held_.size()) {
    const ssize_t w = ::write(fd_, held_.data() + done, held_.size() - done);
    if (w > 0) {
      done += size_t(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    pollfd p{fd_, POLLOUT, 0};
    if (w < 0 && errno == EAGAIN && ::poll(&p, 1, 1000) > 0) continue;  // a terminal or pipe left non-blocking: wait
    break;
  }
  const bool all = done == held_.size() && !failed_;
  held_.clear();  // what a closed or full descriptor did not take is dropped, not held forever
  failed_ = false;
  return all ? 0 : -1;
}

}  // namespace fanout
