// The per-rank sample file: <run>/samples/<role>.<rank>.samples, written by fanout-rank, read at ingestion.
// Binary, little-endian, append-only, so that a rank that dies leaves every complete record readable:
//   header : "FOSAMP01" | i64 monotonic anchor ns | i64 wall anchor ns (same instant) | i32 rank |
//            u16 role length | role bytes | u16 node length | node bytes
//   'M'    : u16 metric id | u16 name length | name | u16 unit length | unit       (defines a metric id)
//   'S'    : u16 metric id | u8 warmup | i64 iteration | i64 t_start ns (monotonic) | f64 value
//   'R'    : u16 length | CPUs the rank may run on ("0-1,4") | u16 length | its GPUs ("0,1", "" for none)
//            (written once, first, by fanout-rank; files without it come from fanouts before it)
// A sample's wall-clock start is wall_anchor + (t_start - mono_anchor).
#pragma once
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace fanout {

struct Sample {
  int rank = 0;
  std::string_view role, metric, unit;  // valid during the callback only
  uint16_t metric_id = 0;                // the file's id of the metric: 0, 1, ... in order of definition
  int64_t iteration = 0;
  double t_start_s = 0;  // wall clock, seconds since the epoch
  double value = 0;
  bool warmup = false;
};

class SampleWriter {
 public:
  SampleWriter(const std::filesystem::path& path, int rank, const std::string& role, const std::string& node,
               int64_t mono_anchor_ns, int64_t wall_anchor_ns);
  ~SampleWriter();
  // false when the file could not be written (disk full, ...); the error is in error().
  bool record(const std::string& metric, const std::string& unit, int64_t iteration, int64_t t_start_ns, double value,
              bool warmup);
  // What the rank got to run on (the 'R' record): its CPU list and GPU list.
  void resources(const std::string& cpus, const std::string& gpus);
  bool flush();
  const std::string& error() const { return error_; }
  uint64_t count() const { return count_; }

 private:
  void put(const void* p, size_t n) { buf_.append(static_cast<const char*>(p), n); }
  FILE* f_ = nullptr;
  std::string buf_, error_;
  std::map<std::pair<std::string, std::string>, uint16_t> ids_;
  uint64_t count_ = 0;
  int64_t flushed_ns_ = 0;  // monotonic time of the last flush
};

struct SampleFileInfo {
  int rank = 0;
  std::string role, node;  // node: where the rank ran
  std::string cpus, gpus;  // what it ran on ('R' record; empty when the file has none)
  uint64_t samples = 0;
  bool truncated = false;  // the file ends inside a record (the rank died while writing)
};

// Decodes a whole buffer, calling on_sample for each sample. Throws UserError naming `what` and the byte
// offset when the data is not a sample file or is corrupt (a truncated tail is reported, not thrown).
SampleFileInfo decode_samples(std::string_view data, const std::string& what,
                              const std::function<void(const Sample&)>& on_sample);
SampleFileInfo read_sample_file(const std::filesystem::path& path, const std::function<void(const Sample&)>& on_sample);

}  // namespace fanout
