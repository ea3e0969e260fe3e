#include "common/toml_text.h"

#include <charconv>

#include "common/text.h"

namespace fanout {

namespace {

bool bare_key(std::string_view k) {
  if (k.empty()) return false;
  for (char c : k)
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return true;
}

void append_u00(std::string& out, unsigned char c) {
  static const char hex[] = "0123456789ABCDEF";
  out += "\\u00";
  out += hex[c >> 4];
  out += hex[c & 15];
}

// A character a basic string holds as itself: printable ASCII but the quote and the backslash.
bool plain_toml_char(unsigned char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; }

}  // namespace

void append_toml_string(std::string& out, std::string_view s) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    // The run of characters written as they are, appended at once: a character at a time was most of the cost of a
    // run.toml's text (a run's command line alone is 512 of them).
    size_t plain = i;
    while (plain < s.size() && plain_toml_char(static_cast<unsigned char>(s[plain]))) ++plain;
    out.append(s.data() + i, plain - i);
    if ((i = plain) == s.size()) break;
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = utf8_sequence_at(s, i);
      if (n == 0) append_u00(out, c);
      else out.append(s.substr(i, n));
      i += n ? n : 1;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\f': out += "\\f"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) append_u00(out, c);
        else out += char(c);
    }
    ++i;
  }
  out += '"';
}

void TomlText::key(std::string_view k) {
  if (bare_key(k)) out_.append(k);
  else append_toml_string(out_, k);
  out_ += " = ";
}

TomlText& TomlText::table(std::string_view name) {
  out_.append("\n[").append(name).append("]\n");
  return *this;
}

TomlText& TomlText::array_table(std::string_view name) {
  out_.append("\n[[").append(name).append("]]\n");
  return *this;
}

TomlText& TomlText::string(std::string_view k, std::string_view value) {
  key(k);
  append_toml_string(out_, value);
  out_ += '\n';
  return *this;
}

TomlText& TomlText::integer(std::string_view k, int64_t value) {
  key(k);
  char buf[24];
  out_.append(buf, size_t(std::to_chars(buf, buf + sizeof buf, value).ptr - buf));
  out_ += '\n';
  return *this;
}

TomlText& TomlText::boolean(std::string_view k, bool value) {
  key(k);
  out_ += value ? "true\n" : "false\n";
  return *this;
}

TomlText& TomlText::strings(std::string_view k, const std::vector<std::string>& values) {
  key(k);
  out_ += '[';
  for (size_t i = 0; i < values.size(); ++i) {
    out_ += i ? ", " : " ";
    append_toml_string(out_, values[i]);
  }
  out_ += values.empty() ? "]\n" : " ]\n";
  return *this;
}

TomlText& TomlText::raw(std::string_view text) {
  out_.append(text);
  return *this;
}

}  // namespace fanout
