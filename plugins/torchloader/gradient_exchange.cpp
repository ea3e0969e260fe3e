#include "gradient_exchange.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>

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

// Process 0's side of the handshake: the token, then the peer's rank (int32). Returns the rank, or -1 when the
// peer is a stranger, says a rank outside 1..world-1, or does not finish within the handshake deadline.
int admit(int fd, const std::string& token, int world) {
  std::string presented(token.size(), '\0');
  int32_t r = 0;
  try {
    recv_all(fd, presented.data(), presented.size());
    recv_all(fd, &r, sizeof r);
  } catch (const std::runtime_error&) {
    return -1;
  }
  if (!fanout_sdk::token_matches(presented, token) || r < 1 || r >= world) return -1;
  return r;
}

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
    for (int got = 0; got < world - 1;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      int fd = left > 0 ? (tune(lfd, int(left)), ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC)) : -1;
      if (fd < 0 && errno == EINTR) continue;  // a pause signal (SO_RCVTIMEO makes accept never restart by itself)
      if (fd < 0) {
        ::close(lfd);
        throw std::runtime_error("gradient exchange: only " + std::to_string(got) + " of " + std::to_string(world - 1) +
                                 " peers connected (" + std::to_string(refused_) + " refused)");
      }
      tune(fd, std::min(timeout_ms, kHandshakeMs));
      const int r = admit(fd, token, world);
      if (r < 0 || peers_[size_t(r - 1)] >= 0) {
        ::close(fd);
        ++refused_;
        std::fprintf(stderr, "gradient exchange: refused a connection without the job's token or with a bad rank\n");
        continue;
      }
      tune(fd, timeout_ms);
      peers_[size_t(r - 1)] = fd;
      ++got;
    }
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
