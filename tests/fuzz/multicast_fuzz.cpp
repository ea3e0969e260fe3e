// parameter_serving's multicast receiver (plugins/parameter_serving/multicast.h) fed datagrams made of any bytes
// over real loopback multicast. The first input byte gives how many datagrams (1-8) the rest is cut into; with
// its high bit set, each datagram carries the benchmark's magic, protocol and token, and with bit 6 also the mac
// of the benchmark's key (a faulty trainer), so the fields behind them (version, sizes, chunk numbers) are reached. The receiver runs as in a worker, capped at the trainer's size.
// Asserts: no write out of bounds (ASan, on the receiver's thread); every datagram is counted once; a version
// reported complete passed its checksum or is counted corrupt; nothing completes that is not ours.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "fanout_sdk.hpp"
#include "plugins/parameter_serving/multicast.h"
#include "tests/fuzz/fuzz_check.h"

using namespace parameter_serving;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2 || size > 16384) return 0;
  static const int port = 40000 + int(getpid() % 20000);
  static const uint64_t token = 0x6675'7a7a'6d63'6173ull;
  static int fd = [] {
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    in_addr lo{};
    inet_pton(AF_INET, "127.0.0.1", &lo);
    setsockopt(s, IPPROTO_IP, IP_MULTICAST_IF, &lo, sizeof lo);
    return s;
  }();
  McastConfig cfg;
  cfg.group = "239.255.41.9";
  cfg.port = port;
  cfg.max_bytes = 1 << 20;
  uint64_t complete = 0;
  static const McastKey key = McastKey::random();
  static DatagramMac mac(key);
  McastReceiver rx(cfg, token, key, [&](const McastVersion& v) {
    ++complete;
    FUZZ_CHECK(v.checksum_ok && v.bytes > 0 && v.bytes <= cfg.max_bytes && v.version > 0);
  });
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(uint16_t(port));
  inet_pton(AF_INET, cfg.group.c_str(), &to.sin_addr);
  const bool ours = data[0] & 0x80;
  const size_t count = 1 + (data[0] & 7), part = (size - 1) / count;
  size_t sent = 0;
  for (size_t i = 0; i < count; ++i) {
    std::string d(reinterpret_cast<const char*>(data + 1 + i * part), part);
    if (ours && d.size() >= sizeof(McastHeader)) {
      McastHeader h;
      std::memcpy(&h, d.data(), sizeof h);
      h.magic = 0x4d535046, h.proto = 2, h.token = token;
      // Signed with the benchmark's key, as a faulty trainer would: the fields behind the mac are reached.
      if (data[0] & 0x40) h.header_bytes = sizeof h, mac.sign(h, d.data() + sizeof h, d.size() - sizeof h);
      std::memcpy(d.data(), &h, sizeof h);
    }
    if (sendto(fd, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to) == ssize_t(d.size()) && d.size() >= sizeof(McastHeader)) ++sent;
  }
  const McastCounts c = rx.stop();
  FUZZ_CHECK(c.datagrams <= sent);
  if (!ours || !(data[0] & 0x40)) FUZZ_CHECK(complete == 0 && c.versions_complete == 0);  // nothing unsigned counts
  FUZZ_CHECK(c.versions_complete == complete);
  return 0;
}
