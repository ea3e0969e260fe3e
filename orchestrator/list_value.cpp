#include "orchestrator/list_value.h"

#include "common/error.h"
#include "common/text.h"

namespace fanout {

namespace {

[[noreturn]] void malformed(std::string_view what, std::string_view text, const std::string& why) {
  throw UserError(std::string(what) + ": malformed list '" + std::string(text) + "': " + why);
}

// Removes one pair of matching quotes around an element, if present.
std::string unquote(const std::string& element, std::string_view what, std::string_view text) {
  if (element.size() >= 2 && (element.front() == '\'' || element.front() == '"') && element.back() == element.front())
    return element.substr(1, element.size() - 2);
  if (!element.empty() && (element.front() == '\'' || element.front() == '"')) malformed(what, text, "unbalanced quote");
  return element;
}

}  // namespace

std::vector<std::string> parse_list_value(std::string_view text, std::string_view what) {
  std::string t = trim(text);
  if (t.empty()) malformed(what, text, "empty value");
  // One value in quotes is taken as it is, brackets and commas included (a command: --command="'[ -e x ] && y'").
  if (t.size() >= 2 && (t.front() == '\'' || t.front() == '"') && t.back() == t.front() &&
      t.find(t.front(), 1) == t.size() - 1)
    return {t.substr(1, t.size() - 2)};
  bool opens = t.front() == '[', closes = t.back() == ']';
  if (!opens && !closes) {
    if (t.find_first_of("[]") != std::string::npos) malformed(what, text, "stray bracket");
    return {unquote(t, what, text)};
  }
  if (!opens) malformed(what, text, "missing opening '['");
  if (!closes || t.size() < 2) malformed(what, text, "missing closing ']'");
  std::string_view body = std::string_view(t).substr(1, t.size() - 2);
  std::vector<std::string> out;
  std::string cur;
  char quote = 0;
  auto finish = [&](bool last) {
    std::string e = trim(cur);
    if (e.empty()) {
      if (last && out.empty()) malformed(what, text, "empty list");
      malformed(what, text, "empty element");
    }
    out.push_back(unquote(e, what, text));
    cur.clear();
  };
  for (char c : body) {
    if (quote) {
      if (c == quote) quote = 0;
      cur += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      cur += c;
    } else if (c == '[' || c == ']') {
      malformed(what, text, "nested or stray bracket");
    } else if (c == ',') {
      finish(false);
    } else {
      cur += c;
    }
  }
  if (quote) malformed(what, text, "unbalanced quote");
  finish(true);
  return out;
}

std::string format_list_value(const std::vector<std::string>& values) {
  // The parser has no escapes: each value is written in the first form it reads back from exactly (plain,
  // '...' or "..."); a lone value may be a bare scalar. Checked by parsing, so the round trip holds by
  // construction.
  auto reads_back = [](const std::string& text, const std::vector<std::string>& expect) {
    try {
      return parse_list_value(text, "") == expect;
    } catch (const UserError&) {
      return false;
    }
  };
  auto forms = [](const std::string& v) { return std::vector<std::string>{v, "'" + v + "'", '"' + v + '"'}; };
  if (values.size() == 1)
    for (auto& form : forms(values[0]))
      if (reads_back(form, values)) return form;
  std::vector<std::string> parts;
  for (auto& v : values) {
    std::string chosen;
    for (auto& form : forms(v))
      if (reads_back("[" + form + "]", {v})) {
        chosen = form;
        break;
      }
    if (chosen.empty()) throw UserError("cannot write '" + v + "' as a list element (it mixes both kinds of quote)");
    parts.push_back(chosen);
  }
  return "[" + join(parts, ",") + "]";
}

}  // namespace fanout
