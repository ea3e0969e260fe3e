// TOML text written directly, for the files fanout writes for every run (run.toml and what is appended to it).
// toml++'s printer first builds a tree of nodes, a map and an allocation per key, then streams it: 7 % of the
// driver's CPU a local run (perf of 3,000 runs, 2026-12-06). What this writes parses to the same table as
// toml++'s text of the same values (tests/store_test.cpp, Store.RunTomlWrittenDirectly...), but where toml++ lost
// bytes: a UTF-8 character cut short at a value's end (dropped), the byte after a bad one (escaped with it), a
// value's leading line break (toml++ wrote a multi-line string, whose first line break a reader drops).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fanout {

class TomlText {
 public:
  // "[name]" / "[[name]]": the keys that follow are that table's. A dotted name ("status.ranks") is written as it
  // is: each part must be a bare key.
  TomlText& table(std::string_view name);
  TomlText& array_table(std::string_view name);
  // key = value. Distinct names, not overloads: a string literal would otherwise convert to bool.
  TomlText& string(std::string_view key, std::string_view value);
  TomlText& integer(std::string_view key, int64_t value);
  TomlText& boolean(std::string_view key, bool value);
  TomlText& strings(std::string_view key, const std::vector<std::string>& values);
  // Text as it is (a comment, a blank line).
  TomlText& raw(std::string_view text);

  const std::string& text() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void key(std::string_view k);
  std::string out_;
};

// A TOML basic string ("..."), escaped: quote, backslash and control characters; a byte that starts no well-formed
// UTF-8 character as \u00XX, as toml++ writes it (such bytes cannot be kept in TOML).
void append_toml_string(std::string& out, std::string_view s);

}  // namespace fanout
