#include "results/models.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>
#include <optional>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>


#include "common/error.h"
#include "common/text.h"
#include "results/csv_export.h"
#include "results/display_unit.h"
#include "results/metric_stats.h"
#include "results/store.h"

namespace fanout {

namespace {

bool numeric(const std::set<std::string>& values) {
  return std::all_of(values.begin(), values.end(), [](const std::string& v) { return parse_double(v).has_value(); });
}

std::string series_text(const std::vector<std::pair<std::string, std::string>>& series) {
  std::string out;
  for (auto& [k, v] : series) out += (out.empty() ? "" : ", ") + k + "=" + v;
  return out;
}

}  // namespace

std::string FigureModel::label() const {
  std::string l = metric + "(" + (two ? pair.x + ", " + pair.y : single.param) + ")";
  if (!series.empty()) l += " [" + series_text(series) + "]";
  return l;
}

std::vector<FigureModel> experiment_models(const ExperimentStats& stats, const ModelOptions& opts) {
  std::map<std::string, std::set<std::string>> values;
  for (auto& m : stats.stats)
    for (auto& [k, v] : m.parameters) values[k].insert(v);
  std::vector<std::string> swept;  // varied and numeric
  for (auto& name : stats.varied)
    if (numeric(values[name]) && (opts.params.empty() || std::count(opts.params.begin(), opts.params.end(), name))) swept.push_back(name);
  std::vector<FigureModel> out;
  const auto figures = across_runs(stats);
  // Per figure (role, metric, unit): its across-runs medians by parameters.
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<const AcrossRuns*>> by_figure;
  for (auto& f : figures)
    if (!f.setup_cost && (opts.metrics.empty() || std::count(opts.metrics.begin(), opts.metrics.end(), f.metric)))
      by_figure[{f.role, f.metric, f.unit}].push_back(&f);
  auto value_of = [](const AcrossRuns& f, const std::string& name) {
    for (auto& [k, v] : f.parameters)
      if (k == name) return parse_double(v).value_or(NAN);
    return double(NAN);
  };
  for (auto& [key, rows] : by_figure) {
    for (auto& p : swept) {
      // One series per combination of the other varied parameters.
      std::map<std::vector<std::pair<std::string, std::string>>, std::vector<std::pair<double, double>>> series;
      for (auto* f : rows) {
        std::vector<std::pair<std::string, std::string>> others;
        for (auto& [k, v] : f->parameters)
          if (k != p && std::count(stats.varied.begin(), stats.varied.end(), k)) others.emplace_back(k, v);
        series[others].emplace_back(value_of(*f, p), f->runs.median);
      }
      for (auto& [others, points] : series) {
        FigureModel fm;
        std::tie(fm.role, fm.metric, fm.unit) = key;
        fm.series = others;
        fm.single = fit_single_parameter(p, points);
        out.push_back(std::move(fm));
      }
    }
    // Two numeric parameters varied, and nothing else: Extra-P's two-parameter model over the whole grid.
    if (swept.size() == 2 && stats.varied.size() == 2) {
      std::vector<std::array<double, 3>> points;
      for (auto* f : rows) points.push_back({value_of(*f, swept[0]), value_of(*f, swept[1]), f->runs.median});
      FigureModel fm;
      std::tie(fm.role, fm.metric, fm.unit) = key;
      fm.two = true;
      fm.pair = fit_two_parameters(swept[0], swept[1], points);
      out.push_back(std::move(fm));
    }
  }
  return out;
}

std::vector<ScalingSpec> default_scaling(const ExperimentStats& stats) {
  auto ends = [](const std::string& s, const std::string& tail) { return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0; };
  std::vector<ScalingSpec> out;
  for (auto& v : stats.varied)
    if (v == "nodes" || v == "ranks_per_node" || ends(v, "_nodes") || ends(v, "_per_node") || ends(v, "threads")) out.push_back({"strong", v});
  return out;
}

std::vector<ScalingSpec> stored_scaling(const std::vector<StoredRun>& runs) {
  std::vector<ScalingSpec> out;
  std::set<std::string> seen;
  for (auto it = runs.rbegin(); it != runs.rend(); ++it) {  // the newest sweep's word first
    const StoredRun& r = *it;
    if (r.scaling.empty()) continue;
    std::vector<ScalingSpec> specs;
    try {
      specs = parse_scaling_list(r.scaling, "run " + r.session + ": provenance scaling");
    } catch (const UserError&) {
      continue;  // written by the driver, so only a hand-edited database gets here: the names' default then
    }
    for (auto& s : specs)
      if (seen.insert(s.param).second) out.push_back(s);
  }
  return out;
}

std::vector<ScalingRow> scaling_rows(const ExperimentStats& stats, const std::vector<ScalingSpec>& specs) {
  std::vector<ScalingRow> out;
  const auto figures = across_runs(stats);
  for (auto& spec : specs) {
    // Per figure and combination of the other varied values: (count, median), the direction.
    std::map<std::tuple<std::string, std::string, std::string, std::vector<std::pair<std::string, std::string>>>, std::vector<std::pair<double, double>>> groups;
    std::map<std::string, std::string> direction;
    for (auto& f : figures) {
      // A speedup is of what the work takes; what a run cost (resource.*) has its plots and models, not one.
      if (f.setup_cost || is_resource_metric(f.metric)) continue;
      std::optional<double> count;
      std::vector<std::pair<std::string, std::string>> others;
      for (auto& [k, v] : f.parameters) {
        if (k == spec.param) count = parse_double(v);
        else if (std::count(stats.varied.begin(), stats.varied.end(), k)) others.emplace_back(k, v);
      }
      if (!count || !(*count > 0)) continue;
      groups[{f.role, f.metric, f.unit, others}].emplace_back(*count, f.runs.median);
      const std::string better = f.better.empty() ? unit_better(f.unit) : f.better;
      direction[f.role + "\n" + f.metric] = better;
    }
    for (auto& [key, points] : groups) {
      const std::string dir = direction[std::get<0>(key) + "\n" + std::get<1>(key)];
      if ((dir != "lower" && dir != "higher") || points.size() < 2) continue;
      std::sort(points.begin(), points.end());
      const auto [p0, v0] = points.front();
      for (auto& [p, v] : points) {
        ScalingRow r;
        std::tie(r.role, r.metric, r.unit, r.series) = key;
        r.mode = spec.mode, r.param = spec.param, r.count = p, r.base_count = p0, r.median = v, r.ideal = p / p0;
        const double ratio = dir == "lower" ? v0 / v : v / v0;  // how much better than at p0
        if (spec.mode == "strong") r.speedup = ratio, r.efficiency = ratio / r.ideal;
        else r.efficiency = dir == "lower" ? ratio : ratio / r.ideal, r.speedup = r.efficiency * r.ideal;
        out.push_back(std::move(r));
      }
    }
  }
  return out;
}

void write_scaling_csv(const std::vector<ScalingRow>& rows, std::ostream& out) {
  out << "role,metric,unit,mode,param,series,count,base_count,median,speedup,ideal_speedup,efficiency\n";
  for (auto& r : rows)
    out << csv_field(r.role) << "," << csv_field(r.metric) << "," << csv_field(r.unit) << "," << r.mode << "," << csv_field(r.param) << ","
        << csv_field(series_text(r.series)) << "," << csv_number(r.count) << "," << csv_number(r.base_count) << "," << csv_number(r.median)
        << "," << csv_number(r.speedup) << "," << csv_number(r.ideal) << "," << csv_number(r.efficiency) << "\n";
}

Prediction parse_prediction(const std::string& text) {
  Prediction p;
  for (auto& part : split(text, ',')) {
    const auto eq = part.find('=');
    const auto v = eq == std::string::npos ? std::nullopt : parse_double(part.substr(eq + 1));
    if (!v || eq == 0) throw UserError("--predict '" + printable(text) + "': expected PARAM=VALUE[,PARAM=VALUE] (e.g. size=4096)");
    p.at.emplace_back(part.substr(0, eq), *v);
  }
  return p;
}

namespace {

std::optional<double> given(const Prediction& p, const std::string& name) {
  for (auto& [k, v] : p.at)
    if (k == name) return v;
  return std::nullopt;
}

}  // namespace

void print_models(const std::vector<FigureModel>& models, const std::optional<Prediction>& predict, std::ostream& out) {
  for (auto& m : models) {
    const std::string unit = m.unit.empty() ? "" : " [" + m.unit + "]";
    if (m.two) {
      if (!m.pair.fitted) {
        out << m.label() << ": no model: " << m.pair.why << "\n";
        continue;
      }
      char stats[120];
      std::snprintf(stats, sizeof stats, "   adj. R^2 %.4f, SMAPE %.2f %%, %s, %zu points", m.pair.adj_r2, m.pair.smape, m.pair.form.c_str(), m.pair.points);
      out << m.label() << " = " << m.pair.formula() << unit << stats << "\n";
      if (predict) {
        auto xv = given(*predict, m.pair.x), yv = given(*predict, m.pair.y);
        if (xv && yv) out << "  at " << m.pair.x << "=" << model_number(*xv) << ", " << m.pair.y << "=" << model_number(*yv) << ": "
                          << model_number(m.pair.evaluate(*xv, *yv)) << unit << "\n";
      }
      continue;
    }
    if (!m.single.fitted) {
      out << m.label() << ": no model: " << m.single.why << "\n";
      continue;
    }
    char stats[200];
    std::snprintf(stats, sizeof stats, "   adj. R^2 %.4f, SMAPE %.2f %%, fitted on %s %s..%s (%zu values)", m.single.adj_r2, m.single.smape,
                  m.single.param.c_str(), model_number(m.single.lo).c_str(), model_number(m.single.hi).c_str(), m.single.points);
    out << m.label() << " = " << m.single.formula() << unit << stats;
    if (!m.single.why.empty()) out << " (" << m.single.why << ")";
    out << "\n";
    if (predict)
      if (auto v = given(*predict, m.single.param)) {
        const bool outside = *v < m.single.lo || *v > m.single.hi;
        out << "  at " << m.single.param << "=" << model_number(*v) << ": " << model_number(m.single.evaluate(*v)) << unit
            << (outside ? "  (an extrapolation: outside the fitted " + model_number(m.single.lo) + ".." + model_number(m.single.hi) + ")" : "")
            << "\n";
      }
  }
}

void write_models(const std::vector<FigureModel>& models, const std::string& format, std::ostream& out) {
  static const char* cols[] = {"role", "metric", "unit", "params", "series", "fitted", "why", "formula", "c0", "c1", "exponent",
                               "log_exponent", "term", "smape_pct", "adj_r2", "points", "lo", "hi"};
  auto row = [](const FigureModel& m) {
    const bool fitted = m.two ? m.pair.fitted : m.single.fitted;
    std::vector<std::string> v{m.role, m.metric, m.unit, m.two ? m.pair.x + "," + m.pair.y : m.single.param, series_text(m.series),
                               fitted ? "true" : "false", m.two ? m.pair.why : m.single.why, m.two ? m.pair.formula() : m.single.formula()};
    if (m.two) {
      for (int i = 0; i < 6; ++i) v.push_back("");
      v.push_back(csv_number(m.pair.smape)), v.push_back(csv_number(m.pair.adj_r2)), v.push_back(std::to_string(m.pair.points));
      v.push_back(""), v.push_back("");
    } else {
      const auto& s = m.single;
      v.push_back(csv_number(s.c0)), v.push_back(csv_number(s.c1)), v.push_back(csv_number(s.term.exponent()));
      v.push_back(std::to_string(s.term.log)), v.push_back(s.term.text(s.param));
      v.push_back(csv_number(s.smape)), v.push_back(csv_number(s.adj_r2)), v.push_back(std::to_string(s.points));
      v.push_back(csv_number(s.lo)), v.push_back(csv_number(s.hi));
    }
    return v;
  };
  if (format == "csv") {
    for (size_t i = 0; i < std::size(cols); ++i) out << (i ? "," : "") << cols[i];
    out << "\n";
    for (auto& m : models) {
      auto v = row(m);
      for (size_t i = 0; i < v.size(); ++i) out << (i ? "," : "") << csv_field(v[i]);
      out << "\n";
    }
    return;
  }
  nlohmann::json j = nlohmann::json::array();
  for (auto& m : models) {
    nlohmann::json o;
    auto v = row(m);
    for (size_t i = 0; i < v.size(); ++i) o[cols[i]] = v[i];
    j.push_back(o);
  }
  out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

}  // namespace fanout
