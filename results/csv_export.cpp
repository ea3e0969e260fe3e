#include "results/csv_export.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "common/error.h"
#include "common/files.h"
#include "results/metric_stats.h"
#include "results/staged_file.h"
#include "results/sample_block.h"
#include "results/statistics.h"
#include "common/text.h"
#include "results/store.h"

namespace fanout {

namespace fs = std::filesystem;

std::string csv_field(const std::string& text) {
  // A spreadsheet runs a cell that starts with = + - @ (or a tab or CR) as a formula: such text, unless it is a
  // number (-1 stays -1), gets a leading apostrophe, as OWASP's CSV-injection advice says.
  const bool formula = !text.empty() && text[0] != '\0' && std::strchr("=+-@\t\r", text[0]) != nullptr && !parse_double(text);
  const std::string s = formula ? "'" + text : text;
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string csv_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.12g", v);
  return buf;
}

namespace {

// Appends a number in its shortest exact form (std::to_chars: far cheaper than printf on 10^7 rows).
template <class T>
void append(std::string& s, T v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  s.append(buf, end);
}

// A row's values of the parameters `names`, in that order ("" where the row has none), each a field followed by ','.
std::string parameter_cells(const std::vector<std::pair<std::string, std::string>>& params, const std::vector<std::string>& names) {
  std::string s;
  for (auto& name : names) {
    std::string v;
    for (auto& [k, val] : params)
      if (k == name) v = val;
    s += csv_field(v) + ",";
  }
  return s;
}

std::string run_prefix(const std::string& session, const std::string& status, const std::string& repeat,
                       const std::vector<std::pair<std::string, std::string>>& params, const std::vector<std::string>& names) {
  std::string cells = parameter_cells(params, names);
  if (!cells.empty()) cells.pop_back();
  return csv_field(session) + "," + csv_field(status) + "," + csv_field(repeat) + (names.empty() ? "" : "," + cells);
}

// The header up to the file's own columns. A parameter named like one of them (a plugin's `warmup` parameter
// beside samples.csv's warmup flag) is written "param.<name>", so that every header name is unique and says which
// is which.
// The parameters' column names, each followed by ','; one named like a column in `taken` is "param.<name>".
std::string parameter_header(const std::vector<std::string>& names, std::set<std::string> taken) {
  std::string h;
  for (auto& n : names) {
    std::string column = n;
    while (taken.count(column)) column = "param." + column;
    taken.insert(column);
    h += csv_field(column) + ",";
  }
  return h;
}

// Every file's run columns: session, status, and repeat (which of its permutation's --repeat runs, 1-based). A
// parameter named like any file's own column is "param.<name>" in every file (exec's metric, unit and warmup
// settings), so one name means one thing across samples.csv, statistics.csv and runs.csv.
std::string header_prefix(const std::vector<std::string>& names, std::set<std::string> taken) {
  taken.insert({"session", "status", "repeat", "rank", "role", "metric", "iteration", "t_start", "value", "unit", "warmup", "metric_ranks",
                "nan_samples"});
  for (auto& c : summary_columns()) taken.insert(c);
  std::string params = parameter_header(names, taken);
  if (!params.empty()) params.pop_back();
  return "session,status,repeat" + (names.empty() ? "" : "," + params);
}

}  // namespace

size_t write_samples_csv(const ResultsDb& db, const fs::path& file, bool gzip) {
  auto runs = db.runs();
  const std::vector<std::string> names = shown_parameters(runs);
  std::map<int64_t, std::string> prefix;
  for (auto& r : runs) prefix[r.id] = run_prefix(r.session, r.status, r.repeat, r.parameters, names);
  std::map<int64_t, std::pair<std::string, std::string>> metric_cols;  // id -> ("role,metric", "unit")
  for (auto& [id, m] : db.metrics()) metric_cols[id] = {csv_field(m.role) + "," + csv_field(m.name), csv_field(m.unit)};
  StagedFile out(file, gzip);
  out.line(header_prefix(names, {"rank", "role", "metric", "iteration", "t_start", "value", "unit", "warmup"}) +
           ",rank,role,metric,iteration,t_start,value,unit,warmup");
  size_t rows = 0;
  std::string row;
  int64_t last_run = -1;
  const std::string* run_cols = nullptr;
  db.for_each_sample([&](int64_t run, int rank, int64_t metric, const SampleRowText& s) {
    if (run != last_run) run_cols = &prefix.at(run), last_run = run;
    const auto& m = metric_cols.at(metric);
    row = *run_cols;
    row += ',';
    append(row, rank);
    row += ',';
    row += m.first;
    row += ',';
    row += s.iteration;  // stored text: shortest exact, nothing to format again
    row += ',';
    row += s.t_start;
    row += ',';
    if (s.value != "null") row += s.value;  // null: no number recorded
    row += ',';
    row += m.second;
    row += s.warmup ? ",1" : ",0";
    out.line(row);
    ++rows;
  });
  out.commit();
  return rows;
}

size_t write_statistics_csv(const ExperimentStats& stats, const fs::path& file) {
  StagedFile out(file, false);
  std::set<std::string> own = {"role", "metric", "unit", "metric_ranks", "nan_samples"};
  for (auto& c : summary_columns()) own.insert(c);
  std::string head = header_prefix(stats.parameter_names, own) + ",role,metric,unit,metric_ranks,nan_samples";
  for (auto& c : summary_columns()) head += "," + c;
  out.line(head);
  for (auto& m : stats.stats) {
    std::string row = run_prefix(m.session, m.status, m.repeat, m.parameters, stats.parameter_names) + "," + csv_field(m.role) + "," +
                      csv_field(m.metric) + "," + csv_field(m.unit) + "," + std::to_string(m.ranks) + "," + std::to_string(m.not_a_number);
    for (double v : summary_values(m.summary)) row += "," + csv_number(v);
    out.line(row);
  }
  out.commit();
  return stats.stats.size();
}

size_t write_runs_csv(const ExperimentStats& stats, const fs::path& file) {
  // Metric columns: "<metric>" or "<role>:<metric>" when the name is recorded by more than one role.
  std::map<std::string, std::set<std::string>> roles_of;
  for (auto* list : {&stats.stats, &stats.superseded})
    for (auto& m : *list) roles_of[m.metric].insert(m.role);
  auto key = [&](const MetricStats& m) { return roles_of[m.metric].size() > 1 ? m.role + ":" + m.metric : m.metric; };
  std::vector<std::string> keys;
  std::set<std::string> seen;
  std::map<int64_t, std::map<std::string, const MetricStats*>> by_run;
  std::vector<int64_t> order;
  // Every attempt, superseded ones too (runs.csv is the list of runs; statistics.csv has the ones that count).
  std::vector<const MetricStats*> all;
  for (auto* list : {&stats.stats, &stats.superseded})
    for (auto& m : *list) all.push_back(&m);
  std::stable_sort(all.begin(), all.end(), [](const MetricStats* a, const MetricStats* b) { return a->run_id < b->run_id; });
  for (const MetricStats* mp : all) {
    const MetricStats& m = *mp;
    if (seen.insert(key(m)).second) keys.push_back(key(m));
    if (!by_run.count(m.run_id)) order.push_back(m.run_id);
    by_run[m.run_id][key(m)] = &m;
  }
  StagedFile out(file, false);
  std::set<std::string> own;
  for (auto& k : keys)
    for (auto& c : summary_columns()) own.insert(k + "." + c);
  std::string head = header_prefix(stats.parameter_names, own);
  for (auto& k : keys)
    for (auto& c : summary_columns()) head += "," + csv_field(k + "." + c);
  out.line(head);
  for (int64_t run : order) {
    const MetricStats* any = by_run[run].begin()->second;
    std::string row = run_prefix(any->session, any->status, any->repeat, any->parameters, stats.parameter_names);
    for (auto& k : keys) {
      auto it = by_run[run].find(k);
      for (double v : it == by_run[run].end() ? std::vector<double>(summary_columns().size(), NAN) : summary_values(it->second->summary))
        row += "," + (std::isnan(v) ? std::string() : csv_number(v));
    }
    out.line(row);
  }
  out.commit();
  return order.size();
}

size_t write_across_runs_csv(const ExperimentStats& stats, const fs::path& file) {
  StagedFile out(file, false);
  const std::vector<std::string> cols = {"role", "metric", "unit", "runs", "samples", "median", "low", "high", "coverage"};
  std::string head = parameter_header(stats.parameter_names, std::set<std::string>(cols.begin(), cols.end()));
  for (size_t i = 0; i < cols.size(); ++i) head += (i ? "," : "") + cols[i];
  out.line(head);
  const auto rows = across_runs(stats);
  for (auto& a : rows) {
    std::string row = parameter_cells(a.parameters, stats.parameter_names);
    row += csv_field(a.role) + "," + csv_field(a.metric) + "," + csv_field(a.unit) + "," + std::to_string(a.runs.runs) + "," +
           std::to_string(a.samples) + "," + csv_number(a.runs.median) + "," + csv_number(a.runs.low) + "," + csv_number(a.runs.high) + "," + csv_number(a.runs.coverage);
    out.line(row);
  }
  out.commit();
  return rows.size();
}

CsvFiles export_csv(const ResultsDb& db, const fs::path& out_dir, bool gzip) {
  fs::create_directories(out_dir);
  CsvFiles out{out_dir / (gzip ? "samples.csv.gz" : "samples.csv"), out_dir / "statistics.csv", out_dir / "runs.csv"};
  ResultsDb::ReadSnapshot snapshot(db);  // statistics and samples of the same runs, whatever other drivers store
  ExperimentStats stats = compute_statistics(db, out_dir.parent_path().filename().string());
  out.sample_rows = write_samples_csv(db, out.samples, gzip);
  out.statistic_rows = write_statistics_csv(stats, out.statistics);
  out.run_rows = write_runs_csv(stats, out.runs);
  write_across_runs_csv(stats, out_dir / "across_runs.csv");
  return out;
}

}  // namespace fanout
