// The per-rank sample file: <run>/samples/<role>.<rank>.samples, written by fanout-rank, read at ingestion.
// Binary, little-endian, append-only, so that a rank that dies leaves every complete record readable:
//   header : "FOSAMP01" | i64 monotonic anchor ns | i64 wall anchor ns (same instant) | i32 rank |
//            u16 role length | role bytes | u16 node length | node bytes
//   'M'    : u16 metric id | u16 name length | name | u16 unit length | unit       (defines a metric id)
//   'S'    : u16 metric id | u8 warmup | i64 iteration | i64 t_start ns (monotonic) | f64 value
//   'R'    : u16 length | CPUs the rank may run on ("0-1,4") | u16 length | its GPUs ("0,1", "" for none)
//            (written once, first, by fanout-rank; files without it come from fanouts before it)
//   'D'    : u16 name length | metric name | u8 better (1 lower, 2 higher, 3 none) | u32 flags (1: setup cost)
//            (what the plugin declared of a metric, before its first sample; a later 'D' of a name overrides)
// A sample's wall-clock start is wall_anchor + (t_start - mono_anchor).
#pragma once
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

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

// Why a metric name or unit cannot be stored ("" when it can): text that is not valid UTF-8 or holds a control
// character (a NUL, a newline) would become a CSV header, a plot title and a reference that later steps refuse or
// misread. The writer refuses it at the rank, the reader takes a file holding one as corrupt.
std::string bad_metric_text(const std::string& metric, const std::string& unit);

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
  // What the plugin declares of a metric (the 'D' record): better 1 lower, 2 higher, 3 none; flags 1 setup cost.
  bool declare(const std::string& metric, uint8_t better, uint32_t flags);
  bool flush();
  // Called once for each metric name when it is first recorded, before its first sample is written (fanout-rank
  // declares the plugin's table entry for it there).
  void on_new_metric(std::function<void(const std::string& metric)> fn) { on_new_metric_ = std::move(fn); }
  const std::string& error() const { return error_; }
  uint64_t count() const { return count_; }

 private:
  void put(const void* p, size_t n) { buf_.append(static_cast<const char*>(p), n); }
  bool write_out();  // the buffer to the file, flushed; false (error_ said) when that failed
  FILE* f_ = nullptr;
  std::string buf_, error_;
  std::map<std::pair<std::string, std::string>, uint16_t> ids_;
  uint64_t count_ = 0;
  int64_t flushed_ns_ = 0;  // monotonic time of the last flush
  std::function<void(const std::string&)> on_new_metric_;
  std::set<std::string> names_;  // metric names seen (a name may come in several units)
};

// What a rank declared of a metric ('D' record): the direction a verdict reads instead of guessing from the unit.
struct MetricDeclaration {
  std::string metric;
  uint8_t better = 0;  // 1 lower, 2 higher, 3 none (fanout_better)
  uint32_t flags = 0;  // 1: a setup cost (FANOUT_METRIC_SETUP_COST)
};
// "lower", "higher", "none", or "" (undeclared) for a declaration's code.
const char* better_text(uint8_t better);

struct SampleFileInfo {
  int rank = 0;
  std::string role, node;  // node: where the rank ran
  std::string cpus, gpus;  // what it ran on ('R' record; empty when the file has none)
  uint64_t samples = 0;
  bool truncated = false;  // the file ends inside a record (the rank died while writing)
  std::vector<MetricDeclaration> declarations;  // in file order
};

// Decodes a sample file as its bytes come, in pieces of any size: feed() calls on_sample for each complete sample and
// keeps only a record cut by the piece's end; finish() says whether the file ended inside a record. Memory holds one
// record, never the file. Throws UserError naming `what` and the byte offset, as decode_samples says.
class SampleDecoder {
 public:
  SampleDecoder(std::string what, std::function<void(const Sample&)> on_sample);
  void feed(std::string_view bytes);
  SampleFileInfo finish();

 private:
  size_t header(std::string_view d, bool last);
  size_t record(std::string_view d, size_t at);
  UserError corrupt(size_t at, const std::string& why) const;
  std::string what_;
  std::function<void(const Sample&)> on_sample_;
  std::string pending_;  // the start of a record the next piece completes
  uint64_t base_ = 0;    // the file offset of what the next feed decodes from
  bool header_done_ = false;
  int64_t mono0_ = 0, wall0_ = 0;
  std::vector<std::pair<std::string, std::string>> metrics_;  // id -> (name, unit)
  SampleFileInfo info_;
};

// Decodes a whole buffer, calling on_sample for each sample. Throws UserError naming `what` and the byte
// offset when the data is not a sample file or is corrupt (a truncated tail is reported, not thrown).
SampleFileInfo decode_samples(std::string_view data, const std::string& what,
                              const std::function<void(const Sample&)>& on_sample);
// The same for a file, read 4 MiB at a time.
SampleFileInfo read_sample_file(const std::filesystem::path& path, const std::function<void(const Sample&)>& on_sample);

}  // namespace fanout
