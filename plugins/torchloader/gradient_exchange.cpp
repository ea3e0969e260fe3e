#include "gradient_exchange.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "fanout_sdk.hpp"

namespace torchloader {
namespace {

constexpr int kHandshakeMs = 5000;  // a peer presents its token and rank at once; a silent stranger is dropped

void send_all(int fd, const void* p, size_t n) {
  if (!fanout_sdk::send_all(fd, p, n)) throw fanout_sdk::errno_error("gradient exchange: send failed");
}

void recv_all(int fd, void* p, size_t n) {
  if (fanout_sdk::recv_all(fd, p, n)) return;
  if (errno == 0) throw std::runtime_error("gradient exchange: a peer closed its connection");
  throw fanout_sdk::errno_error("gradient exchange: receive failed");
}

void tune(int fd, int timeout_ms) {
  fanout_sdk::set_nodelay(fd);
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// Process 0's side of the handshake: each peer sends the token, then its rank (int32). Every pending connection is
// read at once (one poll over the listener and all of them), so a silent or slow stranger costs its slot and
// its own deadline, never the time of the peers behind it (read in turn with 5 s each, 40 silent connections
// kept the job's peers out for 200 s).
struct PendingPeer {
  int fd;
  std::chrono::steady_clock::time_point deadline;
  std::string bytes;
};

}  // namespace

GradientExchange::GradientExchange(int rank, int world, const std::string& address, const std::string& token,
                                   const std::function<void(int port)>& on_listening, int timeout_ms)
    : rank_(rank), world_(world) {
  if (world < 1 || rank < 0 || rank >= world) throw std::invalid_argument("gradient exchange: rank " + std::to_string(rank) + " of " + std::to_string(world));
  if (world == 1) return;
  if (token.empty()) throw std::invalid_argument("gradient exchange: no channel token");
  if (rank == 0) {
    int port = 0;
    int lfd = -1;
    try {
      lfd = fanout_sdk::tcp_listen(address, 0, world, port);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(std::string("gradient exchange: ") + e.what());
    }
    if (on_listening) on_listening(port);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    peers_.assign(size_t(world - 1), -1);
    const size_t hello_bytes = token.size() + sizeof(int32_t);
    std::vector<PendingPeer> pending;
    auto drop = [&](PendingPeer& p) {
      ::close(p.fd);
      ++refused_;
      std::fprintf(stderr, "gradient exchange: refused a connection without the job's token or with a bad rank\n");
    };
    // The whole hello came: admitted, or refused (a stranger, a rank outside 1..world-1, a rank taken).
    auto admit = [&](PendingPeer& p) {
      int32_t r = 0;
      std::memcpy(&r, p.bytes.data() + token.size(), sizeof r);
      if (!fanout_sdk::token_matches(p.bytes.substr(0, token.size()), token) || r < 1 || r >= world || peers_[size_t(r - 1)] >= 0) return drop(p);
      tune(p.fd, timeout_ms);
      peers_[size_t(r - 1)] = p.fd;
    };
    auto connected = [&] { return int(std::count_if(peers_.begin(), peers_.end(), [](int fd) { return fd >= 0; })); };
    while (connected() < world - 1) {
      const auto now = std::chrono::steady_clock::now();
      if (now > deadline) {
        for (auto& p : pending) drop(p);
        for (int fd : peers_)
          if (fd >= 0) ::close(fd);  // a throwing constructor runs no destructor
        ::close(lfd);
        throw std::runtime_error("gradient exchange: only " + std::to_string(connected()) + " of " + std::to_string(world - 1) +
                                 " peers connected (" + std::to_string(refused_) + " refused)");
      }
      std::erase_if(pending, [&](PendingPeer& p) { return p.deadline < now && (drop(p), true); });
      std::vector<pollfd> fds{{lfd, POLLIN, 0}};
      for (auto& p : pending) fds.push_back({p.fd, POLLIN, 0});
      const int ready = ::poll(fds.data(), fds.size(), 100);
      if (ready < 0 && errno != EINTR) throw fanout_sdk::errno_error("gradient exchange: poll");
      if (ready <= 0) continue;  // nothing, or a pause signal
      for (size_t i = pending.size(); i-- > 0;) {  // back to front: erasing keeps the earlier indices
        if (!(fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        PendingPeer& p = pending[i];
        char buf[256];
        const ssize_t n = ::recv(p.fd, buf, std::min(sizeof buf, hello_bytes - p.bytes.size()), MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (n <= 0) {
          drop(p);
        } else {
          p.bytes.append(buf, size_t(n));
          if (p.bytes.size() < hello_bytes) continue;
          admit(p);
        }
        pending.erase(pending.begin() + long(i));
      }
      if (fds[0].revents & POLLIN) {
        const int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) pending.push_back({fd, now + std::chrono::milliseconds(std::min(timeout_ms, kHandshakeMs)), {}});
      }
    }
    for (auto& p : pending) drop(p);
    ::close(lfd);
    return;
  }
  int fd = -1;
  try {
    const auto [host, port] = fanout_sdk::split_host_port(address);
    fd = fanout_sdk::tcp_connect(host, port, timeout_ms);  // retried while process 0 starts listening
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("gradient exchange: cannot reach process 0: ") + e.what());
  }
  tune(fd, timeout_ms);
  const int32_t r = rank;
  std::string hello = token;
  hello.append(reinterpret_cast<const char*>(&r), sizeof r);
  if (!fanout_sdk::send_all(fd, hello.data(), hello.size())) {  // a throwing constructor runs no destructor
    const int e = errno;
    ::close(fd);
    errno = e;
    throw fanout_sdk::errno_error("gradient exchange: send failed");
  }
  peers_.push_back(fd);
}

GradientExchange::~GradientExchange() {
  for (int fd : peers_)
    if (fd >= 0) ::close(fd);
}

bool GradientExchange::average(float* data, size_t n, bool want_pause) {
  if (world_ == 1) return want_pause;
  uint8_t flag = want_pause ? 1 : 0;
  if (rank_ != 0) {
    send_all(peers_[0], &flag, 1);
    send_all(peers_[0], data, n * sizeof(float));
    recv_all(peers_[0], &flag, 1);
    recv_all(peers_[0], data, n * sizeof(float));
    return flag != 0;
  }
  scratch_.resize(n);
  for (int fd : peers_) {  // in rank order: the sum is the same on every run
    uint8_t f = 0;
    recv_all(fd, &f, 1);
    recv_all(fd, scratch_.data(), n * sizeof(float));
    flag |= f;
    for (size_t i = 0; i < n; ++i) data[i] += scratch_[i];
  }
  const float inv = 1.0f / float(world_);
  for (size_t i = 0; i < n; ++i) data[i] *= inv;
  for (int fd : peers_) {
    send_all(fd, &flag, 1);
    send_all(fd, data, n * sizeof(float));
  }
  return flag != 0;
}

}  // namespace torchloader
