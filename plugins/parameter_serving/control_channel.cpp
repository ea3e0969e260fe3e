#include "control_channel.h"

#include "fanout_sdk.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace parameter_serving {

ControlServer::ControlServer(const std::string& bind_ip, std::string token) : token_(std::move(token)) {
  listen_fd_ = fanout_sdk::tcp_listen(bind_ip, 0, 1024, port_, SOCK_NONBLOCK);
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
  if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) throw fanout_sdk::errno_error("control poll");
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
  try {
    fd_ = fanout_sdk::tcp_connect(ip, port, timeout_ms);  // retried: the listener exists before its address is out
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("cannot reach the trainer: ") + e.what());
  }
  fanout_sdk::set_nodelay(fd_);
  if (token.size() != kTokenBytes || !fanout_sdk::send_all(fd_, token.data(), token.size()))
    throw fanout_sdk::errno_error("present the job's token to the trainer");
}

ControlClient::~ControlClient() { close(); }

void ControlClient::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void ControlClient::send(const ControlMessage& m) {
  if (fanout_sdk::send_all(fd_, &m, sizeof m) || done_) return;  // after DONE the trainer may be gone: nothing to tell
  throw fanout_sdk::errno_error("post to the trainer");
}

bool ControlClient::trainer_done() {
  if (done_) return true;
  char c;
  ssize_t n = recv(fd_, &c, 1, MSG_DONTWAIT);
  if (n == 1 || n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) done_ = true;
  return done_;
}

}  // namespace parameter_serving
