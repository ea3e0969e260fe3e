#include "results/sample_block.h"

#include <array>
#include <charconv>
#include <cmath>
#include <limits>

#include "common/error.h"

namespace fanout {

namespace {

void append_real(std::string& s, double v) {
  if (std::isnan(v)) {
    s += "null";
    return;
  }
  if (std::isinf(v)) {
    s += v > 0 ? "9e999" : "-9e999";
    return;
  }
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  s.append(buf, end);
  if (std::string_view(buf, size_t(end - buf)).find_first_of(".e") == std::string_view::npos) s += ".0";
}

void append_integer(std::string& s, int64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  s.append(buf, end);
}

}  // namespace

void SampleBlockWriter::add(int64_t iteration, double t_start, double value, bool warmup) {
  if (!text_.empty()) text_.back() = ',';  // reopen the array closed by text()
  else text_ += '[';
  text_ += '[';
  append_integer(text_, iteration);
  text_ += ',';
  append_real(text_, t_start);
  text_ += ',';
  append_real(text_, value);
  text_ += warmup ? ",1]]" : ",0]]";
  ++count_;
}

std::string_view SampleBlockWriter::text() { return text_.empty() ? std::string_view("[]") : std::string_view(text_); }

std::string SampleBlockWriter::take() {
  if (text_.empty()) return "[]";
  // The next block is about as long as this one: reserve it now rather than grow it by doubling (each growth copies
  // the block so far; that copying was a tenth of ingestion).
  const size_t capacity = text_.capacity();
  std::string out = std::move(text_);
  text_ = std::string();
  text_.reserve(capacity);
  count_ = 0;
  return out;
}

void SampleBlockWriter::clear() {
  text_.clear();
  count_ = 0;
}

SampleBlockReader::SampleBlockReader(std::string_view json, std::string_view what) : s_(json), what_(what) {
  expect('[');
}

void SampleBlockReader::fail(const char* expected) const {
  throw UserError(std::string(what_) + ": stored sample block is not [[iteration,t_start,value,warmup],...]: expected " +
                  expected + " at byte " + std::to_string(pos_));
}

void SampleBlockReader::expect(char c) {
  while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  if (pos_ >= s_.size() || s_[pos_] != c) fail(std::string(1, c).c_str());
  ++pos_;
}

namespace {
// Characters that end a field: one table lookup per character (this loop reads every stored byte).
constexpr auto kFieldEnd = [] {
  std::array<bool, 256> t{};
  t[','] = t[']'] = t[' '] = t['['] = true;
  return t;
}();
}  // namespace

std::string_view SampleBlockReader::field() {
  const char* p = s_.data() + pos_;
  const char* end = s_.data() + s_.size();
  while (p < end && *p == ' ') ++p;
  const char* start = p;
  while (p < end && !kFieldEnd[static_cast<unsigned char>(*p)]) ++p;
  pos_ = size_t(p - s_.data());
  if (p == start) fail("a number");
  return {start, size_t(p - start)};
}

bool SampleBlockReader::next(SampleRowText& row) {
  while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  if (pos_ < s_.size() && s_[pos_] == ']') {
    ++pos_;
    return false;
  }
  if (!first_) expect(',');
  first_ = false;
  expect('[');
  row.iteration = field();
  expect(',');
  row.t_start = field();
  expect(',');
  row.value = field();
  expect(',');
  std::string_view w = field();
  if (w != "0" && w != "1") fail("warmup 0 or 1");
  row.warmup = w == "1";
  expect(']');
  return true;
}

double stored_real(std::string_view text) {
  if (text == "null") return std::numeric_limits<double>::quiet_NaN();
  if (text == "9e999") return std::numeric_limits<double>::infinity();
  if (text == "-9e999") return -std::numeric_limits<double>::infinity();
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size())
    throw UserError("stored sample value '" + std::string(text) + "' is not a number");
  return v;
}

int64_t stored_integer(std::string_view text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size())
    throw UserError("stored iteration '" + std::string(text) + "' is not an integer");
  return v;
}

}  // namespace fanout
