// What an exec step's output means: parsers that turn a program's lines (stdout, stderr or files it wrote) into
// samples. One table (parsers.cpp) names them, as the scheduler registry names schedulers; each is a small unit
// with its own tests (tests/exec_parsers_test.cpp) and fuzz target (tests/fuzz/exec_parsers_fuzz.cpp).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace exec {

struct ParsedSample {
  std::string metric;
  double value = 0;
  std::string unit;
  std::optional<int64_t> iteration;  // when the output numbers its samples
};

// One parser of a step, as the user wrote it: `--parse 'regex:...'` with --metric/--unit/--from, or a
// [[steps.parse]] table.
struct ParseSpec {
  std::string kind;     // regex, csv, jsonl, google-benchmark, smartsim-timing, time
  std::string pattern;  // regex: the expression; csv, jsonl: the columns or fields to take, comma-separated ("" = all),
                        // csv: each may carry its unit ("rps:requests/s,avg_latency_ms:ms")
  std::string metric;   // the metric of samples that do not name their own ("" = the column, field or function)
  std::string unit;     // the unit of samples that do not carry their own
  std::string label;    // csv: the column whose value names each record's metric (redis-benchmark's "test": SET, GET)
  std::string from = "stdout";  // stdout, stderr, or file:GLOB (relative to the step's folder, read after each invocation)
  // Which way its metrics are better: lower, higher, none, or "" (the unit decides only when it is a time or
  // "<x>/s"; the time parser is lower). results compare reads it instead of guessing.
  std::string better;
  // The direction declared for this parser's samples: `better`, else lower for the time parser, else "".
  std::string declared_better() const { return !better.empty() ? better : kind == "time" ? "lower" : ""; }
  std::string text() const;     // "regex:<pattern>" as messages name it
};

// A malformed spec or line: the message says what and where.
struct ParseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Parser {
 public:
  virtual ~Parser() = default;
  // One line, without its line break; appends what it matched.
  virtual void line(std::string_view text, std::vector<ParsedSample>& out) = 0;
  // The end of the input (google-benchmark reads its document whole here).
  virtual void finish(std::vector<ParsedSample>& out) { (void)out; }
  // csv: a line equal to the header is skipped (several outputs one after the other).
};

// A compiled PCRE2 expression that answers whether a line matches (readiness: ready = "line:REGEX").
class LineMatcher {
 public:
  explicit LineMatcher(const std::string& pattern);  // throws ParseError with PCRE2's reason
  ~LineMatcher();
  LineMatcher(const LineMatcher&) = delete;
  LineMatcher& operator=(const LineMatcher&) = delete;
  bool matches(std::string_view line) const;

 private:
  void* code_ = nullptr;
  void* data_ = nullptr;
};

// "regex:PATTERN", "csv", "csv:col1,col2", "jsonl", "google-benchmark", "smartsim-timing", "time".
ParseSpec parse_spec_text(const std::string& text);
// The parser for a spec (nullptr for "time", which the runner measures itself). Throws ParseError.
std::unique_ptr<Parser> make_parser(const ParseSpec& spec);
std::vector<std::string> parser_kinds();

}  // namespace exec
