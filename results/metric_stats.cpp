#include "results/metric_stats.h"

#include <algorithm>
#include <future>
#include <set>

#include "common/error.h"
#include "plugins/sdk/fanout_plugin.h"
#include "results/layout.h"
#include "results/store.h"

namespace fanout {

std::vector<std::string> shown_parameters(const std::vector<StoredRun>& runs) {
  std::vector<std::string> names;
  std::map<std::string, std::set<std::string>> values_of;
  std::map<std::string, size_t> setting_in;  // how many runs' plugins call it a setting
  for (auto& r : runs) {
    for (auto& [k, v] : r.parameters)
      if (values_of[k].insert(v).second && values_of[k].size() == 1) names.push_back(k);
    for (auto& s : r.settings) ++setting_in[s];
  }
  std::vector<std::string> out;
  for (auto& n : names)
    if (!(setting_in[n] == runs.size() && values_of[n].size() == 1)) out.push_back(n);
  return out;
}

ExperimentStats compute_statistics(const ResultsDb& db, const std::string& name, bool with_density) {
  ExperimentStats out;
  out.name = name;
  auto runs = db.runs();
  // Each run, and its parameters made once for all its rows.
  std::map<int64_t, std::pair<const StoredRun*, SharedParameters>> by_id;
  std::map<std::string, std::set<std::string>> values_of;
  std::vector<std::string> all;
  for (auto& r : runs) {
    by_id[r.id] = {&r, SharedParameters(r.parameters)};
    ++out.runs_by_status[r.status];
    for (auto& [k, v] : r.parameters)
      if (values_of[k].insert(v).second && values_of[k].size() == 1) all.push_back(k);
  }
  out.parameter_names = shown_parameters(runs);
  // What counts: every COMPLETED run (repeats of a permutation, runs imported from several sessions); a
  // permutation that never completed, its last attempt (ids grow as runs are stored). Attempts that did not
  // complete beside a completed one are superseded.
  std::map<std::string, std::pair<bool, int64_t>> best;  // param_hash -> (any completed, last attempt's id)
  for (auto& r : runs) {
    auto& b = best[r.param_hash];
    b.first = b.first || r.status == "COMPLETED";
    b.second = std::max(b.second, r.id);
  }
  auto counts = [&](const StoredRun& r) {
    const auto& b = best.at(r.param_hash);
    return r.param_hash.empty() || r.status == "COMPLETED" || (!b.first && b.second == r.id);
  };
  for (auto& n : all)
    if (values_of[n].size() > 1) out.varied.push_back(n);
  // Large groups are summarised on a second thread while the next group is read (sorting and reading are the
  // two halves of the cost); small ones inline, where a thread would cost more than it saves.
  std::future<MetricStats> pending;
  auto summarise = [with_density](MetricStats m, std::vector<double> values) {
    m.summary = summarize(values);  // sorts values
    if (with_density) m.density = kernel_density(values);
    return m;
  };
  auto keep = [&](MetricStats done) { (counts(*by_id.at(done.run_id).first) ? out.stats : out.superseded).push_back(std::move(done)); };
  const auto declared = db.metric_declarations();
  // Every group a run declares is a row: the rows grown by doubling held up to half as much again (and both
  // copies while growing), 85 MB at the peak of a 10,000-run sweep's driver.
  out.stats.reserve(declared.size());
  db.for_each_metric([&](MetricSummaryRow& g) {
    MetricStats m;
    const auto& [r, parameters] = by_id.at(g.run_id);
    m.run_id = g.run_id;
    m.session = r->session;
    m.status = r->status;
    m.repeat = r->repeat;
    m.param_hash = r->param_hash;
    m.parameters = parameters;
    m.role = g.role;
    m.metric = g.metric;
    m.unit = g.unit;
    m.ranks = g.ranks;
    m.not_a_number = g.not_a_number;
    if (auto d = declared.find({g.run_id, g.role, g.metric}); d != declared.end()) m.better = d->second.better, m.setup_cost = d->second.setup_cost;
    if (pending.valid()) keep(pending.get());
    if (g.values.size() < 10000) keep(summarise(std::move(m), std::move(g.values)));
    else pending = std::async(std::launch::async, summarise, std::move(m), std::move(g.values));
  });
  if (pending.valid()) keep(pending.get());
  return out;
}

ExperimentStats load_experiment_stats(const std::filesystem::path& dir) {
  const auto file = dir / layout::kDatabase;
  if (!std::filesystem::exists(file)) throw UserError(dir.string() + ": no fanout.sqlite (is it an experiment folder?)");
  ResultsDb db(file, ResultsDb::ReadOnly{});  // compare, check and references only read: no write access needed
  return compute_statistics(db, dir.filename().string());
}

std::vector<AcrossRuns> across_runs(const ExperimentStats& stats) {
  std::map<std::string, size_t> at;
  std::vector<AcrossRuns> out;
  std::vector<std::vector<double>> medians;
  for (auto& m : stats.stats) {
    if (!m.summary.count || m.status != "COMPLETED") continue;  // a failed attempt's partial median is no run's figure
    std::string key = m.role + "\n" + m.metric + "\n" + m.unit;
    for (auto& [k, v] : m.parameters) key += "\n" + k + "=" + v;
    auto [it, fresh] = at.try_emplace(key, out.size());
    if (fresh) out.push_back({m.parameters, m.role, m.metric, m.unit, {}, {}, 0, m.better, m.setup_cost}), medians.emplace_back();
    if (out[it->second].better.empty()) out[it->second].better = m.better;
    out[it->second].setup_cost = out[it->second].setup_cost || m.setup_cost;
    medians[it->second].push_back(m.summary.median);
    out[it->second].samples += m.summary.count;
  }
  for (size_t i = 0; i < out.size(); ++i) out[i].runs = summarize_runs(medians[i]), out[i].run_medians = std::move(medians[i]);
  return out;
}

bool is_resource_metric(const std::string& metric) { return metric.rfind(FANOUT_RESOURCE_METRIC_PREFIX, 0) == 0; }

bool declared_setup_cost(const std::vector<const MetricStats*>& group) {
  return std::any_of(group.begin(), group.end(), [](const MetricStats* m) { return m->setup_cost; });
}

std::string series_label(const MetricStats& m, const std::vector<std::string>& varied, const std::string& except) {
  std::string label;
  for (auto& name : varied) {
    if (name == except) continue;
    for (auto& [k, v] : m.parameters)
      if (k == name) label += (label.empty() ? "" : ", ") + k + "=" + v;
  }
  return label.empty() ? "all runs" : label;
}

}  // namespace fanout
