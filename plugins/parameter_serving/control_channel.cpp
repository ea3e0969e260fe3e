#include "control_channel.h"

#include "fanout_sdk.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace parameter_serving {

namespace {
std::runtime_error sys_error(const std::string& what) { return std::runtime_error(what + ": " + std::strerror(errno)); }
}  // namespace

ControlServer::ControlServer(const std::string& bind_ip, std::string token) : token_(std::move(token)) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) throw sys_error("control socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, bind_ip.c_str(), &a.sin_addr);
  socklen_t len = sizeof a;
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(listen_fd_, 1024) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw sys_error("control socket on " + bind_ip);
  port_ = ntohs(a.sin_port);
}

ControlServer::~ControlServer() {
  for (auto& c : conns_)
    if (c.fd >= 0) close(c.fd);
  if (listen_fd_ >= 0) close(listen_fd_);
}

size_t ControlServer::open_connections() const {
  size_t n = 0;
  for (auto& c : conns_) n += c.fd >= 0;
  return n;
}

void ControlServer::poll_messages(int timeout_ms, std::vector<ControlMessage>& out) {
  std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
  std::vector<size_t> which;  // fds[k + 1] is conns_[which[k]]
  for (size_t i = 0; i < conns_.size(); ++i)
    if (conns_[i].fd >= 0) fds.push_back({conns_[i].fd, POLLIN, 0}), which.push_back(i);
  if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) throw sys_error("control poll");
  if (fds[0].revents & POLLIN)
    for (int fd; (fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) conns_.push_back({fd, {}, false, -1});
  for (size_t k = 0; k < which.size(); ++k) {
    if (!(fds[k + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    Conn& c = conns_[which[k]];
    char buf[4096];
    ssize_t n = recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) {
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (!c.authed) ++refused_;  // connected and left without the token
      close(c.fd);
      c.fd = -1;
      continue;
    }
    c.in.append(buf, size_t(n));
    if (!c.authed) {
      if (c.in.size() < kTokenBytes) continue;
      if (!fanout_sdk::token_matches(c.in.substr(0, kTokenBytes), token_)) {
        refuse(c);
        continue;
      }
      c.authed = true;
      c.in.erase(0, kTokenBytes);
    }
    while (c.fd >= 0 && c.in.size() >= sizeof(ControlMessage)) {
      ControlMessage m;
      std::memcpy(&m, c.in.data(), sizeof m);
      c.in.erase(0, sizeof m);
      const bool first_hello = m.type == kHello && c.worker < 0;
      if (!first_hello && !(m.type == kPost && int64_t(m.worker) == c.worker)) {
        refuse(c);
        break;
      }
      if (first_hello) c.worker = m.worker, ++hellos_;
      out.push_back(m);
    }
  }
}

void ControlServer::refuse(Conn& c) {
  ++refused_;
  close(c.fd);
  c.fd = -1;
  c.in.clear();
}

void ControlServer::send_done() {
  for (auto& c : conns_)
    if (c.fd >= 0) (void)::send(c.fd, &kDone, 1, MSG_NOSIGNAL);
}

ControlClient::ControlClient(const std::string& ip, int port, const std::string& token, int timeout_ms) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  if (inet_pton(AF_INET, ip.c_str(), &a.sin_addr) != 1) throw std::runtime_error("trainer address '" + ip + "' is not IPv4");
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw sys_error("control socket");
    if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) break;
    int e = errno;
    ::close(fd_);
    fd_ = -1;
    if (std::chrono::steady_clock::now() > until) {
      errno = e;
      throw sys_error("cannot reach the trainer at " + ip + ":" + std::to_string(port));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // transient (the listener exists before its address is out)
  }
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (token.size() != kTokenBytes || ::send(fd_, token.data(), token.size(), MSG_NOSIGNAL) != ssize_t(token.size()))
    throw sys_error("present the job's token to the trainer");
}

ControlClient::~ControlClient() { close(); }

void ControlClient::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void ControlClient::send(const ControlMessage& m) {
  const char* p = reinterpret_cast<const char*>(&m);
  size_t left = sizeof m;
  while (left > 0) {
    ssize_t n = ::send(fd_, p, left, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (done_) return;  // the trainer has gone after DONE: nothing left to tell it
      throw sys_error("post to the trainer");
    }
    p += n, left -= size_t(n);
  }
}

bool ControlClient::trainer_done() {
  if (done_) return true;
  char c;
  ssize_t n = recv(fd_, &c, 1, MSG_DONTWAIT);
  if (n == 1 || n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) done_ = true;
  return done_;
}

}  // namespace parameter_serving
