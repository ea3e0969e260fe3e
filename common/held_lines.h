// An output stream over a file descriptor that holds what it is given until it is flushed, then writes it with one
// write(2): a driver's event lines (a submission, a start, an end) reach its log once per poll cycle, not a system
// call per line. Whole lines are also written once they have been held kMaxHoldNs or reach kMaxHeldBytes, so a long
// stretch without a flush (a thousand submissions) still shows as it goes.
#pragma once
#include <cstdint>
#include <ostream>
#include <streambuf>
#include <string>

namespace fanout {

class HeldLinesBuf : public std::streambuf {
 public:
  static constexpr int64_t kMaxHoldNs = 200'000'000;
  static constexpr size_t kMaxHeldBytes = 64 << 10;
  explicit HeldLinesBuf(int fd, int64_t max_hold_ns = kMaxHoldNs) : fd_(fd), max_hold_ns_(max_hold_ns) {}
  ~HeldLinesBuf() override { sync(); }

 protected:
  int_type overflow(int_type c) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  // Writes what is held; -1 (the stream's badbit) when the descriptor took not all of it, now or in a write made
  // without a flush since the last one.
  int sync() override;

 private:
  void write_if_held_long();
  int fd_;
  int64_t max_hold_ns_;
  std::string held_;
  int64_t held_since_ns_ = 0;  // monotonic time the oldest byte held was given
  bool failed_ = false;        // a write made without a flush lost text: the next sync() says so
};

class HeldLines : public std::ostream {
 public:
  explicit HeldLines(int fd, int64_t max_hold_ns = HeldLinesBuf::kMaxHoldNs) : std::ostream(nullptr), buf_(fd, max_hold_ns) {
    rdbuf(&buf_);
  }
  ~HeldLines() override { flush(); }

 private:
  HeldLinesBuf buf_;
};

}  // namespace fanout
