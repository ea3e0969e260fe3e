// The messages between the RedisAI module and its executor process (executor.h), one request then one reply
// over a socket pair. Header-only and free of torch and Redis types, so that both sides and the tests share it.
//   request: its length, op (1 byte) then its fields; reply: status (0 OK, 1 error), the body's length, then
//   the error text or the result. Integers are native (both ends are one host), strings and blobs length-prefixed.
#pragma once
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "redisai_args.h"
#include "torch_backend.h"

namespace redisai::wire {

enum Op : char { kLoadModel = 'M', kLoadScript = 'S', kDrop = 'D', kRunModel = 'R', kRunScript = 'F' };

// Bounds on what a message may announce, checked before anything is allocated.
inline constexpr uint64_t kMaxBlob = uint64_t(1) << 33;  // a model file of 8 GiB
inline constexpr uint32_t kMaxList = 1 << 20;

struct Writer {
  std::string out;
  void u8(char v) { out.push_back(v); }
  template <typename T>
  void num(T v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void str(std::string_view s) {
    num<uint64_t>(s.size());
    out.append(s);
  }
  void tensor(const TensorValue& t) {
    num<int32_t>(t.dtype);
    num<uint32_t>(uint32_t(t.dims.size()));
    for (long long d : t.dims) num<int64_t>(d);
    str(std::string_view(t.data, t.bytes));
  }
  void tensors(const std::vector<TensorValue>& v) {
    num<uint32_t>(uint32_t(v.size()));
    for (const auto& t : v) tensor(t);
  }
  void strings(const std::vector<std::string>& v) {
    num<uint32_t>(uint32_t(v.size()));
    for (const auto& s : v) str(s);
  }
};

// Reads what a Writer wrote; throws std::runtime_error on a short or inconsistent message.
struct Reader {
  std::string_view in;
  size_t at = 0;
  void need(size_t n) {
    if (in.size() - at < n) throw std::runtime_error("truncated executor message");
  }
  char u8() {
    need(1);
    return in[at++];
  }
  template <typename T>
  T num() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, in.data() + at, sizeof v);
    at += sizeof v;
    return v;
  }
  std::string_view view() {
    const uint64_t n = num<uint64_t>();
    if (n > kMaxBlob) throw std::runtime_error("executor message announces " + std::to_string(n) + " bytes");
    need(size_t(n));
    std::string_view s = in.substr(at, size_t(n));
    at += size_t(n);
    return s;
  }
  std::string str() { return std::string(view()); }
  uint32_t count() {
    const uint32_t n = num<uint32_t>();
    if (n > kMaxList) throw std::runtime_error("executor message announces " + std::to_string(n) + " entries");
    return n;
  }
  // A tensor that owns its bytes (a copy out of the message).
  TensorValue tensor() {
    TensorValue t;
    t.dtype = num<int32_t>();
    const uint32_t nd = num<uint32_t>();
    if (t.dtype < 0 || t.dtype >= kNumTypes || nd == 0 || nd > kMaxTensorDims) throw std::runtime_error("malformed tensor in an executor message");
    for (uint32_t i = 0; i < nd; ++i) t.dims.push_back(num<int64_t>());
    auto bytes = std::make_shared<std::string>(view());
    t.data = bytes->data();
    t.bytes = bytes->size();
    t.keep = bytes;
    return t;
  }
  std::vector<TensorValue> tensors() {
    std::vector<TensorValue> v(count());
    for (auto& t : v) t = tensor();
    return v;
  }
  std::vector<std::string> strings() {
    std::vector<std::string> v(count());
    for (auto& s : v) s = str();
    return v;
  }
};

}  // namespace redisai::wire
