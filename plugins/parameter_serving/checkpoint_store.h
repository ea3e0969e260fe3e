// The filesystem "parameter DB" of the parameter-serving benchmark: a folder of versioned checkpoint files.
// A checkpoint is written beside its final name and renamed into place, so a reader sees a whole file or
// none; each file carries its payload's checksum so a reader can prove that. Old versions are removed
// (keep_versions newest stay); a reader that loses a race with that removal simply looks again.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace parameter_serving {

struct CheckpointHeader {
  char magic[8];            // "FPSCKPT1"
  uint64_t version;
  uint64_t payload_bytes;
  int64_t publish_wall_ns;  // CLOCK_REALTIME when the trainer made it
  uint64_t checksum;        // fanout_sdk::checksum64 of the payload
};

enum class ReadStatus { Ok, Gone, Torn };

class CheckpointStore {
 public:
  // Creates dir (0700) when missing. keep_versions >= 1.
  CheckpointStore(std::string dir, int keep_versions, bool fsync_each);

  // Writes version atomically (temporary file + rename), then removes versions older than the newest
  // keep_versions. Returns the bytes written (header + payload). Throws std::runtime_error with the path.
  size_t publish(uint64_t version, const std::vector<char>& payload, int64_t publish_wall_ns);
  // The newest complete version in the folder, 0 when none.
  uint64_t newest_version() const;
  // Reads version into payload (resized) and header: Gone when it was removed meanwhile, Torn when the
  // bytes do not match their header (short file, wrong checksum).
  ReadStatus read(uint64_t version, std::vector<char>& payload, CheckpointHeader& header) const;

  std::string path_of(uint64_t version) const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  int keep_;
  bool fsync_;
};

// Free bytes for an unprivileged writer in the file system holding path (or its nearest existing parent).
uint64_t free_bytes(const std::string& path);

}  // namespace parameter_serving
