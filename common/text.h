// Small text helpers shared by the driver, the rank runner and the results code.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fanout {

std::string trim(std::string_view s);
std::string_view trim_view(std::string_view s);  // the same, without a copy
std::vector<std::string> split(std::string_view s, char sep);
std::string join(const std::vector<std::string>& parts, std::string_view sep);
bool starts_with(std::string_view s, std::string_view prefix);

// Quotes a word for POSIX sh so that it is never interpreted ('...' with embedded quotes escaped).
std::string shell_quote(std::string_view word);

// Strict number parsing: the whole string must be the number.
std::optional<int64_t> parse_int(std::string_view s);
std::optional<double> parse_double(std::string_view s);
std::optional<bool> parse_bool(std::string_view s);

// 64-bit FNV-1a, rendered as 16 hex digits: stable across builds and machines.
std::string fnv1a_hex(std::string_view data);
// "SIGSEGV" for 11; "SIGRT<n>"-style signals have no short name in glibc: "signal <n>".
std::string signal_name(int sig);

// Throws UserError("<origin>: control characters ...") when value has a byte below 0x20 or DEL: a value that
// becomes one line of a generated file (a job script's #SBATCH line, redis.conf) must stay one line.
void require_single_line(const std::string& origin, std::string_view value);
// The text with control characters shown as \n, \t, \xHH (for messages that must stay one line).
std::string printable(std::string_view s);
// The same, keeping newlines: multi-line messages stay readable, other control characters are shown escaped.
std::string printable_lines(std::string_view s);
// Order for people: runs of digits compare as numbers ("copy_bytes=4096" before "copy_bytes=65536" before
// "copy_bytes=1048576"), the rest as text.
bool natural_less(std::string_view a, std::string_view b);
// The line (1-based) of the first TOML dotted key of more than max_parts parts (a.b.c... outside strings and
// comments), or 0. toml++ parses such a key recursively: 60,000 parts overflowed the stack, so every TOML input
// is checked with this first.
int toml_deep_key_line(std::string_view text, size_t max_parts = 128);
// UserError "<file>:<line>: a dotted key of more than 128 parts" when the text holds one: every TOML input's check.
void refuse_deep_toml_keys(std::string_view text, const std::string& file);
// Debian 12's toml++ 3.3.0 reaches __builtin_unreachable on most non-ASCII characters where it tests for whitespace
// (upstream tomlplusplus issues 190 and 295): UserError "<file>:<line>: a non-ASCII character outside a string or
// comment" before toml++ sees one there. Every TOML reader calls it (experiment files, site profiles, run.toml,
// reference files, saved commands).
void refuse_non_ascii_outside_strings(std::string_view text, const std::string& file);
struct NaturalLess {
  bool operator()(std::string_view a, std::string_view b) const { return natural_less(a, b); }
};

// True when s is well-formed UTF-8 (no overlongs, surrogates or code points above U+10FFFF).
bool valid_utf8(std::string_view s);
// The length in bytes (1-4) of the well-formed UTF-8 character at s[i], or 0 when none starts there.
size_t utf8_sequence_at(std::string_view s, size_t i);

// Keeps [A-Za-z0-9._-], replaces anything else with '_' (for directory names built from values).
std::string filename_safe(std::string_view s, size_t max_len = 64);

}  // namespace fanout
