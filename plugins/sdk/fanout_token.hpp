// Secrets a plugin makes and checks: random tokens and passwords, compared in constant time (SDK, header-only).
#pragma once
#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace fanout_sdk {

// Random hex text from the kernel's CSPRNG: 2 characters per byte (passwords, tokens).
inline std::string random_hex(size_t bytes = 16) {
  std::vector<unsigned char> raw(bytes);
  for (size_t got = 0; got < bytes;) {
    const ssize_t n = ::getrandom(raw.data() + got, bytes - got, 0);
    if (n > 0) got += size_t(n);
    else if (errno != EINTR) throw std::runtime_error(std::string("getrandom: ") + std::strerror(errno));
  }
  static const char* hex = "0123456789abcdef";
  std::string t;
  for (unsigned char c : raw) t += hex[c >> 4], t += hex[c & 15];
  return t;
}

// A plugin's own listening port (a scheduler, a master, a trainer) hears only its job's peers: the server makes
// a token, publishes it with its address through the rendezvous (already per-job and authenticated), and every
// peer presents it first. 32 hex characters.
inline std::string channel_token() { return random_hex(16); }

// Compares a presented token with the expected one in time independent of where they differ.
inline bool token_matches(const std::string& presented, const std::string& expected) {
  if (presented.size() != expected.size() || expected.empty()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < expected.size(); ++i) diff |= static_cast<unsigned char>(presented[i] ^ expected[i]);
  return diff == 0;
}

}  // namespace fanout_sdk
