#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "fanout_socket.hpp"
#include "link.h"

namespace pslite {

namespace {

class TcpLink : public Link {
 public:
  TcpLink(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {
    fanout_sdk::set_nodelay(fd_);
    fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
  }
  ~TcpLink() override {
    if (fd_ >= 0) ::close(fd_);
  }

  void send(const Header& h, const void* payload) override {
    unsigned char raw[kHeaderBytes];
    encode(h, raw);
    const size_t len = h.len && payload ? size_t(h.len) : 0;
    if (held_.load(std::memory_order_relaxed) && len <= kSmallValue) {
      bool full;
      {
        std::lock_guard<std::mutex> lock(held_mu_);
        held_bytes_.insert(held_bytes_.end(), raw, raw + kHeaderBytes);
        held_bytes_.insert(held_bytes_.end(), static_cast<const char*>(payload), static_cast<const char*>(payload) + len);
        full = held_bytes_.size() >= kHeldLimit;
      }
      if (full) {
        std::lock_guard<std::mutex> lock(send_mu_);
        flush_held();
      }
      return;
    }
    std::lock_guard<std::mutex> lock(send_mu_);
    flush_held();
    send_locked(raw, payload, len);
  }

  void send_batch(const std::vector<Outgoing>& messages) override {
    // Headers encoded side by side, then one iovec list (header, value, header, value, ...) in IOV_MAX chunks.
    std::vector<unsigned char> headers(messages.size() * kHeaderBytes);
    std::vector<iovec> iov;
    iov.reserve(messages.size() * 2);
    for (size_t i = 0; i < messages.size(); ++i) {
      unsigned char* raw = headers.data() + i * kHeaderBytes;
      encode(messages[i].header, raw);
      iov.push_back({raw, kHeaderBytes});
      if (messages[i].header.len && messages[i].payload) iov.push_back({const_cast<void*>(messages[i].payload), size_t(messages[i].header.len)});
    }
    std::lock_guard<std::mutex> lock(send_mu_);
    flush_held();
    for (size_t at = 0; at < iov.size(); at += kIovChunk) send_iov(iov.data() + at, std::min(kIovChunk, iov.size() - at));
  }

  // Takes send_mu_ only when something was gathered: the receiving thread of a worker, which gathers nothing, must
  // never wait for a send in progress (its sender waits for that thread to drain the peer's replies).
  void hold_small_sends(bool hold) override {
    held_.store(hold, std::memory_order_relaxed);
    if (hold) return;
    {
      std::lock_guard<std::mutex> lock(held_mu_);
      if (held_bytes_.empty()) return;
    }
    std::lock_guard<std::mutex> lock(send_mu_);
    flush_held();
  }

  ssize_t read_some(void* buf, size_t cap) override {
    for (;;) {
      ssize_t n = recv(fd_, buf, cap, MSG_DONTWAIT);
      if (n > 0) return n;
      if (n == 0) return -1;
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      return -1;
    }
  }

  void wait_readable(int timeout_ms) override {
    pollfd p{fd_, POLLIN, 0};
    ::poll(&p, 1, timeout_ms);
  }
  int poll_fd() const override { return fd_; }
  std::string describe() const override { return "tcp " + peer_; }
  void close() override { ::shutdown(fd_, SHUT_RDWR); }

 private:
  static constexpr size_t kSmallValue = 256;        // an ack or an error; values are sent as they come
  static constexpr size_t kHeldLimit = 64 * 1024;   // gathered bytes that go out even while held

  // What was gathered, before a message that is not (the order holds); send_mu_ held.
  void flush_held() {
    std::vector<char> gathered;
    {
      std::lock_guard<std::mutex> lock(held_mu_);
      gathered.swap(held_bytes_);
    }
    if (!gathered.empty()) send_locked(gathered.data(), nullptr, 0, gathered.size());
  }

  static constexpr size_t kIovChunk = 1024;  // IOV_MAX on Linux

  // One message (or the gathered ones: `first_len` bytes and no payload) through sendmsg; send_mu_ held.
  void send_locked(const void* first, const void* payload, size_t len, size_t first_len = kHeaderBytes) {
    iovec iov[2] = {{const_cast<void*>(first), first_len}, {const_cast<void*>(payload), len}};
    send_iov(iov, len ? 2 : 1);
  }

  // Every byte of iov[0..count) through sendmsg, waiting for room when the socket buffer is full; send_mu_ held.
  void send_iov(iovec* v, size_t count) {
    int n_iov = int(count);
    while (n_iov > 0) {
      msghdr m{};
      m.msg_iov = v;
      m.msg_iovlen = size_t(n_iov);
      ssize_t n = sendmsg(fd_, &m, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {  // the socket buffer is full: wait for room, never spin
          pollfd p{fd_, POLLOUT, 0};
          ::poll(&p, 1, 1000);
          continue;
        }
        throw fanout_sdk::errno_error("send to " + peer_);
      }
      size_t left = size_t(n);
      while (n_iov > 0 && left >= v->iov_len) left -= v->iov_len, ++v, --n_iov;
      if (n_iov > 0 && left > 0) v->iov_base = static_cast<char*>(v->iov_base) + left, v->iov_len -= left;
    }
  }

  int fd_;
  std::string peer_;
  std::mutex send_mu_;
  std::atomic<bool> held_{false};
  std::mutex held_mu_;  // guards held_bytes_ only (never held while sending)
  std::vector<char> held_bytes_;
};

}  // namespace

std::unique_ptr<Link> tcp_link(int fd, const std::string& peer) { return std::make_unique<TcpLink>(fd, peer); }

// DMLC-style start: nodes may start before the scheduler listens; ps-lite retries the same way (every 50 ms).
int tcp_connect(const std::string& host, int port, int timeout_ms) { return fanout_sdk::tcp_connect(host, port, timeout_ms, 50); }

int tcp_listen(const std::string& host, int port, int& bound_port) { return fanout_sdk::tcp_listen(host, port, 1024, bound_port); }

std::string host_identity() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(f, id);
  if (id.empty()) {
    char name[256] = {0};
    gethostname(name, sizeof name - 1);
    id = name;
  }
  return id;
}

bool Inbound::pump(Link& link) {
  // Replies to what this pass reads go out together when it ends (Link::hold_small_sends).
  link.hold_small_sends(true);
  struct Release {
    Link& l;
    ~Release() {
      try {
        l.hold_small_sends(false);
      } catch (const std::exception&) {  // the peer has gone: the next read says so
      }
    }
  } release{link};
  for (;;) {
    if (!in_payload_) {
      ssize_t n = link.read_some(raw_ + header_got_, kHeaderBytes - header_got_);
      if (n < 0) return error_ = "connection closed by " + link.describe(), false;
      if (n == 0) return true;
      bytes_ += uint64_t(n);
      header_got_ += size_t(n);
      if (header_got_ < kHeaderBytes) continue;
      header_got_ = 0;
      if (std::string why = decode(raw_, kHeaderBytes, h_); !why.empty()) return error_ = link.describe() + ": " + why, false;
      dst_ = on_header_(h_);
      payload_got_ = 0;
      in_payload_ = true;
    }
    static thread_local char scratch[1 << 16];
    while (payload_got_ < h_.len) {
      char* into = dst_ ? dst_ + payload_got_ : scratch;
      size_t want = dst_ ? size_t(h_.len - payload_got_) : std::min<size_t>(sizeof scratch, size_t(h_.len - payload_got_));
      ssize_t n = link.read_some(into, want);
      if (n < 0) return error_ = "connection closed by " + link.describe(), false;
      if (n == 0) return true;
      bytes_ += uint64_t(n);
      payload_got_ += size_t(n);
    }
    in_payload_ = false;
    on_message_(h_);
  }
}

}  // namespace pslite
