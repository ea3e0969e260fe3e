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

std::vector<Line> LineServer::poll(int timeout_ms) {
  std::vector<Line> out;
  for (const auto& event : gate_.poll(timeout_ms)) {
    const int id = int(event.conn);
    auto& c = gate_.conn(event.conn);
    const bool was_authed = c.authed;
    bool refused = false;
    for (size_t nl; !refused && (nl = c.in.find('\n')) != std::string::npos;) {
      std::string line = c.in.substr(0, nl);
      c.in.erase(0, nl + 1);
      if (c.authed) {
        out.push_back({id, std::move(line)});
        continue;
      }
      // The first line decides: the token, or the connection is closed (a stranger never reaches the master).
      const auto w = words(line);
      c.authed = w.size() == 2 && w[0] == "AUTH" && fanout_sdk::token_matches(w[1], token_);
      refused = !c.authed;
    }
    if (!refused && !c.authed && (event.eof || c.in.size() > 256)) refused = true;  // left without a word, or no line within 256 bytes
    if (refused) {
      gate_.refuse(event.conn);
    } else if (event.eof) {
      gate_.close(event.conn);
      if (was_authed || c.authed) out.push_back({id, "", true});  // only a peer's leaving matters
    }
  }
  return out;
}

bool LineServer::send(int conn, const std::string& text) {
  const std::string line = text + "\n";
  return conn >= 0 && gate_.send(size_t(conn), line.data(), line.size());
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

std::vector<std::string> LineClient::poll(int timeout_ms, bool& closed) {
  std::vector<std::string> out;
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return out;
  if (!read_lines(fd_, in_, out)) closed = true;
  return out;
}

}  // namespace torchloader
