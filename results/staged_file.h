// A file written to <path>.tmp.<pid> (optionally gzip-compressed) and renamed into place on commit(): two
// drivers finishing one experiment at once each write their own and the last rename wins, whole; one that fails
// or is destroyed uncommitted leaves nothing behind.
// A plain file goes out in whole 1 MiB chunks from an aligned buffer (4 MiB writes made the kernel's copy into
// the page cache 3x slower in one run of two here: larger cache folios to allocate), and past `direct_after` bytes
// bypasses the page cache (O_DIRECT): copying a CSV of many GB into the cache cost 2-4x writing it directly here
// (100 M samples' 8.5 GB samples.csv: 26 s against 11 s, most of it the kernel copying into fresh cache pages), and
// a file that size would only push out what is worth caching. A filesystem that refuses O_DIRECT gets the same
// bytes through the cache. Those direct chunks are written by a thread of the file's own while the caller makes
// the next ones (three chunks in flight at most): a direct write waits for the disk, and the CSV pass spent that
// wait formatting nothing (100 M samples' CSV phase 21-24 s -> 15-19 s, bench/results_bench, 4 rounds alternating,
// 2026-12-07). A write that fails there is thrown by the next line() that hands over a chunk, or by commit().
#pragma once
#include <zlib.h>

#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

namespace fanout {

class StagedFile {
 public:
  static constexpr uint64_t kDirectAfter = uint64_t(1) << 30;
  StagedFile(std::filesystem::path path, bool gzip, uint64_t direct_after = kDirectAfter);
  ~StagedFile();
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;
  void line(std::string_view s);  // s and a newline
  void commit();                  // the rest out, closed, renamed into place; throws UserError naming the file
  bool went_direct() const { return went_direct_; }  // some chunk bypassed the page cache

 private:
  static constexpr size_t kAlign = 4096, kChunk = size_t(1) << 20, kMaxSpill = size_t(1) << 20;
  static constexpr size_t kInFlight = 3;  // direct chunks handed to the writer and not yet written, at most
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  using Buffer = std::unique_ptr<char[], Free>;
  static Buffer new_buffer();
  void drain_chunks();
  void hand_over_chunk();
  void write_out(const char* from, size_t n);
  void set_direct(bool on);
  void writer_loop();
  void wait_for_writer();  // every chunk handed over written (or failed)
  void stop_writer();
  void throw_writer_error();
  [[noreturn]] void fail();
  bool close();
  std::filesystem::path path_, tmp_;
  uint64_t direct_after_;
  int fd_ = -1;
  gzFile gz_ = nullptr;
  Buffer buf_;
  size_t used_ = 0;
  uint64_t written_ = 0;
  bool direct_ = false, direct_refused_ = false, went_direct_ = false, committed_ = false;
  // The writer thread's: chunks to write in order, buffers to fill again, its first error (errno) and whether it
  // is writing one now. Guarded by mu_.
  std::thread writer_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Buffer> queued_;
  std::vector<Buffer> spare_;
  int writer_errno_ = 0;
  bool writing_ = false, stopping_ = false, writer_went_direct_ = false;
};

}  // namespace fanout
