// How samples are stored: one row of sample_blocks per (run, metric, rank, block), holding up to
// kSamplesPerBlock samples in recording order as a JSON array of [iteration, t_start, value, warmup] rows.
// One B-tree row per block instead of per sample is what makes ingesting 10^7 samples take seconds; JSON keeps
// the `samples` view plain SQL (SQLite's own json_each unpacks it, no extension to load); text lets the CSV
// export copy fields instead of formatting them again. Numbers are written shortest-exact (reals always with a
// '.' or an exponent, so SQLite reads them back as REAL); NaN is null, +-inf is +-9e999 as SQLite writes it.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace fanout {

constexpr size_t kSamplesPerBlock = 4096;

class SampleBlockWriter {
 public:
  void add(int64_t iteration, double t_start, double value, bool warmup);
  size_t count() const { return count_; }
  size_t bytes() const { return text_.size(); }
  // The block's JSON text (valid until the next add or clear).
  std::string_view text();
  std::string take();  // the text, leaving the writer empty
  void clear();

 private:
  std::string text_;
  size_t count_ = 0;
};

// One row of a block; the fields are the stored text (a view into the block).
struct SampleRowText {
  std::string_view iteration, t_start, value;
  bool warmup = false;
};

// Reads a block's rows in order. Throws UserError naming `what` on text that is not a block.
class SampleBlockReader {
 public:
  SampleBlockReader(std::string_view json, std::string_view what);
  bool next(SampleRowText& row);

 private:
  [[noreturn]] void fail(const char* expected) const;
  void expect(char c);
  std::string_view field();
  std::string_view s_, what_;
  size_t pos_ = 0;
  bool first_ = true;
};

// A stored number as a double: null -> NaN, +-9e999 -> +-inf. Throws UserError on anything else.
double stored_real(std::string_view text);
int64_t stored_integer(std::string_view text);

}  // namespace fanout
