#include "line_channel.h"

#include "fanout_sdk.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <sstream>
#include <stdexcept>

namespace torchloader {
namespace {

bool write_all(int fd, const std::string& s) { return fanout_sdk::send_all(fd, s.data(), s.size()); }

// Reads what is available on fd into buf and moves complete lines to out; false on EOF or error.
bool read_lines(int fd, std::string& buf, std::vector<std::string>& out) {
  char chunk[4096];
  ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) return false;
  buf.append(chunk, size_t(n));
  for (size_t nl; (nl = buf.find('\n')) != std::string::npos;) {
    out.push_back(buf.substr(0, nl));
    buf.erase(0, nl + 1);
  }
  return true;
}

}  // namespace

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> w;
  for (std::string s; in >> s;) w.push_back(s);
  return w;
}

LineServer::LineServer(const std::string& bind_ip, std::string token) : token_(std::move(token)) {
  try {
    listen_fd_ = fanout_sdk::tcp_listen(bind_ip, 0, 64, port_);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("the torchloader master ") + e.what());
  }
}

LineServer::~LineServer() {
  for (auto& c : conns_)
    if (c.fd >= 0) ::close(c.fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

std::vector<Line> LineServer::poll(int timeout_ms) {
  std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}};
  for (auto& c : conns_) fds.push_back({c.fd, short(c.fd >= 0 ? POLLIN : 0), 0});
  std::vector<Line> out;
  if (::poll(fds.data(), fds.size(), timeout_ms) <= 0) return out;
  if (fds[0].revents & POLLIN) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      fanout_sdk::set_nodelay(fd);
      conns_.push_back({fd, "", false});
    }
  }
  for (size_t i = 1; i < fds.size(); ++i) {
    Conn& c = conns_[i - 1];
    if (c.fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    std::vector<std::string> lines;
    bool open = read_lines(c.fd, c.in, lines);
    const bool was_authed = c.authed;
    for (auto& l : lines) {
      if (!c.authed) {
        // The first line decides: the token, or the connection is closed (a stranger never reaches the master).
        const auto w = words(l);
        c.authed = w.size() == 2 && w[0] == "AUTH" && fanout_sdk::token_matches(w[1], token_);
        if (!c.authed) {
          ++refused_;
          open = false;
          break;
        }
        continue;
      }
      out.push_back({int(i - 1), l});
    }
    if (!c.authed && c.in.size() > 256) ++refused_, open = false;  // no line within 256 bytes: not a peer
    if (!open) {
      ::close(c.fd);
      c.fd = -1;
      if (was_authed || c.authed) out.push_back({int(i - 1), "CLOSED"});  // only a peer's leaving matters
      else if (lines.empty()) ++refused_;  // closed without a word
    }
  }
  return out;
}

bool LineServer::send(int conn, const std::string& text) {
  if (conn < 0 || size_t(conn) >= conns_.size() || conns_[size_t(conn)].fd < 0) return false;
  return write_all(conns_[size_t(conn)].fd, text + "\n");
}

struct LineClient::SendLock {
  std::mutex mu;
};

LineClient::LineClient(const std::string& host_port, const std::string& token, int timeout_ms) : lock_(new SendLock) {
  try {
    const auto [host, port] = fanout_sdk::split_host_port(host_port);
    fd_ = fanout_sdk::tcp_connect(host, port, timeout_ms, 50);  // retried while the master starts
  } catch (const std::runtime_error& e) {
    delete lock_;
    throw std::runtime_error("cannot connect to the torchloader master: " + std::string(e.what()));
  }
  fanout_sdk::set_nodelay(fd_);
  if (!write_all(fd_, "AUTH " + token + "\n")) {
    ::close(fd_);
    delete lock_;
    throw std::runtime_error("the torchloader master at " + host_port + " closed the connection");
  }
}

LineClient::~LineClient() {
  if (fd_ >= 0) ::close(fd_);
  delete lock_;
}

bool LineClient::send(const std::string& text) {
  std::lock_guard<std::mutex> g(lock_->mu);
  return write_all(fd_, text + "\n");
}

std::vector<std::string> LineClient::poll(int timeout_ms) {
  std::vector<std::string> out;
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return out;
  if (!read_lines(fd_, in_, out)) out.push_back("CLOSED");
  return out;
}

}  // namespace torchloader
