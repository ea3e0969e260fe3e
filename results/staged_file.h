// A file written to <path>.tmp.<pid> (optionally gzip-compressed) and renamed into place on commit(): two
// drivers finishing one experiment at once each write their own and the last rename wins, whole; one that fails
// or is destroyed uncommitted leaves nothing behind.
// A plain file goes out in whole 1 MiB chunks from an aligned buffer (4 MiB writes made the kernel's copy into
// the page cache 3x slower in one run of two here: larger cache folios to allocate), and past `direct_after` bytes
// bypasses the page cache (O_DIRECT): copying a CSV of many GB into the cache cost 2-4x writing it directly here
// (100 M samples' 8.5 GB samples.csv: 26 s against 11 s, most of it the kernel copying into fresh cache pages), and
// a file that size would only push out what is worth caching. A filesystem that refuses O_DIRECT gets the same
// bytes through the cache.
#pragma once
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string_view>

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
  void drain_chunks();
  void write_out(size_t n, size_t from = 0);
  void set_direct(bool on);
  [[noreturn]] void fail();
  bool close();
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::filesystem::path path_, tmp_;
  uint64_t direct_after_;
  int fd_ = -1;
  gzFile gz_ = nullptr;
  std::unique_ptr<char[], Free> buf_;
  size_t used_ = 0;
  uint64_t written_ = 0;
  bool direct_ = false, direct_refused_ = false, went_direct_ = false;
};

}  // namespace fanout
