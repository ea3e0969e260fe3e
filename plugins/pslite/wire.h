// The ps-lite-style wire format: every message is a fixed 40-byte little-endian header followed by `len`
// payload bytes. Versioned (magic + proto), explicit-endian, and checked on receipt: a peer speaking another
// version or sending garbage gets a clear error instead of a misread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace pslite {

enum class MsgType : uint8_t {
  Push = 1,      // worker -> server: store value for key; answered by Ack
  Pull = 2,      // worker -> server: answered by Value
  PushPull = 3,  // worker -> server: store, then answered by Value (one request)
  Ack = 4,
  Value = 5,
  Hello = 6,      // first message on a data connection: sender id, host identity, optional shm segment name
  HelloOk = 7,
  AddNode = 8,    // node -> scheduler: "role host port hostid"
  NodeList = 9,   // scheduler -> nodes: one line per node "id role host port hostid"
  Barrier = 10,   // node -> scheduler
  BarrierDone = 11,
  Error = 12,     // payload: text
};

constexpr uint32_t kMagic = 0x4c535046;  // "FPSL"
constexpr uint8_t kProto = 1;
constexpr size_t kHeaderBytes = 40;
constexpr uint64_t kMaxPayload = uint64_t(1) << 34;  // 16 GiB: larger is a corrupt header

struct Header {
  MsgType type;
  uint16_t flags = 0;
  uint32_t sender = 0;
  uint64_t request = 0;  // matches a response to its request
  uint64_t key = 0;
  uint64_t len = 0;      // payload bytes that follow
};

// Writes h into out[kHeaderBytes].
void encode(const Header& h, unsigned char* out);
// Reads a header; returns an empty string when valid, else what is wrong with it.
std::string decode(const unsigned char* in, size_t n, Header& h);

}  // namespace pslite
