// The rendezvous KV service (rendezvous/kv_service.h) fed any bytes over a real loopback connection, with the
// job's AUTH line first when the input's first byte is odd (so PUT/GET/FENCE parsing is reached), then closed
// (a peer that leaves mid-wait must leave nothing dangling: ASan sees a use after free). After each input a
// real rank of the same job must still PUT and GET a key the input cannot know (random, new each round).
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>

#include "fanout_sdk.hpp"
#include "rendezvous/kv_service.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/socket_peer.h"

namespace {

int connect_to(const std::string& address) {
  const auto colon = address.rfind(':');
  return fuzz::connect_to(std::stoi(address.substr(colon + 1)), address.substr(0, colon).c_str());
}

// Reads until `want` bytes arrived (or 10 s pass: the service is stuck, a finding). libFuzzer's -timeout watchdog
// is a SIGALRM every timeout/2+1 s installed without SA_RESTART: poll and recv return EINTR when it lands in them
// (it did, once per CI run at most: the 16 s alarm of a 20 s run), so an interrupted wait resumes until the deadline.
std::string read_reply(int fd, size_t want) {
  std::string got;
  char buf[4096];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (got.size() < want) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    FUZZ_CHECK(left.count() > 0);
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, int(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    FUZZ_CHECK(ready == 1);
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    FUZZ_CHECK(n > 0);
    got.append(buf, size_t(n));
  }
  return got;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 8192) return 0;
  static fanout::KvService service;
  static const std::string token = service.open_job(1000);
  static unsigned long round = 0;
  const bool with_token = data[0] & 1;
  int fd = connect_to(service.address());
  fuzz::send_all(fd, (with_token ? "AUTH " + token + "\n" : std::string()) + std::string(reinterpret_cast<const char*>(data + 1), size - 1));
  close(fd);

  // A real rank: AUTH, PUT, GET of its own key.
  // A fresh random key each round: libFuzzer's comparison tracing learns any fixed key (it did: an input then
  // wrote the next round's key and the rank read the input's value), so no input can know this one.
  const std::string key = "k" + fanout_sdk::random_hex(12), value = "v" + std::to_string(++round);
  fd = connect_to(service.address());
  const std::string request = "AUTH " + token + "\nPUT " + key + " " + std::to_string(value.size()) + "\n" + value + "GET " + key + " 0\n";
  fuzz::send_all(fd, request);
  const std::string expected = "OK\nOK\nVAL " + std::to_string(value.size()) + "\n" + value;
  FUZZ_CHECK(read_reply(fd, expected.size()) == expected);
  fuzz::close_with_reset(fd);
  return 0;
}
