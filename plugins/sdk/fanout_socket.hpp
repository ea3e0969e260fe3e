// TCP over IPv4 as every plugin channel and the rendezvous client need it (SDK, header-only): an endpoint from
// a name or dotted quad, a listener (an ephemeral port when 0), a connect that retries while the peer is still
// starting, TCP_NODELAY for request/reply traffic, and whole-buffer send/receive that resume after signals.
// Errors are std::runtime_error naming the endpoint and errno's text; callers add what the peer is.
#pragma once
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

namespace fanout_sdk {

// "what: <strerror(errno)>".
inline std::runtime_error errno_error(const std::string& what) { return std::runtime_error(what + ": " + std::strerror(errno)); }

// host: a dotted quad, a name (resolved, IPv4), or "" / "*" for every interface. Throws naming the host.
inline sockaddr_in ipv4_endpoint(const std::string& host, int port) {
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

inline void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// A listening socket on host:port (port 0: the kernel picks one, returned in bound_port). extra_type_flags is
// or-ed into the socket type (SOCK_NONBLOCK for a poll loop). Close-on-exec; SO_REUSEADDR so a restarted
// listener on a fixed port does not wait out TIME_WAIT.
inline int tcp_listen(const std::string& host, int port, int backlog, int& bound_port, int extra_type_flags = 0) {
  sockaddr_in a = ipv4_endpoint(host, port);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | extra_type_flags, 0);
  int one = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, backlog) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int e = errno;
    if (fd >= 0) close(fd);
    errno = e;
    throw errno_error("cannot listen on " + (host.empty() ? std::string("*") : host) + ":" + std::to_string(port));
  }
  bound_port = ntohs(a.sin_port);
  return fd;
}

// A connected, close-on-exec socket to host:port. While the peer is not listening yet (refused, timed out,
// interrupted) it retries every pacing_ms until timeout_ms has passed; any other error fails at once. 0 tries
// once. The peers of a job start in any order, so a refusal at first is normal, not a failure.
inline int tcp_connect(const std::string& host, int port, int timeout_ms, int pacing_ms = 20) {
  const sockaddr_in a = ipv4_endpoint(host, port);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw errno_error("socket");
    if (connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0) return fd;
    const int e = errno;
    close(fd);
    if ((e != ECONNREFUSED && e != ETIMEDOUT && e != EINTR) || std::chrono::steady_clock::now() >= until) {
      errno = e;
      throw errno_error("cannot connect to " + host + ":" + std::to_string(port));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(pacing_ms));  // retry pacing, not synchronisation
  }
}

// "host:port" split at the last colon; throws naming the text when there is no port number.
inline std::pair<std::string, int> split_host_port(const std::string& host_port) {
  const auto colon = host_port.rfind(':');
  char* end = nullptr;
  const long port = colon == std::string::npos ? -1 : std::strtol(host_port.c_str() + colon + 1, &end, 10);
  if (colon == std::string::npos || colon + 1 == host_port.size() || *end != '\0' || port < 0 || port > 65535)
    throw std::runtime_error("'" + host_port + "' is not host:port");
  return {host_port.substr(0, colon), int(port)};
}

// Sends all n bytes (no SIGPIPE); false with errno set when the connection fails first.
inline bool send_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k, n -= size_t(k);
  }
  return true;
}

// Receives exactly n bytes; false when the peer closes first (errno 0) or the receive fails (errno set,
// EAGAIN when an SO_RCVTIMEO ran out).
inline bool recv_all(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t k = recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k == 0) errno = 0;
    if (k <= 0) return false;
    p += k, n -= size_t(k);
  }
  return true;
}

}  // namespace fanout_sdk
