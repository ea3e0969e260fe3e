#include "multicast.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include "fanout_sdk.hpp"

namespace parameter_serving {

namespace {

constexpr uint32_t kMagic = 0x4d535046;  // "FPSM" read little-endian
constexpr size_t kMaxUdpPayload = 65507;

in_addr parse_ipv4(const std::string& ip, const char* what) {
  in_addr a{};
  if (inet_pton(AF_INET, ip.c_str(), &a) != 1) throw std::runtime_error(std::string(what) + " '" + ip + "' is not an IPv4 address");
  return a;
}

// Big socket buffers so a burst of one version fits; root may exceed net.core.[rw]mem_max.
void set_buffer(int fd, int force_opt, int opt, int bytes) {
  if (setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof bytes) != 0) setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof bytes);
}

// Host-order fields to little-endian and back (a no-op on the x86/ARM hosts we run on, kept explicit).
template <typename T>
T le(T v) {
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  if constexpr (sizeof(T) == 2) return __builtin_bswap16(v);
  if constexpr (sizeof(T) == 4) return __builtin_bswap32(v);
  if constexpr (sizeof(T) == 8) return __builtin_bswap64(v);
#endif
  return v;
}

}  // namespace

McastKey McastKey::random() {
  McastKey k;
  const std::string hex = fanout_sdk::random_hex(k.bytes.size());
  return *from_hex(hex);
}

std::optional<McastKey> McastKey::from_hex(const std::string& text) {
  McastKey k;
  if (text.size() != 2 * k.bytes.size()) return std::nullopt;
  auto nibble = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
  for (size_t i = 0; i < k.bytes.size(); ++i) {
    const int hi = nibble(text[2 * i]), lo = nibble(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    k.bytes[i] = (unsigned char)(hi << 4 | lo);
  }
  return k;
}

std::string McastKey::hex() const {
  static const char* digits = "0123456789abcdef";
  std::string t;
  for (unsigned char c : bytes) t += digits[c >> 4], t += digits[c & 15];
  return t;
}

DatagramMac::DatagramMac(const McastKey& key) {
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  EVP_MAC_CTX* ctx = mac ? EVP_MAC_CTX_new(mac) : nullptr;
  EVP_MAC_free(mac);  // the context holds its own reference
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0), OSSL_PARAM_construct_end()};
  if (!ctx || EVP_MAC_init(ctx, key.bytes.data(), key.bytes.size(), params) != 1) {
    EVP_MAC_CTX_free(ctx);
    throw std::runtime_error("OpenSSL has no HMAC-SHA256 for the multicast datagrams");
  }
  ctx_ = ctx;
}

DatagramMac::~DatagramMac() { EVP_MAC_CTX_free(static_cast<EVP_MAC_CTX*>(ctx_)); }

std::array<unsigned char, 32> DatagramMac::tag(McastHeader h, const void* payload, size_t len) {
  auto* ctx = static_cast<EVP_MAC_CTX*>(ctx_);
  std::memset(h.mac, 0, sizeof h.mac);
  std::array<unsigned char, 32> out{};
  size_t n = 0;
  // init with no key starts a new message under the key already set
  if (EVP_MAC_init(ctx, nullptr, 0, nullptr) != 1 || EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(&h), sizeof h) != 1 ||
      EVP_MAC_update(ctx, static_cast<const unsigned char*>(payload), len) != 1 || EVP_MAC_final(ctx, out.data(), &n, out.size()) != 1 ||
      n != out.size())
    throw std::runtime_error("HMAC-SHA256 of a multicast datagram failed");
  return out;
}

void DatagramMac::sign(McastHeader& h, const void* payload, size_t len) {
  const auto t = tag(h, payload, len);
  std::memcpy(h.mac, t.data(), t.size());
}

bool DatagramMac::verify(const McastHeader& h, const void* payload, size_t len) {
  const auto t = tag(h, payload, len);
  return CRYPTO_memcmp(t.data(), h.mac, t.size()) == 0;
}

size_t default_chunk_bytes(const std::string& interface_ip) {
  int mtu = 1500;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a; a = a->ifa_next) {
      if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
      char buf[INET_ADDRSTRLEN];
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
      if (interface_ip != buf) continue;
      int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      ifreq req{};
      std::strncpy(req.ifr_name, a->ifa_name, IFNAMSIZ - 1);
      if (fd >= 0 && ioctl(fd, SIOCGIFMTU, &req) == 0) mtu = req.ifr_mtu;
      if (fd >= 0) close(fd);
      break;
    }
    freeifaddrs(list);
  }
  // No IP fragmentation: a lost fragment would lose the whole datagram.
  size_t udp = std::min<size_t>(size_t(std::max(mtu, 576)) - 28, kMaxUdpPayload);
  return udp - sizeof(McastHeader);
}

McastSender::McastSender(const McastConfig& cfg, uint64_t token, const McastKey& key) : cfg_(cfg), token_(token), mac_(key) {
  chunk_ = cfg.chunk_bytes ? std::min(cfg.chunk_bytes, kMaxUdpPayload - sizeof(McastHeader)) : default_chunk_bytes(cfg.interface_ip);
  fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw fanout_sdk::errno_error("multicast socket");
  in_addr ifaddr = parse_ipv4(cfg.interface_ip, "mcast_interface");
  unsigned char ttl = (unsigned char)std::clamp(cfg.ttl, 0, 255), loop = 1;
  if (setsockopt(fd_, IPPROTO_IP, IP_MULTICAST_IF, &ifaddr, sizeof ifaddr) != 0 ||
      setsockopt(fd_, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof ttl) != 0 ||
      setsockopt(fd_, IPPROTO_IP, IP_MULTICAST_LOOP, &loop, sizeof loop) != 0) {
    int e = errno;
    close(fd_);
    errno = e;
    throw fanout_sdk::errno_error("multicast sender on " + cfg.interface_ip);
  }
  set_buffer(fd_, SO_SNDBUFFORCE, SO_SNDBUF, 8 << 20);
}

McastSender::~McastSender() {
  if (fd_ >= 0) close(fd_);
}

size_t McastSender::send(uint64_t version, const std::vector<char>& payload) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(uint16_t(cfg_.port));
  to.sin_addr = parse_ipv4(cfg_.group, "mcast_group");
  const uint32_t n = uint32_t(std::max<size_t>(1, (payload.size() + chunk_ - 1) / chunk_));
  McastHeader h{};
  h.magic = le(kMagic);
  h.proto = le<uint16_t>(2);
  h.header_bytes = le<uint16_t>(sizeof h);
  h.token = le(token_);
  h.version = le(version);
  h.total_bytes = le<uint64_t>(payload.size());
  h.checksum = le(fanout_sdk::checksum64(payload.data(), payload.size()));
  h.n_chunks = le(n);
  h.chunk_bytes = le(uint32_t(chunk_));
  const int64_t t0 = fanout_sdk::monotonic_ns();
  for (uint32_t c = 0; c < n; ++c) {
    h.chunk = le(c);
    size_t off = size_t(c) * chunk_, len = std::min(chunk_, payload.size() - off);
    mac_.sign(h, payload.data() + off, len);
    iovec iov[2] = {{&h, sizeof h}, {const_cast<char*>(payload.data()) + off, len}};
    msghdr m{};
    m.msg_name = &to;
    m.msg_namelen = sizeof to;
    m.msg_iov = iov;
    m.msg_iovlen = 2;
    while (sendmsg(fd_, &m, 0) < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOBUFS || errno == EAGAIN) {  // the device queue is full: yield, then retry
        timespec ts{0, 20000};
        nanosleep(&ts, nullptr);
        continue;
      }
      throw fanout_sdk::errno_error("multicast send to " + cfg_.group + ":" + std::to_string(cfg_.port));
    }
    if (cfg_.rate_bytes_per_s > 0) {
      int64_t due = t0 + int64_t(double(off + len) / cfg_.rate_bytes_per_s * 1e9), now = fanout_sdk::monotonic_ns();
      if (due > now) {
        timespec ts{time_t((due - now) / 1000000000), long((due - now) % 1000000000)};
        nanosleep(&ts, nullptr);
      }
    }
  }
  return payload.size();
}

McastReceiver::McastReceiver(const McastConfig& cfg, uint64_t token, const McastKey& key, std::function<void(const McastVersion&)> on_version)
    : cfg_(cfg), token_(token), mac_(key), on_version_(std::move(on_version)) {
  fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw fanout_sdk::errno_error("multicast socket");
  int one = 1;
  setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // several workers per node share the port
  set_buffer(fd_, SO_RCVBUFFORCE, SO_RCVBUF, 256 << 20);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(cfg.port));
  a.sin_addr = parse_ipv4(cfg.group, "mcast_group");  // bound to the group: no unicast strays on this port
  ip_mreq mreq{};
  mreq.imr_multiaddr = a.sin_addr;
  mreq.imr_interface = parse_ipv4(cfg.interface_ip, "mcast_interface");
  if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      setsockopt(fd_, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mreq, sizeof mreq) != 0) {
    int e = errno;
    close(fd_);
    errno = e;
    throw fanout_sdk::errno_error("cannot join multicast group " + cfg.group + ":" + std::to_string(cfg.port) + " on " + cfg.interface_ip +
                    " (does the interface have MULTICAST set?)");
  }
  socklen_t len = sizeof a;
  getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  thread_ = std::thread([this] { loop(); });
}

McastReceiver::~McastReceiver() {
  if (thread_.joinable()) stop();
  if (fd_ >= 0) close(fd_);
}

McastCounts McastReceiver::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (cur_chunks_ > 0) finish_current(true);
  return counts_;
}

void McastReceiver::finish_current(bool lost) {
  if (lost) {
    ++counts_.versions_lost;
    counts_.chunks_lost += cur_chunks_ - cur_got_;
  } else {
    cur_.checksum_ok = fanout_sdk::checksum64(cur_data_.data(), cur_data_.size()) == cur_checksum_;
    if (cur_.checksum_ok) {
      ++counts_.versions_complete;
      on_version_(cur_);
    } else {
      ++counts_.corrupt;
    }
  }
  cur_chunks_ = cur_got_ = 0;
}

void McastReceiver::loop() {
  std::vector<char> buf(kMaxUdpPayload + 64);
  pollfd p{fd_, POLLIN, 0};
  int64_t drain_until = 0;
  for (;;) {
    // Once asked to stop, drain what is queued (the trainer's DONE comes over TCP and can overtake the last
    // version's datagrams on a busy machine): leave after 20 ms without a datagram, or 500 ms at most (another
    // run may keep sending to the same group).
    const bool draining = stopping_;
    if (draining && drain_until == 0) drain_until = fanout_sdk::monotonic_ns() + 500000000;
    if (poll(&p, 1, draining ? 20 : 50) <= 0 || (draining && fanout_sdk::monotonic_ns() > drain_until)) {
      if (draining) break;
      continue;
    }
    ssize_t n = recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n < ssize_t(sizeof(McastHeader))) continue;
    int64_t now = fanout_sdk::monotonic_ns();
    ++counts_.datagrams;
    McastHeader h;
    std::memcpy(&h, buf.data(), sizeof h);
    if (le(h.magic) != kMagic || le(h.proto) != 2 || le(h.token) != token_) {
      ++counts_.foreign;
      continue;
    }
    // The token is no secret (it is in every datagram): only the mac says the trainer sent this. Nothing of a
    // datagram is read before it passes, so a stranger can neither feed versions nor make the worker allocate.
    if (le(h.header_bytes) != sizeof h || !mac_.verify(h, buf.data() + sizeof h, size_t(n) - sizeof h)) {
      ++counts_.forged;
      continue;
    }
    const uint64_t v = le(h.version), total = le(h.total_bytes);
    const uint32_t c = le(h.chunk), nc = le(h.n_chunks);
    const size_t hb = le(h.header_bytes), cb = le(h.chunk_bytes);
    // Malformed or inconsistent datagrams are dropped: the chunk count must be the one the size and chunk size
    // give, the size at most what the trainer sends, and a version's datagrams must agree with its first one
    // (a datagram's own n_chunks must never index the version's chunk table).
    if (nc == 0 || c >= nc || hb < sizeof h || size_t(n) < hb || cb == 0 || total > cfg_.max_bytes || total == 0 ||
        uint64_t(nc) != (total + cb - 1) / cb) {
      ++counts_.malformed;
      continue;
    }
    const size_t len = size_t(n) - hb, off = size_t(c) * cb;
    if (off + len > total || (c + 1 < nc && len != cb)) {
      ++counts_.malformed;
      continue;
    }
    if (cur_chunks_ && v == cur_.version && (nc != cur_chunks_ || total != cur_.bytes || cb != cur_chunk_bytes_)) {
      ++counts_.malformed;
      continue;
    }
    const bool in_progress = cur_chunks_ && v == cur_.version;
    if (!in_progress && v <= newest_seen_) continue;  // late, or a duplicate of a finished version
    if (!in_progress) {
      if (cur_chunks_) finish_current(true);  // a newer version started before this one completed
      uint64_t previous = std::max(newest_seen_, cur_.version);
      if (v > previous + 1) {  // versions never seen at all (they start at 1)
        counts_.versions_lost += v - previous - 1;
        counts_.chunks_lost += (v - previous - 1) * nc;
      }
      cur_ = McastVersion{};
      cur_.version = v;
      cur_.bytes = total;
      cur_.first_chunk_ns = now;
      cur_checksum_ = le(h.checksum);
      cur_chunks_ = nc;
      cur_chunk_bytes_ = cb;
      cur_got_ = 0;
      cur_data_.resize(total);
      cur_have_.assign(nc, false);
      newest_seen_ = v;
    }
    if (cur_have_[c] || total != cur_.bytes) continue;
    std::memcpy(cur_data_.data() + off, buf.data() + hb, len);
    cur_have_[c] = true;
    cur_.last_chunk_ns = now;
    if (++cur_got_ == cur_chunks_) finish_current(false);
  }
}

}  // namespace parameter_serving
