// A fuzz target's side of a real loopback connection to a server under test (header-only: each target is one
// translation unit). A failed connect is a finding; a send the server cut short is a refusal, not an error.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "tests/fuzz/fuzz_check.h"

namespace fuzz {

// Each connection comes from the next of 127.0.0.2-127.0.0.250: the TIME_WAIT a closed connection leaves holds
// its (source, port) pair for a minute, and ~50,000 inputs a run from one source address used up this host's
// ephemeral ports (connect failed with EADDRNOTAVAIL).
inline int connect_to(int port, const char* ip = "127.0.0.1") {
  static unsigned next_source = 0;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  from.sin_addr.s_addr = htonl((127u << 24) | (2 + next_source++ % 249));
  FUZZ_CHECK(bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) == 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  inet_pton(AF_INET, ip, &a.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    // libFuzzer's watchdog SIGALRM (no SA_RESTART) can interrupt the handshake; it goes on without us: wait for it.
    FUZZ_CHECK(errno == EINTR);
    pollfd p{fd, POLLOUT, 0};
    int ready;
    do ready = poll(&p, 1, 10000);
    while (ready < 0 && errno == EINTR);
    int error = -1;
    socklen_t len = sizeof error;
    FUZZ_CHECK(ready == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0);
  }
  return fd;
}

inline void send_all(int fd, const std::string& bytes) {
  for (size_t at = 0; at < bytes.size();) {
    ssize_t n = send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;  // libFuzzer's watchdog SIGALRM, not the server
    if (n <= 0) return;  // the server closed it: a refusal
    at += size_t(n);
  }
}

// Closes a connection whose exchange is over with a reset instead of a FIN: no TIME_WAIT is left behind.
inline void close_with_reset(int fd) {
  const linger reset{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  close(fd);
}

inline void send_and_close(int port, const std::string& bytes) {
  int fd = connect_to(port);
  send_all(fd, bytes);
  close(fd);
}

}  // namespace fuzz
