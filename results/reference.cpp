#include "results/reference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <ostream>
#include <sstream>
#include <toml++/toml.h>

#include "common/error.h"
#include "common/toml_document.h"
#include "common/files.h"
#include "common/text.h"
#include "results/layout.h"
#include "results/metric_stats.h"

namespace fanout {

namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kStatistics = {"median", "mean", "min", "max", "p90", "p95", "p99"};

double statistic_of(const Summary& s, const std::string& name) {
  if (name == "mean") return s.mean;
  if (name == "min") return s.min;
  if (name == "max") return s.max;
  if (name == "p90") return s.p90;
  if (name == "p95") return s.p95;
  if (name == "p99") return s.p99;
  return s.median;
}

std::string value_text(const toml::node& v) {
  if (auto s = v.value_exact<std::string>()) return *s;
  if (auto i = v.value_exact<int64_t>()) return std::to_string(*i);
  if (auto d = v.value_exact<double>()) {
    std::ostringstream o;
    o << *d;
    return o.str();
  }
  if (auto b = v.value_exact<bool>()) return *b ? "true" : "false";
  return "";
}


}  // namespace

std::vector<Reference> read_references(const fs::path& file) {
  const std::string text = read_file(file);
  const toml::table root = parse_toml_document(text, file.string());
  auto* list = root["reference"].as_array();
  if (!list || list->empty()) throw UserError(file.string() + ": no [[reference]] tables");
  std::vector<Reference> out;
  for (auto& node : *list) {
    auto* t = node.as_table();
    const std::string at = file.string() + ":" + std::to_string(node.source().begin.line);
    if (!t) throw UserError(at + ": [[reference]] entries are tables");
    Reference r;
    r.origin = at;
    for (auto& [k, v] : *t) {
      const std::string key(k.str()), where = file.string() + ":" + std::to_string(v.source().begin.line) + ": " + key;
      const toml::node& value = v;  // a structured binding cannot be captured before C++20 (clang refuses it)
      auto number = [&] {
        auto d = value.value<double>();
        if (!d || !std::isfinite(*d)) throw UserError(where + " must be a number");
        return *d;
      };
      if (key == "metric" || key == "role" || key == "unit" || key == "statistic") {
        auto s = v.value_exact<std::string>();
        if (!s) throw UserError(where + " must be a string");
        (key == "metric" ? r.metric : key == "role" ? r.role : key == "unit" ? r.unit : r.statistic) = *s;
      } else if (key == "value") {
        r.value = number(), r.has_value = true;
      } else if (key == "abs_threshold") {
        r.abs_threshold = number();
        if (r.abs_threshold < 0) throw UserError(where + " must be 0 or more (in the reference's unit)");
      } else if (key == "lower" || key == "upper") {
        (key == "lower" ? r.lower : r.upper) = number();
      } else if (key == "parameters") {
        auto* p = v.as_table();
        if (!p) throw UserError(where + " must be a table of name = value");
        for (auto& [pk, pv] : *p) r.parameters.emplace_back(std::string(pk.str()), value_text(pv));
      } else {
        throw UserError(where + ": unknown key (known: metric, role, parameters, statistic, value, unit, lower, upper, abs_threshold)");
      }
    }
    // A unit may be "" (a count without one) but must be said: a reference in no unit would match any.
    if (r.metric.empty() || !t->contains("unit") || (!r.has_value && r.abs_threshold < 0))
      throw UserError(at + ": a reference needs metric, unit and value (or abs_threshold alone, for results compare)");
    if (!r.has_value && (t->contains("lower") || t->contains("upper") || t->contains("statistic")))
      throw UserError(at + ": lower, upper and statistic hold a value: this table has none");
    if (std::find(kStatistics.begin(), kStatistics.end(), r.statistic) == kStatistics.end())
      throw UserError(at + ": statistic '" + r.statistic + "' is not one of " + join(kStatistics, ", "));
    if (r.lower > 0 || r.upper < 0) throw UserError(at + ": lower must be <= 0 and upper >= 0 (fractions of value: -0.05 is 5 % below)");
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<Reference> read_references_to_check(const fs::path& file) {
  std::vector<Reference> refs = read_references(file);
  if (std::none_of(refs.begin(), refs.end(), [](const Reference& r) { return r.has_value; }))
    throw UserError(file.string() + ": no reference has a value to check (abs_threshold alone is for results compare --reference)");
  return refs;
}

bool reference_covers(const Reference& ref, const std::string& role, const std::string& metric,
                      const std::vector<std::pair<std::string, std::string>>& parameters) {
  if (metric != ref.metric || (!ref.role.empty() && role != ref.role)) return false;
  return std::all_of(ref.parameters.begin(), ref.parameters.end(), [&](auto& p) {
    return std::any_of(parameters.begin(), parameters.end(), [&](auto& q) {
      if (q.first != p.first) return false;
      auto a = parse_double(q.second), b = parse_double(p.second);
      return q.second == p.second || (a && b && *a == *b);
    });
  });
}

std::vector<ReferenceResult> check_references(const fs::path& exp_dir, const std::vector<Reference>& refs) {
  const ExperimentStats stats = load_experiment_stats(exp_dir);
  std::vector<ReferenceResult> out;
  for (auto& ref : refs) {
    if (!ref.has_value) continue;  // compare's threshold alone: nothing to hold
    ReferenceResult res;
    res.ref = &ref;
    std::vector<double> per_run;
    std::string other_unit;
    for (auto& m : stats.stats) {
      if (!m.summary.count || !reference_covers(ref, m.role, m.metric, m.parameters)) continue;
      if (m.unit != ref.unit) {
        other_unit = m.unit;
        continue;
      }
      per_run.push_back(statistic_of(m.summary, ref.statistic));
    }
    res.runs = per_run.size();
    if (per_run.empty()) {
      res.why = other_unit.empty() ? "no run matches" : "the runs record it in " + other_unit + ", the reference in " + ref.unit;
    } else {
      res.measured = summarize_runs(per_run).median;
      const double lo = ref.value + std::fabs(ref.value) * ref.lower, hi = ref.value + std::fabs(ref.value) * ref.upper;
      res.pass = res.measured >= lo && res.measured <= hi;
    }
    out.push_back(res);
  }
  return out;
}

void print_reference_results(const std::vector<ReferenceResult>& results, std::ostream& out) {
  size_t failed = 0;
  char line[256];
  for (auto& r : results) {
    const Reference& ref = *r.ref;
    std::string point;
    for (auto& [k, v] : ref.parameters) point += (point.empty() ? "" : " ") + k + "=" + v;
    if (!r.pass) ++failed;
    if (!r.why.empty()) {
      out << "FAIL  " << printable((ref.role.empty() ? "" : ref.role + ":") + ref.metric) << " " << printable(point) << ": " << r.why
          << " (" << ref.origin << ")\n";
      continue;
    }
    std::snprintf(line, sizeof line, "%s  %s %s: %.6g %s (reference %.6g, %+.1f%% .. %+.1f%%; %s of %zu run(s))", r.pass ? "pass" : "FAIL",
                  printable((ref.role.empty() ? "" : ref.role + ":") + ref.metric).c_str(), printable(point).c_str(), r.measured,
                  printable(ref.unit).c_str(), ref.value, ref.lower * 100, ref.upper * 100, ref.statistic.c_str(), r.runs);
    out << line << (r.pass ? "" : "  " + ref.origin) << "\n";
  }
  out << results.size() << " reference(s): " << results.size() - failed << " pass, " << failed << " fail\n";
}

// A resource figure small enough that the kernel's counting steps make its percent noise: CPU time is charged in
// scheduler ticks (up to 4 ms each), storage in pages; held to a percent only from 100 ms and from 1 MiB.
static bool below_counting_floor(const std::string& metric, double v) {
  if (metric == "resource.user_cpu" || metric == "resource.system_cpu") return v < 0.1;
  if (metric == "resource.read_bytes" || metric == "resource.write_bytes") return v < 1048576;
  return false;
}

void write_references(const fs::path& exp_dir, const fs::path& file, double tolerance) {
  const ExperimentStats stats = load_experiment_stats(exp_dir);
  // Per (role, metric, unit) the runs of each point; a point is named by the parameters that vary (the rest hold
  // one value everywhere and would only make the file long).
  std::map<std::string, std::vector<const MetricStats*>> points;
  std::vector<std::string> order;
  for (auto& m : stats.stats) {
    if (!m.summary.count) continue;
    std::string key = m.role + "\n" + m.metric + "\n" + m.unit;
    for (auto& [k, v] : m.parameters)
      if (std::count(stats.varied.begin(), stats.varied.end(), k)) key += "\n" + k + "=" + v;
    if (points[key].empty()) order.push_back(key);
    points[key].push_back(&m);
  }
  auto quoted = [](const std::string& text) {
    std::ostringstream o;
    o << toml::value<std::string>(text);
    return o.str();
  };
  auto number = [](double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    std::string t = buf;
    return t.find_first_of(".eEn") == std::string::npos ? t + ".0" : t;  // a TOML float
  };
  std::ostringstream out;
  out << "# References from " << exp_dir.string() << ": each figure's median across its runs (of each run's median), +-"
      << tolerance * 100 << " %.\n# Setup costs its plugin declared (rendezvous, database start) are left out: they vary more than a figure."
         "\n# Of what a run cost (resource.*), so are the informational ones (better = none: context switches, faults), medians\n"
         "# of 0 (a percent of 0 holds nothing: bytes read from a warm page cache), CPU times under 100 ms and storage bytes\n"
         "# under 1 MiB (the kernel counts them in ticks and pages).\n";
  size_t written = 0;
  for (auto& key : order) {
    const auto& runs = points[key];
    if (declared_setup_cost(runs)) continue;
    std::vector<double> medians;
    for (auto* m : runs) medians.push_back(m->summary.median);
    const double v = summarize_runs(medians).median;
    if (is_resource_metric(runs.front()->metric) && (v == 0 || runs.front()->better == "none" || below_counting_floor(runs.front()->metric, v)))
      continue;
    std::string params;
    for (auto& [k, val] : runs.front()->parameters)
      if (std::count(stats.varied.begin(), stats.varied.end(), k)) params += (params.empty() ? "" : ", ") + quoted(k) + " = " + quoted(val);
    out << "\n[[reference]]\nrole = " << quoted(runs.front()->role) << "\nmetric = " << quoted(runs.front()->metric)
        << (params.empty() ? "" : "\nparameters = { " + params + " }") << "\nstatistic = \"median\"\nvalue = " << number(v)
        << "\nunit = " << quoted(runs.front()->unit) << "\nlower = " << number(-tolerance) << "\nupper = " << number(tolerance) << "\n";
    ++written;
  }
  // A file of comments only would be refused by the check that reads it: nothing is written, and the user is told why.
  if (written == 0)
    throw UserError("--write-reference: " + exp_dir.string() + " has no figure to hold to a reference (" +
                    (stats.stats.empty() ? std::string("no completed run with samples") : "only setup costs its plugin declared, and resource figures too small or informational to hold") +
                    "); " + file.string() + " was not written");
  write_file_atomic(file, out.str(), 0644);
}

}  // namespace fanout
