// A checksum fast enough to verify every byte a benchmark moves (SDK, header-only).
#pragma once
#include <cstdint>
#include <cstring>

namespace fanout_sdk {

// A fast 64-bit checksum of a buffer (multiply-xor over 8-byte words, four lanes: near memory bandwidth), for
// benchmarks that verify the bytes they moved without the check dominating the measurement.
inline uint64_t checksum64(const void* data, size_t len) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0x9e3779b97f4a7c15ull ^ len;
  size_t i = 0;
  uint64_t a = h, b = h + 1, c = h + 2, d = h + 3;
  for (; i + 32 <= len; i += 32) {
    uint64_t w[4];
    std::memcpy(w, p + i, 32);
    a = (a ^ w[0]) * 0xff51afd7ed558ccdull;
    b = (b ^ w[1]) * 0xc4ceb9fe1a85ec53ull;
    c = (c ^ w[2]) * 0xff51afd7ed558ccdull;
    d = (d ^ w[3]) * 0xc4ceb9fe1a85ec53ull;
  }
  h = a ^ (b >> 1) ^ (c << 1) ^ (d >> 3);
  for (; i < len; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

}  // namespace fanout_sdk
