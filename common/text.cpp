#include "common/text.h"

#include "common/error.h"

#include <string.h>

#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace fanout {

std::string_view trim_view(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::string trim(std::string_view s) { return std::string(trim_view(s)); }

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      out.emplace_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

std::string shell_quote(std::string_view word) {
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  out += "'";
  return out;
}

std::string printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c != 0x7f) {
      out += char(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, c == '\n' ? "\\n" : c == '\t' ? "\\t" : "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}

std::string printable_lines(std::string_view s) {
  std::string out;
  for (size_t at = 0; at <= s.size();) {
    size_t nl = s.find('\n', at);
    if (nl == std::string_view::npos) nl = s.size();
    out += printable(s.substr(at, nl - at));
    if (nl < s.size()) out += '\n';
    at = nl + 1;
  }
  return out;
}

void require_single_line(const std::string& origin, std::string_view value) {
  for (unsigned char c : value)
    if (c < 0x20 || c == 0x7f)
      throw UserError(origin + ": control characters (newline, tab, ...) are not allowed in '" + printable(value.substr(0, 60)) + "'");
}

size_t utf8_sequence_at(std::string_view s, size_t i) {
  static const uint32_t min_of[] = {0, 0x80, 0x800, 0x10000};  // shortest form of each length (no overlongs)
  const auto c = static_cast<unsigned char>(s[i]);
  const int n = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
  if (n < 0 || i + size_t(n) >= s.size()) return 0;
  uint32_t cp = n == 0 ? c : c & (0x3fu >> n);
  for (int k = 1; k <= n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + size_t(k)]);
    if ((b & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3fu);
  }
  if (cp < min_of[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return size_t(n) + 1;
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0, n; i < s.size(); i += n)
    if ((n = utf8_sequence_at(s, i)) == 0) return false;
  return true;
}

std::optional<int64_t> parse_int(std::string_view s) {
  if (s.empty()) return std::nullopt;
  if (s.front() == '+') {
    s.remove_prefix(1);
    if (s.empty() || s.front() == '-') return std::nullopt;  // "+-5" is not a number
  }
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<double> parse_double(std::string_view s) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s.front()))) return std::nullopt;
  std::string tmp(s);
  char* end = nullptr;
  double v = std::strtod(tmp.c_str(), &end);
  if (end != tmp.c_str() + tmp.size()) return std::nullopt;
  return v;
}

std::optional<bool> parse_bool(std::string_view s) {
  std::string l;
  for (char c : s) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (l == "true" || l == "1" || l == "yes" || l == "on") return true;
  if (l == "false" || l == "0" || l == "no" || l == "off") return false;
  return std::nullopt;
}

std::string fnv1a_hex(std::string_view data) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string filename_safe(std::string_view s, size_t max_len) {
  std::string out;
  for (char c : s) {
    if (out.size() >= max_len) break;
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') ? c : '_';
  }
  return out;
}

}  // namespace fanout

namespace fanout {
std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}
bool natural_less(std::string_view a, std::string_view b) {
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      size_t ie = i, je = j;
      while (ie < a.size() && digit(a[ie])) ++ie;
      while (je < b.size() && digit(b[je])) ++je;
      std::string_view x = a.substr(i, ie - i), y = b.substr(j, je - j);
      while (x.size() > 1 && x.front() == '0') x.remove_prefix(1);
      while (y.size() > 1 && y.front() == '0') y.remove_prefix(1);
      if (x.size() != y.size()) return x.size() < y.size();
      if (x != y) return x < y;
      i = ie, j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i, ++j;
    }
  }
  return a.size() - i < b.size() - j || (a.size() - i == b.size() - j && a < b);
}

int toml_deep_key_line(std::string_view text, size_t max_parts) {
  int line = 1;
  size_t parts = 1;  // of the dotted key being read
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line, parts = 1;
    } else if (c == '#') {  // a comment: to the end of the line
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
    } else if (c == '"' || c == '\'') {  // a string (a quoted key part or a value): skipped whole
      const bool multi = text.substr(i, 3) == std::string(3, c);
      const std::string_view end = multi ? std::string_view(c == '"' ? "\"\"\"" : "\'\'\'") : std::string_view(&text[i], 1);
      size_t j = i + (multi ? 3 : 1);
      for (; j < text.size() && text.substr(j, end.size()) != end; ++j) {
        if (c == '"' && text[j] == '\\' && j + 1 < text.size()) ++j;  // an escaped character: \" or a line-ending backslash
        if (text[j] == '\n') ++line;
      }
      j += end.size();
      // A multi-line string may end with up to two more quotes of its kind ("""a"""" is a"): they belong to it.
      for (int extra = 0; multi && extra < 2 && j < text.size() && text[j] == c; ++extra) ++j;
      i = std::min(text.size(), j) - 1;
    } else if (c == '.') {
      if (++parts > max_parts) return line;
    } else if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == ' ' || c == '\t')) {
      parts = 1;  // anything else ends a key: = [ ] { } ,
    }
  }
  return 0;
}

// TOML allows non-ASCII only inside strings and comments. Debian 12's toml++ 3.3.0 reaches
// __builtin_unreachable when it tests most non-ASCII characters for whitespace (upstream tomlplusplus issues
// 190 and 295), so such a character is refused here, with its line, before toml++ sees it wherever toml++
// would test it: outside strings and comments; after a backslash (and whitespace) in a basic string;
// and anywhere in what toml++ scans as a number or date (a value starting with a digit or sign, up to the next
// whitespace, ']', '}', ',' or '#', quotes included: `x = 1'é'`). Found by tests/fuzz/experiment_fuzz.cpp.
// Values start after '=' and inside arrays; keys (`a1."é" = 1`) are never scanned as numbers.
void refuse_non_ascii_outside_strings(std::string_view t, const std::string& file) {
  enum class In { Code, Comment, Basic, Literal, MultiBasic, MultiLiteral } in = In::Code;
  int line = 1;
  bool trimming = false;  // after a line-ending backslash in a multi-line basic string
  size_t scanned_to = 0;    // end of the last number-like run checked (keeps the check linear)
  bool value_next = false;  // the next code character starts a value (after '=', or in an array)
  std::vector<char> nest;   // open arrays '[' and inline tables '{' of the current value
  auto starts = [&](size_t i, std::string_view s) { return t.substr(i, s.size()) == s; };
  auto refuse = [&](int at_line) {
    throw UserError(file + ":" + std::to_string(at_line) + ": a non-ASCII character outside a string or comment");
  };
  auto ends_value = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ']' || c == '}' || c == ',' || c == '#'; };
  for (size_t i = 0; i < t.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(t[i]);
    if (c == '\n') ++line;
    if (c >= 0x80 && (in == In::Code || trimming)) refuse(line);
    // The character after a backslash in a basic string: toml++ tests it for whitespace (and TOML escapes
    // are ASCII letters anyway).
    if (c == '\\' && (in == In::Basic || in == In::MultiBasic) && i + 1 < t.size() && static_cast<unsigned char>(t[i + 1]) >= 0x80)
      refuse(line);
    if (in == In::Code && c != ' ' && c != '\t' && c != '\r') {
      const bool in_array = !nest.empty() && nest.back() == '[';
      if (c == '\n') {
        value_next = value_next && !nest.empty();
      } else if (c == '=') {
        value_next = true;
      } else if (c == '[' || c == '{') {
        if (value_next) nest.push_back(char(c));  // else a table header
        value_next = value_next && c == '[';
      } else if (c == ']' || c == '}') {
        if (!nest.empty() && nest.back() == (c == ']' ? '[' : '{')) nest.pop_back();
        value_next = false;
      } else if (c == ',') {
        value_next = in_array;
      } else if (c != '#') {
        if (value_next && i >= scanned_to && ((c >= '0' && c <= '9') || c == '+' || c == '-')) {
          size_t j = i + 1;
          for (; j < t.size() && !ends_value(t[j]); ++j)
            if (static_cast<unsigned char>(t[j]) >= 0x80) refuse(line);
          scanned_to = j;
        }
        value_next = false;
      }
    }
    if (in == In::Comment && c == '\n') value_next = value_next && !nest.empty();
    switch (in) {
      case In::Code:
        if (c == '#') in = In::Comment;
        else if (starts(i, "\"\"\"")) in = In::MultiBasic, i += 2;
        else if (starts(i, "'''")) in = In::MultiLiteral, i += 2;
        else if (c == '"') in = In::Basic;
        else if (c == '\'') in = In::Literal;
        break;
      case In::Comment:
        if (c == '\n') in = In::Code;
        break;
      case In::Basic:
        if (c == '\\') ++i;
        else if (c == '"' || c == '\n') in = In::Code;
        break;
      case In::Literal:
        if (c == '\'' || c == '\n') in = In::Code;
        break;
      case In::MultiBasic:
        if (trimming && c != ' ' && c != '\t' && c != '\n' && c != '\r') trimming = false;
        if (c == '\\') {
          // A backslash before whitespace: toml++ skips the whitespace (and line breaks) and tests the next
          // character; any other backslash escapes the character after it.
          const char next = i + 1 < t.size() ? t[i + 1] : '\0';
          if (next == ' ' || next == '\t' || next == '\r' || next == '\n') trimming = true;
          else ++i;
        } else if (starts(i, "\"\"\"")) {
          in = In::Code, i += 2;
          while (i + 1 < t.size() && t[i + 1] == '"') ++i;  // up to two quotes may end the content
        }
        break;
      case In::MultiLiteral:
        if (starts(i, "'''")) {
          in = In::Code, i += 2;
          while (i + 1 < t.size() && t[i + 1] == '\'') ++i;
        }
        break;
    }
  }
}


void refuse_deep_toml_keys(std::string_view text, const std::string& file) {
  if (const int line = toml_deep_key_line(text)) throw UserError(file + ":" + std::to_string(line) + ": a dotted key of more than 128 parts");
}

}  // namespace fanout
