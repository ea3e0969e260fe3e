#include "wire.h"

#include <cstring>

namespace pslite {

namespace {
void put(unsigned char* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint64_t get(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}
}  // namespace

// Layout: magic u32 | proto u8 | type u8 | flags u16 | sender u32 | reserved u32 | request u64 | key u64 | len u64
void encode(const Header& h, unsigned char* out) {
  std::memset(out, 0, kHeaderBytes);
  put(out, kMagic, 4);
  out[4] = kProto;
  out[5] = static_cast<unsigned char>(h.type);
  put(out + 6, h.flags, 2);
  put(out + 8, h.sender, 4);
  put(out + 16, h.request, 8);
  put(out + 24, h.key, 8);
  put(out + 32, h.len, 8);
}

std::string decode(const unsigned char* in, size_t n, Header& h) {
  if (n < kHeaderBytes) return "short header (" + std::to_string(n) + " bytes)";
  if (get(in, 4) != kMagic) return "not a fanout ps-lite message (bad magic)";
  if (in[4] != kProto) return "peer speaks protocol " + std::to_string(in[4]) + ", this side " + std::to_string(kProto);
  if (in[5] < uint8_t(MsgType::Push) || in[5] > uint8_t(MsgType::Error)) return "unknown message type " + std::to_string(in[5]);
  // encode() writes zeros there: anything else is not a header this version wrote (and would not re-encode the same).
  if (get(in + 12, 4) != 0) return "reserved header bytes 12-15 are not zero";
  h.type = static_cast<MsgType>(in[5]);
  h.flags = uint16_t(get(in + 6, 2));
  h.sender = uint32_t(get(in + 8, 4));
  h.request = get(in + 16, 8);
  h.key = get(in + 24, 8);
  h.len = get(in + 32, 8);
  if (h.len > kMaxPayload) return "payload length " + std::to_string(h.len) + " is beyond the 16 GiB limit";
  return "";
}

}  // namespace pslite
