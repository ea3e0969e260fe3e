#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "link.h"

namespace pslite {

namespace {

std::runtime_error sys_error(const std::string& what) { return std::runtime_error(what + ": " + std::strerror(errno)); }

sockaddr_in address_of(const std::string& host, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  if (host.empty() || host == "*") {
    a.sin_addr.s_addr = htonl(INADDR_ANY);
  } else if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) throw std::runtime_error("cannot resolve host '" + host + "'");
    a.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
    freeaddrinfo(res);
  }
  return a;
}

class TcpLink : public Link {
 public:
  TcpLink(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
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
        throw sys_error("send to " + peer_);
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

int tcp_connect(const std::string& host, int port, int timeout_ms) {
  const sockaddr_in a = address_of(host, port);
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw sys_error("socket");
    if (connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0) return fd;
    int e = errno;
    ::close(fd);
    if ((e != ECONNREFUSED && e != ETIMEDOUT && e != EINTR) || std::chrono::steady_clock::now() > until) {
      errno = e;
      throw sys_error("cannot connect to " + host + ":" + std::to_string(port));
    }
    // DMLC-style start: nodes may start before the scheduler listens; ps-lite retries the same way.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

int tcp_listen(const std::string& host, int port, int& bound_port) {
  sockaddr_in a = address_of(host, port);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 1024) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    int e = errno;
    if (fd >= 0) ::close(fd);
    errno = e;
    throw sys_error("cannot listen on " + host + ":" + std::to_string(port));
  }
  bound_port = ntohs(a.sin_port);
  return fd;
}

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
