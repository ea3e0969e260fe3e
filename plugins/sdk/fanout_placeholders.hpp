// "{name}" placeholders in a text (a step's command, its environment, a readiness check): the one grammar the
// driver (which refuses a name that is no parameter, before anything runs) and plugins (which fill them in)
// share. A name is [A-Za-z_][A-Za-z0-9_]*; "{{" and "}}" are a literal brace; any other brace is kept as it
// is, so a regular expression's "{3}" or "{2,5}" passes through. The step's own variables (FANOUT_HOST, FANOUT_RANK, ...:
// step_variable) the plugin fills; every other name is a parameter of the run.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fanout_sdk {

namespace placeholder_detail {
inline bool name_char(char c, bool first) {
  return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (!first && c >= '0' && c <= '9');
}
// The length of "{name}" at text[i] ('{' there), or 0 when it is not a placeholder.
inline size_t placeholder_at(std::string_view text, size_t i) {
  size_t j = i + 1;
  while (j < text.size() && name_char(text[j], j == i + 1)) ++j;
  return j > i + 1 && j < text.size() && text[j] == '}' ? j - i + 1 : 0;
}
}  // namespace placeholder_detail

// Calls fn(name) for each placeholder, fn_text(literal) for the text between them (braces unescaped).
inline void scan_placeholders(std::string_view text, const std::function<void(std::string_view)>& on_name,
                              const std::function<void(std::string_view)>& on_text) {
  size_t from = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool doubled = i + 1 < text.size() && text[i + 1] == text[i];
    if ((text[i] == '{' || text[i] == '}') && doubled) {
      on_text(text.substr(from, i + 1 - from));  // one brace of the two
      from = i + 2;
      ++i;
      continue;
    }
    if (text[i] != '{') continue;
    if (size_t n = placeholder_detail::placeholder_at(text, i)) {
      on_text(text.substr(from, i - from));
      on_name(text.substr(i + 1, n - 2));
      from = i + n;
      i += n - 1;
    }
  }
  on_text(text.substr(from));
}

// The step's own variables, each also a placeholder: the documented list (docs/exec.md), and FANOUT_<STEP>_NODES
// for a step it comes after. Any other FANOUT_ name is refused as a parameter would be, before anything runs.
inline constexpr std::string_view kStepVariables[] = {"FANOUT_RANK",  "FANOUT_NRANKS",   "FANOUT_LOCAL_RANK", "FANOUT_LOCAL_SIZE",
                                                      "FANOUT_NODE_INDEX", "FANOUT_NODELIST", "FANOUT_HOST", "FANOUT_STEP",
                                                      "FANOUT_STEP_DIR", "FANOUT_RUN_DIR", "FANOUT_SUBMIT_DIR"};
inline bool step_variable(std::string_view name) {
  for (auto v : kStepVariables)
    if (name == v) return true;
  constexpr std::string_view prefix = "FANOUT_", suffix = "_NODES";
  return name.size() > prefix.size() + suffix.size() && name.substr(0, prefix.size()) == prefix &&
         name.substr(name.size() - suffix.size()) == suffix;
}

inline std::vector<std::string> placeholder_names(std::string_view text) {
  std::vector<std::string> names;
  scan_placeholders(text, [&](std::string_view n) { names.emplace_back(n); }, [](std::string_view) {});
  return names;
}

// The text with each placeholder replaced by value(name); nullopt names the first unknown one in *unknown.
inline std::optional<std::string> fill_placeholders(std::string_view text,
                                                    const std::function<std::optional<std::string>(const std::string&)>& value,
                                                    std::string* unknown = nullptr) {
  std::string out;
  bool ok = true;
  scan_placeholders(
      text,
      [&](std::string_view n) {
        auto v = ok ? value(std::string(n)) : std::nullopt;
        if (v) out += *v;
        else if (ok) ok = false, unknown ? void(*unknown = std::string(n)) : void();
      },
      [&](std::string_view t) { out += t; });
  if (!ok) return std::nullopt;
  return out;
}

}  // namespace fanout_sdk
