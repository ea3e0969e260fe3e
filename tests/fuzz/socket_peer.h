// A fuzz target's side of a real loopback connection to a server under test (header-only: each target is one
// translation unit). A failed connect is a finding; a send the server cut short is a refusal, not an error.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "tests/fuzz/fuzz_check.h"

namespace fuzz {

inline int connect_to(int port, const char* ip = "127.0.0.1") {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  inet_pton(AF_INET, ip, &a.sin_addr);
  FUZZ_CHECK(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

inline void send_all(int fd, const std::string& bytes) {
  for (size_t at = 0; at < bytes.size();) {
    ssize_t n = send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    if (n <= 0) return;  // the server closed it: a refusal
    at += size_t(n);
  }
}

inline void send_and_close(int port, const std::string& bytes) {
  int fd = connect_to(port);
  send_all(fd, bytes);
  close(fd);
}

}  // namespace fuzz
