#include "results/csv_export.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unistd.h>

#include <cerrno>
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

void append_csv_field(std::string& out, std::string_view text) {
  // A spreadsheet runs a cell that starts with = + - @ (or a tab or CR) as a formula: such text, unless it is a
  // number (-1 stays -1), gets a leading apostrophe, as OWASP's CSV-injection advice says.
  const bool formula = !text.empty() && text[0] != '\0' && std::strchr("=+-@\t\r", text[0]) != nullptr && !parse_double(text);
  if (text.find_first_of(",\"\n\r") == std::string_view::npos) {
    if (formula) out += '\'';
    out.append(text);
    return;
  }
  out += '"';
  if (formula) out += '\'';
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

std::string csv_field(const std::string& text) {
  std::string out;
  append_csv_field(out, text);
  return out;
}

// printf's "%.12g", as std::to_chars with a precision is specified to write it, at a sixth of snprintf's cost (a
// 1,000-run sweep's CSV pass formats some 150,000 of them).
void append_csv_number(std::string& s, double v) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 12);
  s.append(buf, end);
}

std::string csv_number(double v) {
  std::string s;
  append_csv_number(s, v);
  return s;
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
    const std::string* v = nullptr;  // the last of that name, as a map would keep it
    for (auto& [k, val] : params)
      if (k == name) v = &val;
    if (v) append_csv_field(s, *v);
    s += ',';
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
  ParameterColumns columns;  // only the columns: which runs count is not this file's business
  db.for_each_run([&](StoredRun&& r) { columns.add(r); });
  return write_samples_csv(db, file, gzip, columns.shown());
}

size_t write_samples_csv(const ResultsDb& db, const fs::path& file, bool gzip, const std::vector<std::string>& names) {
  // Each run's columns made as its samples come (in run order), from the run the walk is at.
  RunWalk runs(db);
  std::map<int64_t, std::pair<std::string, std::string>> metric_cols;  // id -> ("role,metric", "unit")
  for (auto& [id, m] : db.metrics()) metric_cols[id] = {csv_field(m.role) + "," + csv_field(m.name), csv_field(m.unit)};
  StagedFile out(file, gzip);
  out.line(header_prefix(names, {"rank", "role", "metric", "iteration", "t_start", "value", "unit", "warmup"}) +
           ",rank,role,metric,iteration,t_start,value,unit,warmup");
  size_t rows = 0;
  std::string row;
  int64_t last_run = -1;
  std::string run_cols;
  db.for_each_sample([&](int64_t run, int rank, int64_t metric, const SampleRowText& s) {
    if (run != last_run) {
      const StoredRun& r = runs.at(run);
      run_cols = run_prefix(r.session, r.status, r.repeat, r.parameters, names), last_run = run;
    }
    const auto& m = metric_cols.at(metric);
    row = run_cols;
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

// The summary columns' cells of one run's metric: ",<value>" each, empty where a value is not a number.
std::string summary_cells(const std::vector<double>& values) {
  std::string cells;
  // A number the one before it was is copied, not formatted again: a group of one sample (a run that prints one
  // figure) has one number for its min, mean, median, interval, percentiles and max.
  std::string last_text;
  double last = NAN;
  for (double v : values) {
    cells += ',';
    if (std::isnan(v)) continue;
    if (std::memcmp(&v, &last, sizeof v) != 0) last_text.clear(), append_csv_number(last_text, v), last = v;
    cells += last_text;
  }
  return cells;
}
std::string summary_cells(const Summary* s) { return s ? summary_cells(summary_values(*s)) : std::string(summary_columns().size(), ','); }

StatisticsFiles::StatisticsFiles(const fs::path& dir, std::vector<std::string> parameter_names)
    : dir_(dir), names_(std::move(parameter_names)), statistics_(std::make_unique<StagedFile>(dir / "statistics.csv", false)) {
  std::set<std::string> own = {"role", "metric", "unit", "metric_ranks", "nan_samples"};
  for (auto& c : summary_columns()) own.insert(c);
  std::string head = header_prefix(names_, own) + ",role,metric,unit,metric_ranks,nan_samples";
  for (auto& c : summary_columns()) head += "," + c;
  statistics_->line(head);
  // runs.csv's rows wait in an unnamed file beside it until its columns (every metric of every run) are known.
  std::string tmpl = (dir / ".runs.csv.rows-XXXXXX").string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0 || ::unlink(tmpl.c_str()) != 0 || !(run_rows_ = ::fdopen(fd, "w+")))
    throw UserError(tmpl + ": cannot write runs.csv's rows aside: " + std::strerror(errno));
}

StatisticsFiles::~StatisticsFiles() {
  if (run_rows_) std::fclose(run_rows_);
}

void StatisticsFiles::add(const MetricStats& m, bool counts) {
  // runs.csv: every attempt, superseded ones too (it is the list of runs; statistics.csv has the ones that count).
  // The run's columns are made once for both files.
  if (m.run_id != run_ || run_prefix_.empty()) {
    end_run();
    run_ = m.run_id;
    run_prefix_ = run_prefix(m.session, m.status, m.repeat, m.parameters, names_);
  }
  // The summary's numbers formatted once for both files (formatting was a sixth of writing them): runs.csv leaves a
  // cell empty where statistics.csv says nan.
  const std::vector<double> values = summary_values(m.summary);
  std::string cells = summary_cells(values);
  const size_t col = column_of(m);
  if (counts) {
    std::string row = run_prefix_;
    row += column_fields_[col];
    row += ',', row += csv_field(m.unit);
    row += ',', row += std::to_string(m.ranks), row += ',', row += std::to_string(m.not_a_number);
    if (std::none_of(values.begin(), values.end(), [](double v) { return std::isnan(v); })) row += cells;
    else for (double v : values) row += ',', append_csv_number(row, v);
    statistics_->line(row);
    ++statistic_rows_;
    across_.add(m);
  }
  if (run_cells_.size() <= col) run_cells_.resize(col + 1);
  run_cells_[col] = std::move(cells);  // a metric in two units: the last, as one column holds one
}

size_t StatisticsFiles::column_of(const MetricStats& m) {
  const size_t k = run_columns_.size();
  size_t col;
  if (k < previous_run_columns_.size() && columns_[previous_run_columns_[k]].first == m.role &&
      columns_[previous_run_columns_[k]].second == m.metric) {
    col = previous_run_columns_[k];
  } else {
    auto [it, fresh] = column_.try_emplace({m.role, m.metric}, columns_.size());
    if (fresh) {
      columns_.push_back({m.role, m.metric}), roles_of_[m.metric].insert(m.role);
      column_fields_.push_back(',' + csv_field(m.role) + ',' + csv_field(m.metric));
    }
    col = it->second;
  }
  run_columns_.push_back(col);
  return col;
}

// The run's row with a cell group for every column known so far; columns first seen later are padded at commit.
void StatisticsFiles::end_run() {
  if (run_prefix_.empty()) return;
  std::string row = run_prefix_;
  for (size_t c = 0; c < columns_.size(); ++c) {
    if (c < run_cells_.size() && !run_cells_[c].empty()) row += run_cells_[c], run_cells_[c].clear();
    else row += summary_cells(nullptr);
  }
  // Length first: a quoted field may hold a newline (a parameter's value), so lines would not part the rows.
  const uint64_t length = row.size();
  if (std::fwrite(&length, sizeof length, 1, run_rows_) != 1 || std::fwrite(row.data(), 1, row.size(), run_rows_) != row.size())
    throw UserError("runs.csv: cannot write its rows aside: " + std::string(std::strerror(errno)));
  if (columns_at_.empty() || columns_at_.back().second != columns_.size()) columns_at_.push_back({run_rows_written_, columns_.size()});
  ++run_rows_written_;
  previous_run_columns_.swap(run_columns_);
  run_columns_.clear();
  run_prefix_.clear();
}

CsvFiles StatisticsFiles::commit() {
  end_run();
  statistics_->commit();
  // Metric columns: "<metric>" or "<role>:<metric>" when the name is recorded by more than one role.
  std::vector<std::string> keys;
  for (auto& [role, metric] : columns_) keys.push_back(roles_of_[metric].size() > 1 ? role + ":" + metric : metric);
  StagedFile runs(dir_ / "runs.csv", false);
  std::set<std::string> own;
  for (auto& k : keys)
    for (auto& c : summary_columns()) own.insert(k + "." + c);
  std::string head = header_prefix(names_, own);
  for (auto& k : keys)
    for (auto& c : summary_columns()) head += "," + csv_field(k + "." + c);
  runs.line(head);
  if (std::fflush(run_rows_) != 0 || std::fseek(run_rows_, 0, SEEK_SET) != 0) throw UserError("runs.csv: cannot read its rows back: " + std::string(std::strerror(errno)));
  std::string row;
  auto at = columns_at_.begin();
  size_t known = 0;
  for (size_t r = 0; r < run_rows_written_; ++r) {
    for (; at != columns_at_.end() && at->first <= r; ++at) known = at->second;
    uint64_t length = 0;
    if (std::fread(&length, sizeof length, 1, run_rows_) != 1) throw UserError("runs.csv: its rows set aside could not be read back");
    row.resize(size_t(length));
    if (std::fread(row.data(), 1, row.size(), run_rows_) != row.size()) throw UserError("runs.csv: its rows set aside could not be read back");
    for (size_t c = known; c < columns_.size(); ++c) row += summary_cells(nullptr);
    runs.line(row);
  }
  runs.commit();
  // across_runs.csv: per permutation and figure, its runs' medians summarised.
  StagedFile across(dir_ / "across_runs.csv", false);
  const std::vector<std::string> cols = {"role", "metric", "unit", "runs", "samples", "median", "low", "high", "coverage"};
  std::string across_head = parameter_header(names_, std::set<std::string>(cols.begin(), cols.end()));
  for (size_t i = 0; i < cols.size(); ++i) across_head += (i ? "," : "") + cols[i];
  across.line(across_head);
  for (auto& a : across_.finish()) {
    std::string r = parameter_cells(a.parameters, names_);
    r += csv_field(a.role) + "," + csv_field(a.metric) + "," + csv_field(a.unit) + "," + std::to_string(a.runs.runs) + "," +
         std::to_string(a.samples) + "," + csv_number(a.runs.median) + "," + csv_number(a.runs.low) + "," + csv_number(a.runs.high) + "," + csv_number(a.runs.coverage);
    across.line(r);
  }
  across.commit();
  CsvFiles out;
  out.statistics = dir_ / "statistics.csv";
  out.runs = dir_ / "runs.csv";
  out.statistic_rows = statistic_rows_;
  out.run_rows = run_rows_written_;
  return out;
}

CsvFiles write_statistics_files(const ExperimentStats& stats, const fs::path& dir) {
  // In run order, as a pass makes them: statistics.csv keeps the counted rows' order, runs.csv every attempt's.
  std::vector<std::pair<const MetricStats*, bool>> rows;
  for (auto& m : stats.stats) rows.push_back({&m, true});
  for (auto& m : stats.superseded) rows.push_back({&m, false});
  std::stable_sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.first->run_id < b.first->run_id; });
  StatisticsFiles files(dir, stats.parameter_names);
  for (auto& [m, counts] : rows) files.add(*m, counts);
  return files.commit();
}

CsvFiles export_csv(const ResultsDb& db, const fs::path& out_dir, bool gzip) {
  fs::create_directories(out_dir);
  ResultsDb::ReadSnapshot snapshot(db);  // statistics and samples of the same runs, whatever other drivers store
  const fs::path samples = out_dir / (gzip ? "samples.csv.gz" : "samples.csv");
  // The runs read once for the columns and which runs count; then each pass walks them beside its table.
  ExperimentStats head;
  const CountedRuns counted = count_runs(db, head);
  const size_t sample_rows = write_samples_csv(db, samples, gzip, head.parameter_names);
  // Each statistic written as it is made: a 100,000-run sweep's driver held every one at once (2 GB) to write them.
  StatisticsFiles files(out_dir, head.parameter_names);
  for_each_statistic(db, counted, false, [&](MetricStats&& m, bool counts) { files.add(m, counts); });
  CsvFiles out = files.commit();
  out.samples = samples;
  out.sample_rows = sample_rows;
  return out;
}

}  // namespace fanout
