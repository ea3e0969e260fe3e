#include "results/metric_stats.h"

#include <algorithm>
#include <cassert>
#include <future>
#include <set>
#include <stdexcept>

#include "common/error.h"
#include "plugins/sdk/fanout_plugin.h"
#include "results/layout.h"
#include "results/store.h"

namespace fanout {

void ParameterColumns::add(const StoredRun& run) {
  ++runs_;
  for (auto& [k, v] : run.parameters) {
    Column& c = seen_[k];
    if (!c.named) c.named = true, order_.push_back(k), c.first = v;
    else c.varies = c.varies || v != c.first;
  }
  for (auto& s : run.settings) ++seen_[s].setting_in;
}

std::vector<std::string> ParameterColumns::shown() const {
  std::vector<std::string> out;
  for (auto& n : order_) {
    const Column& c = seen_.at(n);
    if (!(c.setting_in == runs_ && !c.varies)) out.push_back(n);
  }
  return out;
}

std::vector<std::string> ParameterColumns::varied() const {
  std::vector<std::string> out;
  for (auto& n : order_)
    if (seen_.at(n).varies) out.push_back(n);
  return out;
}

std::vector<std::string> shown_parameters(const std::vector<StoredRun>& runs) {
  ParameterColumns columns;
  for (auto& r : runs) columns.add(r);
  return columns.shown();
}

CountedRuns count_runs(const ResultsDb& db, ExperimentStats& head) {
  ParameterColumns columns;
  // Each run's hash, while the runs are read: the rule looks at a permutation's attempts together.
  struct Attempt {
    std::string hash;
    bool completed;
  };
  std::vector<Attempt> attempts;
  CountedRuns out;
  db.for_each_run([&](StoredRun&& r) {
    ++head.runs_by_status[r.status];
    columns.add(r);
    out.ids_.push_back(r.id);
    attempts.push_back({std::move(r.param_hash), r.status == "COMPLETED"});
  });
  assert(std::is_sorted(out.ids_.begin(), out.ids_.end()));  // for_each_run's order
  // Over the attempts in the order of their permutation: an index each, not a map of every permutation (a
  // 100,000-run sweep's repeats are 100,000 permutations' hashes).
  std::vector<uint32_t> order(attempts.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return attempts[a].hash < attempts[b].hash; });
  out.counts_.assign(attempts.size(), false);
  for (size_t begin = 0, end; begin < order.size(); begin = end) {
    const std::string& hash = attempts[order[begin]].hash;
    bool any_completed = false;
    for (end = begin; end < order.size() && attempts[order[end]].hash == hash; ++end) any_completed = any_completed || attempts[order[end]].completed;
    for (size_t k = begin; k < end; ++k) {
      // The group's last is its highest id: stable, so the last of the group in id order.
      out.counts_[order[k]] = hash.empty() || attempts[order[k]].completed || (!any_completed && k == end - 1);
    }
  }
  head.parameter_names = columns.shown();
  head.varied = columns.varied();
  return out;
}

bool CountedRuns::counts(int64_t run_id) const {
  auto it = std::lower_bound(ids_.begin(), ids_.end(), run_id);
  if (it == ids_.end() || *it != run_id) throw std::out_of_range("no run " + std::to_string(run_id));
  return counts_[size_t(it - ids_.begin())];
}

const StoredRun& RunWalk::at(int64_t run_id) {
  while (!started_ || run_.id < run_id) {
    if (!reader_.next(run_)) throw std::out_of_range("no run " + std::to_string(run_id));
    started_ = true;
  }
  if (run_.id != run_id) throw std::out_of_range("no run " + std::to_string(run_id));
  return run_;
}

void for_each_statistic(const ResultsDb& db, const std::string& name, bool with_density, ExperimentStats& head,
                        const std::function<void(MetricStats&&, bool counts)>& row) {
  head.name = name;
  const CountedRuns counted = count_runs(db, head);
  for_each_statistic(db, counted, with_density, row);
}

void for_each_statistic(const ResultsDb& db, const CountedRuns& counted, bool with_density,
                        const std::function<void(MetricStats&&, bool counts)>& row) {
  RunWalk runs(db);
  // Repeats of a permutation share one parameter list (a 100,000-run sweep of 1,000 permutations holds 1,000).
  std::map<ParameterList, SharedParameters> lists;
  const SharedParameters* parameters = nullptr;
  int64_t parameters_of = -1;
  // Large groups are summarised on a second thread while the next group is read (sorting and reading are the
  // two halves of the cost); small ones inline, where a thread would cost more than it saves.
  std::future<MetricStats> pending;
  auto summarise = [with_density](MetricStats m, std::vector<double> values) {
    m.summary = summarize(values);  // sorts values
    if (with_density) m.density = kernel_density(values);
    return m;
  };
  auto keep = [&](MetricStats done) {
    const bool counts = counted.counts(done.run_id);
    row(std::move(done), counts);
  };
  db.for_each_metric([&](MetricSummaryRow& g) {
    MetricStats m;
    const StoredRun& r = runs.at(g.run_id);
    if (parameters_of != r.id) parameters = &lists.try_emplace(r.parameters, r.parameters).first->second, parameters_of = r.id;
    m.run_id = g.run_id;
    m.session = r.session;
    m.status = r.status;
    m.repeat = r.repeat;
    m.param_hash = r.param_hash;
    m.parameters = *parameters;
    m.role = g.role;
    m.metric = g.metric;
    m.unit = g.unit;
    m.ranks = g.ranks;
    m.not_a_number = g.not_a_number;
    m.better = std::move(g.better);
    m.setup_cost = g.setup_cost;
    if (pending.valid()) keep(pending.get());
    if (g.values.size() < 10000) keep(summarise(std::move(m), std::move(g.values)));
    else pending = std::async(std::launch::async, summarise, std::move(m), std::move(g.values));
  });
  if (pending.valid()) keep(pending.get());
}

ExperimentStats compute_statistics(const ResultsDb& db, const std::string& name, bool with_density) {
  ExperimentStats out;
  // Every group a run declares is a row: the rows grown by doubling held up to half as much again (and both
  // copies while growing), 85 MB at the peak of a 10,000-run sweep's driver.
  out.stats.reserve(db.metric_declaration_count());
  for_each_statistic(db, name, with_density, out, [&](MetricStats&& m, bool counts) { (counts ? out.stats : out.superseded).push_back(std::move(m)); });
  return out;
}

ExperimentStats load_experiment_stats(const std::filesystem::path& dir) {
  const auto file = dir / layout::kDatabase;
  if (!std::filesystem::exists(file)) throw UserError(dir.string() + ": no fanout.sqlite (is it an experiment folder?)");
  ResultsDb db(file, ResultsDb::ReadOnly{});  // compare, check and references only read: no write access needed
  return compute_statistics(db, dir.filename().string());
}

void AcrossRunsBuilder::add(const MetricStats& m) {
  if (!m.summary.count || m.status != "COMPLETED") return;  // a failed attempt's partial median is no run's figure
  std::string figure;
  for (const std::string* part : {&m.role, &m.metric, &m.unit}) (figure += *part) += '\n';
  const uint64_t figure_at = figure_index_.try_emplace(std::move(figure), figure_index_.size()).first->second;
  auto [it, fresh] = at_.try_emplace(uint64_t(list_index(m.parameters)) << 32 | figure_at, out_.size());
  if (fresh) out_.push_back({m.parameters, m.role, m.metric, m.unit, {}, {}, 0, m.better, m.setup_cost});
  AcrossRuns& a = out_[it->second];
  if (a.better.empty()) a.better = m.better;
  a.setup_cost = a.setup_cost || m.setup_cost;
  a.run_medians.push_back(m.summary.median);
  a.samples += m.summary.count;
}

size_t AcrossRunsBuilder::list_index(const SharedParameters& p) {
  if (auto known = list_at_address_.find(&p.list()); known != list_at_address_.end()) return known->second;
  std::string text;
  for (auto& [k, v] : p) (((text += k) += '=') += v) += '\n';
  const size_t index = list_index_.try_emplace(std::move(text), list_index_.size()).first->second;
  lists_held_.push_back(p);
  list_at_address_.emplace(&p.list(), index);
  return index;
}

std::vector<AcrossRuns> AcrossRunsBuilder::finish() {
  for (AcrossRuns& a : out_) a.runs = summarize_runs(a.run_medians);
  at_.clear();
  list_at_address_.clear(), lists_held_.clear(), list_index_.clear(), figure_index_.clear();
  return std::move(out_);
}

std::vector<AcrossRuns> across_runs(const ExperimentStats& stats) {
  AcrossRunsBuilder b;
  for (auto& m : stats.stats) b.add(m);
  return b.finish();
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
