#include "results/csv_export.h"

#include <cstdio>
#include <map>
#include <set>

#include "common/error.h"
#include "common/files.h"
#include "results/statistics.h"
#include "results/store.h"

namespace fanout {

namespace fs = std::filesystem;

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.12g", v);
  return buf;
}

// A file written to <path>.tmp and renamed into place on commit().
class StagedFile {
 public:
  explicit StagedFile(fs::path path) : path_(std::move(path)), tmp_(path_.string() + ".tmp") {
    f_ = std::fopen(tmp_.c_str(), "w");
    if (!f_) throw UserError("cannot write " + tmp_.string());
  }
  ~StagedFile() {
    if (f_) {
      std::fclose(f_);
      fs::remove(tmp_);
    }
  }
  void line(const std::string& s) {
    std::fputs(s.c_str(), f_);
    std::fputc('\n', f_);
  }
  void commit() {
    bool ok = std::fflush(f_) == 0 && !std::ferror(f_);
    std::fclose(f_);
    f_ = nullptr;
    if (!ok) throw UserError("cannot write " + tmp_.string());
    fs::rename(tmp_, path_);
  }

 private:
  fs::path path_, tmp_;
  FILE* f_ = nullptr;
};

}  // namespace

CsvFiles export_csv(const ResultsDb& db, const fs::path& out_dir) {
  fs::create_directories(out_dir);
  CsvFiles out{out_dir / "samples.csv", out_dir / "statistics.csv"};
  auto runs = db.runs();
  std::map<int64_t, const StoredRun*> by_id;
  std::vector<std::string> param_names;  // union of parameter names, first-seen order
  std::set<std::string> seen;
  for (auto& r : runs) {
    by_id[r.id] = &r;
    for (auto& [k, v] : r.parameters)
      if (seen.insert(k).second) param_names.push_back(k);
  }
  auto run_columns = [&](int64_t run_id) {
    const StoredRun* r = by_id.at(run_id);
    std::string s = csv_field(r->session) + "," + csv_field(r->status);
    for (auto& name : param_names) {
      std::string v;
      for (auto& [k, val] : r->parameters)
        if (k == name) v = val;
      s += "," + csv_field(v);
    }
    return s;
  };
  std::string head = "session,status";
  for (auto& n : param_names) head += "," + csv_field(n);

  StagedFile samples(out.samples);
  samples.line(head + ",rank,role,metric,iteration,t_start,value,unit,warmup");
  db.for_each_sample([&](int64_t run, int rank, const std::string& role, const std::string& metric, int64_t it, double t,
                         double v, const std::string& unit, bool warmup) {
    samples.line(run_columns(run) + "," + std::to_string(rank) + "," + csv_field(role) + "," + csv_field(metric) + "," +
                 std::to_string(it) + "," + num(t) + "," + num(v) + "," + csv_field(unit) + "," + (warmup ? "1" : "0"));
    ++out.sample_rows;
  });
  samples.commit();

  StagedFile stats(out.statistics);
  std::string stat_head = head + ",role,metric,unit";
  for (auto& c : summary_columns()) stat_head += "," + c;
  stats.line(stat_head);
  db.for_each_metric([&](const MetricSummaryRow& m) {
    std::vector<double> values = m.values;
    std::string row = run_columns(m.run_id) + "," + csv_field(m.role) + "," + csv_field(m.metric) + "," + csv_field(m.unit);
    for (double v : summary_values(summarize(values))) row += "," + num(v);
    stats.line(row);
    ++out.statistic_rows;
  });
  stats.commit();
  return out;
}

}  // namespace fanout
