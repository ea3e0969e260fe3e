// UDP multicast of versioned checkpoints: the trainer sends each version as numbered chunks (a fixed
// little-endian header + a slice of the payload, gathered in one sendmsg); a worker reassembles them, checks
// the whole version's checksum, and counts what it lost (chunks of versions it never completed, and versions
// it never saw). A per-benchmark token keeps concurrent benchmarks on the same group/port apart, and every
// datagram carries an HMAC-SHA256 under a key that only the benchmark's ranks hold: anyone can send to a group.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace parameter_serving {

struct McastConfig {
  std::string group = "239.255.41.1";
  int port = 30000;
  int ttl = 1;
  std::string interface_ip = "127.0.0.1";  // the local address whose interface sends and joins
  size_t chunk_bytes = 0;                  // payload bytes per datagram; 0: from the interface's MTU
  double rate_bytes_per_s = 0;             // sender pacing; 0: as fast as the socket takes it
  uint64_t max_bytes = 1ull << 32;         // receiver: a version announcing more is refused (the trainer's data_size)
};

// The interface's MTU minus IP/UDP and our header (at most 65,507 - header), for chunk_bytes = 0.
size_t default_chunk_bytes(const std::string& interface_ip);

// The key that authenticates one benchmark's datagrams. The trainer makes it and hands it to its workers through
// the job's rendezvous (authenticated, per job), as it hands them its address: it never goes on the group.
struct McastKey {
  std::array<unsigned char, 32> bytes{};
  static McastKey random();                                    // from the kernel's CSPRNG
  static std::optional<McastKey> from_hex(const std::string& text);  // nullopt unless 64 hex characters
  std::string hex() const;
};

struct McastHeader {  // little-endian on the wire
  uint32_t magic;     // 'FPSM'
  uint16_t proto;     // 2 (1 had no mac)
  uint16_t header_bytes;
  uint64_t token;
  uint64_t version;
  uint64_t total_bytes;
  uint64_t checksum;  // of the whole version's payload
  uint32_t chunk;
  uint32_t n_chunks;
  uint32_t chunk_bytes;  // payload bytes of every chunk but the last
  uint32_t reserved;
  unsigned char mac[32];  // HMAC-SHA256 of the header (this field zero) and the chunk's payload
};
static_assert(sizeof(McastHeader) == 88, "wire header is 88 bytes");

// HMAC-SHA256 of a datagram under one key; the key schedule is computed once. One per thread.
class DatagramMac {
 public:
  explicit DatagramMac(const McastKey& key);
  ~DatagramMac();
  DatagramMac(const DatagramMac&) = delete;
  DatagramMac& operator=(const DatagramMac&) = delete;
  // Sets h.mac for this header and payload (the trainer's side; also a fuzzer's that plays a faulty trainer).
  void sign(McastHeader& h, const void* payload, size_t len);
  // Whether h.mac is this header's and payload's, compared in constant time.
  bool verify(const McastHeader& h, const void* payload, size_t len);

 private:
  std::array<unsigned char, 32> tag(McastHeader h, const void* payload, size_t len);
  void* ctx_ = nullptr;  // EVP_MAC_CTX, keyed
};

class McastSender {
 public:
  McastSender(const McastConfig& cfg, uint64_t token, const McastKey& key);
  ~McastSender();
  // Sends every chunk of one version; returns the payload bytes sent. Throws on a socket error.
  size_t send(uint64_t version, const std::vector<char>& payload);
  size_t chunk_bytes() const { return chunk_; }

 private:
  McastConfig cfg_;
  uint64_t token_;
  DatagramMac mac_;
  size_t chunk_;
  int fd_ = -1;
};

struct McastVersion {
  uint64_t version = 0;
  uint64_t bytes = 0;
  int64_t first_chunk_ns = 0, last_chunk_ns = 0;  // CLOCK_MONOTONIC
  bool checksum_ok = false;
};

struct McastCounts {
  uint64_t datagrams = 0, foreign = 0, versions_complete = 0, versions_lost = 0, chunks_lost = 0, corrupt = 0;
  uint64_t malformed = 0;  // with our token but inconsistent (sizes, chunk counts, a version's datagrams disagreeing)
  uint64_t forged = 0;     // with our token but not our key's mac: not the trainer's, dropped unread
};

// Joins the group and receives on its own thread until stop(); on_version runs on that thread for each
// complete version (in order of completion).
class McastReceiver {
 public:
  McastReceiver(const McastConfig& cfg, uint64_t token, const McastKey& key, std::function<void(const McastVersion&)> on_version);
  ~McastReceiver();
  // Stops the thread once the queued datagrams are read (20 ms without one); an incomplete version counts as lost.
  McastCounts stop();
  // The UDP port it listens on: cfg.port, or the kernel's pick when that was 0 (tests: no shared fixed port).
  int port() const { return port_; }

 private:
  void loop();
  void finish_current(bool lost);
  McastConfig cfg_;
  uint64_t token_;
  DatagramMac mac_;
  std::function<void(const McastVersion&)> on_version_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  McastCounts counts_;
  // The version being reassembled.
  McastVersion cur_;
  uint64_t cur_checksum_ = 0;
  uint32_t cur_chunks_ = 0, cur_got_ = 0;
  size_t cur_chunk_bytes_ = 0;
  std::vector<char> cur_data_;
  std::vector<bool> cur_have_;
  uint64_t newest_seen_ = 0;
};

}  // namespace parameter_serving
