// A file that one pass writes or reads whole goes through the kernel's page cache in passing once it is past 1 GiB
// (the CSV files' rule, StagedFile::kDirectAfter): the pass drops the file's clean pages as it goes, so that the
// next pages reuse the memory the last ones held. On the virtual machines measured here a page of fresh memory
// costs more than the I/O into it: 4 GB written and synced in 10 MB pieces took 14.6 s, 4.7 s with each piece
// dropped once synced; 100 M samples' statistics read their 4 GB database from the disk in 13.1 s into fresh
// cache, 7.5 s dropping as they went. A smaller file stays cached for the next pass. Only clean pages go: nothing
// unwritten is lost.
// It works through a descriptor the process already has open on the file (SQLite's), found by its device and
// inode, and never opens or closes one of its own: closing any descriptor of a file releases every POSIX lock the
// process holds on it, SQLite's among them. No descriptor open on it: nothing is dropped.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>

#include "results/staged_file.h"

namespace fanout {

class CacheBound {
 public:
  static constexpr uint64_t kLarge = StagedFile::kDirectAfter, kEvery = uint64_t(64) << 20;
  explicit CacheBound(const std::filesystem::path& file, uint64_t large = kLarge, uint64_t every = kEvery);

  void shed() const;          // drops the file's clean cached pages now, when it is past `large`
  void passed(size_t bytes);  // the pass has read or written `bytes` more: sheds every `every`

 private:
  std::filesystem::path file_;
  uint64_t large_, every_, since_ = 0;
};

}  // namespace fanout
