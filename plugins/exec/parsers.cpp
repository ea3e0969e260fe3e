#include "parsers.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <charconv>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

namespace exec {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::optional<double> number(std::string_view s) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<int64_t> integer(std::string_view s) {
  s = trim(s);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= text.size() && !text.empty()) {
    size_t c = text.find(',', at);
    if (c == std::string::npos) c = text.size();
    std::string item(trim(std::string_view(text).substr(at, c - at)));
    if (!item.empty()) out.push_back(item);
    at = c + 1;
  }
  return out;
}

std::string shown(std::string_view line) {
  std::string s(line.substr(0, 80));
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return s + (line.size() > 80 ? "..." : "");
}

// One expression compiled as every regex of a step is (PCRE2, UTF-8, invalid UTF-8 in a line matching nothing);
// a pattern that does not compile is a ParseError naming `what` and PCRE2's reason.
pcre2_code* compile(const std::string& pattern, const std::string& what) {
  int code = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_MATCH_INVALID_UTF,
                                 &code, &offset, nullptr);
  if (!re) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(code, msg, sizeof msg);
    throw ParseError("'" + what + "': " + reinterpret_cast<char*>(msg) + " at offset " + std::to_string(offset));
  }
  return re;
}

// regex: every match of the expression is a sample. Named groups: value (required), and unit, metric, iteration.
// PCRE2 (Perl's syntax, as ReFrame's and JUBE's users write them), matched without recursion limits to worry about.
class RegexParser : public Parser {
 public:
  explicit RegexParser(const ParseSpec& s) : spec_(s) {
    re_ = compile(s.pattern, s.text());
    data_ = pcre2_match_data_create_from_pattern(re_, nullptr);
    value_ = group("value");
    unit_ = group("unit"), metric_ = group("metric"), iteration_ = group("iteration");
    // Every missing piece at once, not one per try.
    std::vector<std::string> missing;
    if (value_ < 0) missing.push_back("no (?<value>...) group: name the number to record value");
    if (unit_ < 0 && s.unit.empty()) missing.push_back("no unit: add a (?<unit>...) group or a unit (--unit)");
    if (metric_ < 0 && s.metric.empty()) missing.push_back("no metric: add a (?<metric>...) group or a metric (--metric)");
    if (!missing.empty()) {
      std::string why = "'" + s.text() + "' has ";
      for (size_t i = 0; i < missing.size(); ++i) why += (i ? i + 1 == missing.size() ? "; and " : "; " : "") + missing[i];
      free();
      throw ParseError(why);
    }
  }
  ~RegexParser() override { free(); }
  void line(std::string_view text, std::vector<ParsedSample>& out) override {
    PCRE2_SIZE at = 0;
    while (at <= text.size()) {
      int rc = pcre2_match(re_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), at, 0, data_, nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {  // a match limit or another error: never a silent "no sample" on a line that may hold one
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        throw ParseError("'" + spec_.text() + "' could not be matched against '" + shown(text) + "': " + reinterpret_cast<char*>(msg) +
                         " (a pattern that backtracks this much needs rewriting: anchor it, or make its repeats possessive)");
      }
      PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data_);
      auto grp = [&](int n) -> std::optional<std::string_view> {
        if (n < 0 || ov[2 * n] == PCRE2_UNSET) return std::nullopt;
        return text.substr(ov[2 * n], ov[2 * n + 1] - ov[2 * n]);
      };
      auto v = grp(value_);
      auto num = v ? number(*v) : std::nullopt;
      if (!num) throw ParseError("'" + spec_.text() + "' matched '" + shown(text) + "' but its value '" + shown(v ? *v : "") + "' is not a number");
      ParsedSample s{spec_.metric, *num, spec_.unit, std::nullopt};
      if (auto m = grp(metric_); m && !m->empty()) s.metric = std::string(*m);
      if (auto u = grp(unit_); u && !u->empty()) s.unit = std::string(*u);
      if (auto it = grp(iteration_)) s.iteration = integer(*it);
      if (s.metric.empty() || s.unit.empty()) throw ParseError("'" + spec_.text() + "' matched '" + shown(text) + "' with an empty metric or unit");
      out.push_back(std::move(s));
      at = ov[1] > ov[0] ? ov[1] : ov[1] + 1;  // an empty match moves on one character
    }
  }

 private:
  int group(const char* name) const {
    int n = pcre2_substring_number_from_name(re_, reinterpret_cast<PCRE2_SPTR>(name));
    return n > 0 ? n : -1;
  }
  void free() {
    if (data_) pcre2_match_data_free(data_), data_ = nullptr;
    if (re_) pcre2_code_free(re_), re_ = nullptr;
  }
  ParseSpec spec_;
  pcre2_code* re_ = nullptr;
  pcre2_match_data* data_ = nullptr;
  int value_ = -1, unit_ = -1, metric_ = -1, iteration_ = -1;
};

// One CSV record's fields (RFC 4180 quoting within the line; a comma inside quotes stays in its field).
std::vector<std::string> csv_fields(std::string_view line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') out.back() += '"', ++i;
      else if (c == '"') quoted = false;
      else out.back() += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  for (auto& f : out) f = std::string(trim(f));
  return out;
}

// csv: the first line is the header (required); each later line a record, each chosen column a sample of the
// metric named after it (or the spec's metric when one column is chosen). A column "iteration" numbers the record.
class CsvParser : public Parser {
 public:
  explicit CsvParser(const ParseSpec& s) : spec_(s) {
    // "name" or "name:unit" per chosen column.
    std::vector<std::string> no_unit;
    for (auto& item : split_list(s.pattern)) {
      const size_t colon = item.find(':');
      wanted_.push_back(std::string(trim(std::string_view(item).substr(0, colon))));
      units_.push_back(colon == std::string::npos ? s.unit : std::string(trim(std::string_view(item).substr(colon + 1))));
      if (units_.back().empty()) no_unit.push_back(wanted_.back());
    }
    std::vector<std::string> missing;
    if (wanted_.empty() && s.unit.empty()) missing.push_back("no unit: add a unit (--unit), or choose columns with theirs (columns = \"rps:requests/s\")");
    if (!no_unit.empty()) {
      std::string names;
      for (auto& n : no_unit) names += (names.empty() ? "" : ", ") + n;
      missing.push_back("no unit for column " + names + ": write it as " + no_unit.front() + ":UNIT, or give a unit (--unit) for all");
    }
    if (!s.metric.empty() && wanted_.size() != 1 && s.label.empty())
      missing.push_back("a metric names one column: choose it (csv:<column>), or name each record's metric from a column (label)");
    if (!missing.empty()) {
      std::string why = "'" + s.text() + "': ";
      for (size_t i = 0; i < missing.size(); ++i) why += (i ? "; " : "") + missing[i];
      throw ParseError(why);
    }
  }
  void line(std::string_view text, std::vector<ParsedSample>& out) override {
    ++line_no_;
    if (trim(text).empty()) return;
    auto fields = csv_fields(text);
    if (fields == header_) return;  // the header again: outputs of several invocations, one after the other
    if (header_.empty()) {
      header_ = fields;
      for (size_t i = 0; i < header_.size(); ++i) {
        if (header_[i] == "iteration") iteration_col_ = int(i);
        else if (header_[i] == spec_.label) label_col_ = int(i);
        else if (!header_[i].empty() && (wanted_.empty() || std::find(wanted_.begin(), wanted_.end(), header_[i]) != wanted_.end()))
          columns_.push_back(i);  // a column of no name is no metric
      }
      std::string absent;
      for (auto& w : wanted_)
        if (std::find(header_.begin(), header_.end(), w) == header_.end()) absent += (absent.empty() ? "'" : ", '") + w + "'";
      if (!spec_.label.empty() && label_col_ < 0) absent += (absent.empty() ? "'" : ", '") + spec_.label + "' (the label)";
      if (!absent.empty()) throw ParseError("'" + spec_.text() + "': the header '" + shown(text) + "' has no column " + absent);
      return;
    }
    if (fields.size() != header_.size())
      throw ParseError("'" + spec_.text() + "': line " + std::to_string(line_no_) + " has " + std::to_string(fields.size()) +
                       " fields, the header " + std::to_string(header_.size()));
    std::optional<int64_t> it = iteration_col_ >= 0 ? integer(fields[size_t(iteration_col_)]) : std::nullopt;
    for (size_t c : columns_) {
      auto v = number(fields[c]);
      if (!v) {
        if (wanted_.empty()) continue;  // every column: the numeric ones
        throw ParseError("'" + spec_.text() + "': line " + std::to_string(line_no_) + " column '" + header_[c] + "' is '" + shown(fields[c]) + "', not a number");
      }
      out.push_back({metric_of(fields, c), *v, unit_of(header_[c]), it});
    }
  }

 private:
  // The record's metric: the label column's value (with the column's name when several are taken, "SET.rps"),
  // else the spec's metric for its one column, else the column's name.
  std::string metric_of(const std::vector<std::string>& fields, size_t c) const {
    if (label_col_ >= 0) {
      const std::string label = fields[size_t(label_col_)].empty() ? "(no label)" : fields[size_t(label_col_)];
      const std::string head = spec_.metric.empty() ? label : spec_.metric + "." + label;
      return columns_.size() == 1 ? head : head + "." + header_[c];
    }
    return spec_.metric.empty() ? header_[c] : spec_.metric;
  }
  std::string unit_of(const std::string& column) const {
    for (size_t i = 0; i < wanted_.size(); ++i)
      if (wanted_[i] == column) return units_[i];
    return spec_.unit;
  }
  ParseSpec spec_;
  std::vector<std::string> wanted_, units_, header_;
  std::vector<size_t> columns_;
  int label_col_ = -1;
  int iteration_col_ = -1;
  int64_t line_no_ = 0;
};

// jsonl: a JSON object per line (other lines are the program's chatter and skipped). {"metric":..,"value":..,
// "unit":..,"iteration":..} is one sample; otherwise each chosen numeric field is a sample of the metric it names.
class JsonlParser : public Parser {
 public:
  explicit JsonlParser(const ParseSpec& s) : spec_(s), wanted_(split_list(s.pattern)) {}
  void line(std::string_view text, std::vector<ParsedSample>& out) override {
    ++line_no_;
    text = trim(text);
    if (text.empty() || text.front() != '{') return;
    nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) throw ParseError("'" + spec_.text() + "': line " + std::to_string(line_no_) + " is not a JSON object: '" + shown(text) + "'");
    std::optional<int64_t> it;
    if (auto i = j.find("iteration"); i != j.end() && i->is_number_integer()) it = i->get<int64_t>();
    std::string unit = spec_.unit;
    if (auto u = j.find("unit"); u != j.end() && u->is_string()) unit = u->get<std::string>();
    auto need_unit = [&](const std::string& metric) {
      if (unit.empty()) throw ParseError("'" + spec_.text() + "': line " + std::to_string(line_no_) + " gives no unit for '" + metric + "': add a unit");
    };
    if (auto v = j.find("value"); v != j.end() && j.contains("metric")) {
      // (an empty metric, found by tests/fuzz/exec_parsers_fuzz.cpp, was stored as a sample of no name)
      if (!v->is_number() || !j["metric"].is_string() || j["metric"].get<std::string>().empty() || !std::isfinite(v->get<double>()))
        throw ParseError("'" + spec_.text() + "': line " + std::to_string(line_no_) + ": metric must be a non-empty string and value a number");
      need_unit(j["metric"].get<std::string>());
      out.push_back({j["metric"].get<std::string>(), v->get<double>(), unit, it});
      return;
    }
    for (auto& [key, val] : j.items()) {
      if (key == "iteration" || key == "unit" || key.empty()) continue;  // a field of no name is no metric
      const bool chosen = wanted_.empty() || std::find(wanted_.begin(), wanted_.end(), key) != wanted_.end();
      if (!chosen || !val.is_number() || !std::isfinite(val.get<double>())) continue;
      need_unit(key);
      out.push_back({spec_.metric.empty() ? key : spec_.metric, val.get<double>(), unit, it});
    }
  }

 private:
  ParseSpec spec_;
  std::vector<std::string> wanted_;
  int64_t line_no_ = 0;
};

// google-benchmark: its --benchmark_format=json document (or --benchmark_out file), read whole at the end. Each
// iteration run is a sample of "<name>.real_time" and "<name>.cpu_time" in its time_unit, and of its rate counters
// (bytes_per_second, items_per_second); aggregates (mean, median, stddev of repetitions) are left out, as the
// statistics are computed from the samples in one place.
class GoogleBenchmarkParser : public Parser {
 public:
  explicit GoogleBenchmarkParser(const ParseSpec& s) : spec_(s) {}
  void line(std::string_view text, std::vector<ParsedSample>&) override {
    if (doc_.size() + text.size() > (size_t(256) << 20)) throw ParseError("'" + spec_.text() + "': the document exceeds 256 MiB");
    doc_.append(text.data(), text.size()).push_back('\n');
  }
  void finish(std::vector<ParsedSample>& out) override {
    const size_t start = doc_.find('{');  // what a program printed before its JSON
    if (start == std::string::npos) return;
    nlohmann::json j = nlohmann::json::parse(doc_.begin() + long(start), doc_.end(), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("benchmarks") || !j["benchmarks"].is_array())
      throw ParseError("'" + spec_.text() + "': the output is not Google Benchmark's JSON (run it with --benchmark_format=json)");
    // A text field, its default when absent; of another type the document is not Google Benchmark's (found by
    // tests/fuzz/exec_parsers_fuzz.cpp: "time_unit": 0 threw nlohmann's type_error out of the parser).
    auto text = [&](const nlohmann::json& b, const char* key, const std::string& def) {
      if (!b.contains(key)) return def;
      if (!b[key].is_string()) throw ParseError("'" + spec_.text() + "': " + key + " is not a string in a benchmark of the output");
      return b[key].get<std::string>();
    };
    for (auto& b : j["benchmarks"]) {
      if (!b.is_object() || !b.contains("name") || !b["name"].is_string()) continue;
      if (text(b, "run_type", "iteration") != "iteration") continue;
      if (b.contains("error_occurred") && b["error_occurred"].is_boolean() && b["error_occurred"].get<bool>())
        throw ParseError("'" + spec_.text() + "': benchmark " + b["name"].get<std::string>() + " failed: " + text(b, "error_message", ""));
      const std::string name = b["name"].get<std::string>(), unit = text(b, "time_unit", "ns");
      if (unit.empty()) throw ParseError("'" + spec_.text() + "': benchmark " + name + " has an empty time_unit");
      std::optional<int64_t> it;
      if (b.contains("repetition_index") && b["repetition_index"].is_number_integer()) it = b["repetition_index"].get<int64_t>();
      for (const char* field : {"real_time", "cpu_time"})
        if (b.contains(field) && b[field].is_number()) out.push_back({name + "." + field, b[field].get<double>(), unit, it});
      for (auto [field, rate] : {std::pair{"bytes_per_second", "bytes/s"}, std::pair{"items_per_second", "items/s"}})
        if (b.contains(field) && b[field].is_number()) out.push_back({name + "." + field, b[field].get<double>(), rate, it});
    }
  }

 private:
  ParseSpec spec_;
  std::string doc_;
};

// smartsim-timing: SmartSim-Scaling's rank_<r>_timing.csv lines, "rank,function,seconds" (as fanout's importer
// reads them): a sample of metric <function> in seconds, numbered per function.
class SmartSimTimingParser : public Parser {
 public:
  explicit SmartSimTimingParser(const ParseSpec& s) : spec_(s) {}
  void line(std::string_view text, std::vector<ParsedSample>& out) override {
    ++line_no_;
    if (trim(text).empty()) return;
    auto f = csv_fields(text);
    auto secs = f.size() == 3 ? number(f[2]) : std::nullopt;
    if (f.size() != 3 || !integer(f[0]) || !secs || f[1].empty())
      throw ParseError("'" + spec_.text() + "': line " + std::to_string(line_no_) + " is not rank,function,seconds: '" + shown(text) + "'");
    out.push_back({f[1], *secs, "s", seen_[f[1]]++});
  }

 private:
  ParseSpec spec_;
  std::map<std::string, int64_t> seen_;
  int64_t line_no_ = 0;
};

using Factory = std::unique_ptr<Parser> (*)(const ParseSpec&);
template <class P>
std::unique_ptr<Parser> make(const ParseSpec& s) {
  return std::make_unique<P>(s);
}
struct Kind {
  const char* name;
  Factory make;  // nullptr: measured by the runner (time)
};
const Kind kKinds[] = {{"time", nullptr},
                       {"regex", make<RegexParser>},
                       {"csv", make<CsvParser>},
                       {"jsonl", make<JsonlParser>},
                       {"google-benchmark", make<GoogleBenchmarkParser>},
                       {"smartsim-timing", make<SmartSimTimingParser>}};

const Kind* find_kind(const std::string& name) {
  for (auto& k : kKinds)
    if (name == k.name) return &k;
  return nullptr;
}

}  // namespace

LineMatcher::LineMatcher(const std::string& pattern) {
  pcre2_code* re = compile(pattern, pattern);
  code_ = re;
  data_ = pcre2_match_data_create_from_pattern(re, nullptr);
}

LineMatcher::~LineMatcher() {
  pcre2_match_data_free(static_cast<pcre2_match_data*>(data_));
  pcre2_code_free(static_cast<pcre2_code*>(code_));
}

bool LineMatcher::matches(std::string_view line) const {
  return pcre2_match(static_cast<pcre2_code*>(code_), reinterpret_cast<PCRE2_SPTR>(line.data()), line.size(), 0, 0,
                     static_cast<pcre2_match_data*>(data_), nullptr) >= 0;
}

std::string ParseSpec::text() const { return pattern.empty() ? kind : kind + ":" + pattern; }

std::vector<std::string> parser_kinds() {
  std::vector<std::string> out;
  for (auto& k : kKinds) out.push_back(k.name);
  return out;
}

ParseSpec parse_spec_text(const std::string& text) {
  ParseSpec s;
  const size_t colon = text.find(':');
  s.kind = text.substr(0, colon);
  if (colon != std::string::npos) s.pattern = text.substr(colon + 1);
  if (!find_kind(s.kind)) {
    std::string known;
    for (auto& k : parser_kinds()) known += (known.empty() ? "" : ", ") + k;
    throw ParseError("'" + text + "': no parser '" + s.kind + "' (parsers: " + known + ")");
  }
  return s;
}

std::unique_ptr<Parser> make_parser(const ParseSpec& spec) {
  const Kind* k = find_kind(spec.kind);
  if (!k) return make_parser(parse_spec_text(spec.kind));  // throws naming the known ones
  if (spec.from != "stdout" && spec.from != "stderr" && spec.from.rfind("file:", 0) != 0)
    throw ParseError("'" + spec.text() + "': from must be stdout, stderr or file:<glob>, not '" + spec.from + "'");
  if (spec.from.rfind("file:", 0) == 0 && spec.from.size() == 5) throw ParseError("'" + spec.text() + "': from = \"file:\" needs a file or glob");
  // What a parser would not use is refused, not dropped: time records seconds; google-benchmark and smartsim-timing
  // name their metrics and units themselves.
  if (!spec.better.empty() && spec.better != "lower" && spec.better != "higher" && spec.better != "none")
    throw ParseError("'" + spec.text() + "': better = '" + spec.better + "': expected lower, higher or none");
  if (spec.kind == "time" && !spec.better.empty() && spec.better != "lower")
    throw ParseError("'time' records each invocation's wall time, where lower is better: better = '" + spec.better + "' would not apply");
  if (spec.kind == "time" && !spec.unit.empty() && spec.unit != "s")
    throw ParseError("'time' records each invocation's wall time in s: unit = '" + spec.unit + "' would not apply");
  if (!spec.label.empty() && spec.kind != "csv")
    throw ParseError("'" + spec.text() + "': label names a csv column (each record's metric); '" + spec.kind + "' has none");
  if ((spec.kind == "google-benchmark" || spec.kind == "smartsim-timing") && (!spec.metric.empty() || !spec.unit.empty()))
    throw ParseError("'" + spec.kind + "' names each sample's metric and unit from the output: a metric or unit given would not apply");
  return k->make ? k->make(spec) : nullptr;
}

}  // namespace exec
