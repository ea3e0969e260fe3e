#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

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
    iovec iov[2] = {{raw, kHeaderBytes}, {const_cast<void*>(payload), payload ? size_t(h.len) : 0}};
    int n_iov = h.len && payload ? 2 : 1;
    std::lock_guard<std::mutex> lock(send_mu_);
    iovec* v = iov;
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
  int fd_;
  std::string peer_;
  std::mutex send_mu_;
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
