// The server side of a plugin's token-gated TCP channel (SDK, header-only): a listener on an ephemeral port and
// its connections, each with the bytes it has sent so far and whether it has shown the job's channel token.
// poll() accepts newcomers and reads what arrived; the protocol (how the token is shown, how messages are
// framed) stays with the caller, which refuse()s a stranger so that it is counted, or close()s a peer that left.
// Connection indexes are stable for the server's life (a closed one keeps its slot with fd -1), so a protocol
// may use them as connection ids.
#pragma once
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

#include "fanout_socket.hpp"

namespace fanout_sdk {

class GatedServer {
 public:
  struct Conn {
    int fd = -1;
    std::string in;        // received and not yet consumed by the protocol
    bool authed = false;   // set by the protocol once the token matched
    int64_t peer = -1;     // what the protocol learned of the peer (a worker id, ...)
  };
  struct Event {
    size_t conn;
    bool eof;  // the peer closed (or the connection failed): consume what is in `in`, then close or refuse it
  };

  GatedServer(const std::string& bind_ip, int backlog) { listen_fd_ = tcp_listen(bind_ip, 0, backlog, port_, SOCK_NONBLOCK); }
  ~GatedServer() {
    for (auto& c : conns_)
      if (c.fd >= 0) ::close(c.fd);
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }
  GatedServer(const GatedServer&) = delete;
  GatedServer& operator=(const GatedServer&) = delete;

  int port() const { return port_; }
  Conn& conn(size_t i) { return conns_[i]; }
  size_t size() const { return conns_.size(); }  // connections ever accepted (closed ones included)
  size_t refused() const { return refused_; }
  size_t open_connections() const {
    size_t n = 0;
    for (auto& c : conns_) n += c.fd >= 0;
    return n;
  }

  // Waits up to timeout_ms, accepts every waiting connection (TCP_NODELAY), and reads once from each readable
  // one. Returns the connections that sent bytes or reached their end, in index order.
  std::vector<Event> poll(int timeout_ms) {
    std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
    std::vector<size_t> which;  // fds[k + 1] is conns_[which[k]]
    for (size_t i = 0; i < conns_.size(); ++i)
      if (conns_[i].fd >= 0) fds.push_back({conns_[i].fd, POLLIN, 0}), which.push_back(i);
    std::vector<Event> events;
    if (::poll(fds.data(), fds.size(), timeout_ms) <= 0) return events;  // timeout or EINTR: the caller polls again
    if (fds[0].revents & POLLIN)
      for (int fd; (fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) {
        set_nodelay(fd);
        conns_.push_back(Conn{fd, {}, false, -1});
      }
    for (size_t k = 0; k < which.size(); ++k) {
      if (!(fds[k + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Conn& c = conns_[which[k]];
      char buf[4096];
      const ssize_t n = recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n > 0) c.in.append(buf, size_t(n));
      events.push_back({which[k], n <= 0});
    }
    return events;
  }

  // A peer that left, or is done with.
  void close(size_t i) {
    Conn& c = conns_[i];
    if (c.fd >= 0) ::close(c.fd);
    c.fd = -1;
    c.in.clear();
  }
  // A stranger (no token, a wrong one, or a message its protocol forbids): closed and counted in refused().
  void refuse(size_t i) {
    ++refused_;
    close(i);
  }
  // false when that connection is closed or the send fails.
  bool send(size_t i, const void* data, size_t n) { return i < conns_.size() && conns_[i].fd >= 0 && send_all(conns_[i].fd, data, n); }

 private:
  int listen_fd_ = -1, port_ = 0;
  std::vector<Conn> conns_;
  size_t refused_ = 0;
};

}  // namespace fanout_sdk
