// Asserts: the exec plugin's parsers (plugins/exec/parsers.h) take any program output, and its settings reader any
// JSON, throwing nothing but ParseError / std::runtime_error; every sample they give has a finite value, a metric
// and a unit; command words split from a shell-quoted word come back as that word.
// Input: byte 0 picks the parser; the text up to the first newline is its pattern; the rest are its lines.
#include <cmath>
#include <string>

#include "fanout_placeholders.hpp"
#include "parsers.h"
#include "step_config.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const char* kinds[] = {"regex", "csv", "jsonl", "google-benchmark", "smartsim-timing", "time"};
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t nl = text.find('\n');
  exec::ParseSpec spec;
  spec.kind = kinds[data[0] % 6];
  spec.pattern = text.substr(0, nl);
  // Each kind with settings it takes, so that every parser is reached: google-benchmark and smartsim-timing name
  // their own metrics and units, time records seconds and is lower-is-better.
  static const char* betters[] = {"", "lower", "higher", "none"};
  if (spec.kind == "regex" || spec.kind == "csv" || spec.kind == "jsonl") spec.metric = "m", spec.unit = "u", spec.better = betters[(data[0] / 6) % 4];
  else if (spec.kind == "time") spec.unit = "s", spec.better = (data[0] / 6) % 2 ? "lower" : "";
  const bool pattern_free = spec.kind == "google-benchmark" || spec.kind == "smartsim-timing" || spec.kind == "time";
  std::unique_ptr<exec::Parser> parser;
  bool made = false;
  try {
    parser = exec::make_parser(spec);
    made = true;
  } catch (const exec::ParseError&) {
    FUZZ_CHECK(!pattern_free);  // their settings are valid: only a pattern (regex, columns) can be refused
  }
  if (made) try {
    std::vector<exec::ParsedSample> out;
    if (parser && nl != std::string::npos) {
      for (size_t at = nl + 1; at <= text.size();) {
        size_t end = text.find('\n', at);
        if (end == std::string::npos) end = text.size();
        parser->line(std::string_view(text).substr(at, end - at), out);
        at = end + 1;
      }
      parser->finish(out);
    }
    for (auto& s : out) FUZZ_CHECK(std::isfinite(s.value) && !s.metric.empty() && !s.unit.empty());
  } catch (const exec::ParseError&) {
  }
  try {
    exec::StepConfig c = exec::config_from_settings(exec::StepConfig{}, text);
    exec::validate(c);
    exec::validate_for_ranks(c, 1 + data[0] % 3);
  } catch (const std::runtime_error&) {
  }
  const auto words = exec::split_words(exec::shell_quote(text));
  FUZZ_CHECK(words.size() == 1 && words[0] == text);
  auto same = fanout_sdk::fill_placeholders(text, [](const std::string& n) { return std::optional<std::string>("{" + n + "}"); });
  FUZZ_CHECK(same.has_value());
  return 0;
}
