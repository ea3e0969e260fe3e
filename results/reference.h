// Reference values, as ReFrame's performance references: per experiment, parameter point and metric a value
// with relative tolerances (lower <= 0 <= upper, fractions: -0.05 is 5 % below) and the statistic compared.
// `fanout results check DIR --reference=ref.toml` prints pass or fail per figure (exit 1 on any failure);
// `--write-reference` writes one from a result; a sweep's --reference checks it at its end.
//
//   [[reference]]
//   metric = "sleep"                 # required
//   role = "sleep"                   # optional: any role
//   parameters = { sleep_us = 2000 } # optional: the runs whose parameters include these
//   statistic = "median"             # median (default), mean, min, max, p90, p95, p99: of each run's samples,
//                                    # then the median across the matching runs (their --repeat runs)
//   value = 0.00212
//   unit = "s"                       # required: a figure in another unit fails rather than being compared
//   lower = -0.05
//   upper = 0.10
//   abs_threshold = 0.0001           # optional, in unit: for `results compare --reference`, a change of this
//                                    # figure smaller than this is no change (the only size a change from 0 has)
//
// A table with abs_threshold may leave out value, lower and upper: it then sets compare's threshold only, and
// `results check` has nothing to hold it to.
#pragma once
#include <filesystem>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

namespace fanout {

struct Reference {
  std::string origin;  // "ref.toml:12"
  std::string role, metric, statistic = "median", unit;
  std::vector<std::pair<std::string, std::string>> parameters;
  double value = 0, lower = 0, upper = 0;
  bool has_value = false;         // a table of abs_threshold alone has none: nothing for `results check`
  double abs_threshold = -1;      // < 0: none given
};

// The reference speaks of this figure: its metric, its role when it names one, every parameter it names with the
// same value (numbers compared as numbers: 2000 and 2000.0 are one point).
bool reference_covers(const Reference& ref, const std::string& role, const std::string& metric,
                      const std::vector<std::pair<std::string, std::string>>& parameters);

struct ReferenceResult {
  const Reference* ref = nullptr;  // into the vector check_references was given: keep it alive
  bool pass = false;
  double measured = 0;
  size_t runs = 0;
  std::string why;  // for a failure without a figure: no run matched, the unit differs
};

// Throws UserError naming the file and line.
std::vector<Reference> read_references(const std::filesystem::path& file);
// The same, for `results check` and a sweep's --reference: a file whose tables all lack a value is refused.
std::vector<Reference> read_references_to_check(const std::filesystem::path& file);
std::vector<ReferenceResult> check_references(const std::filesystem::path& exp_dir, const std::vector<Reference>& refs);
void print_reference_results(const std::vector<ReferenceResult>& results, std::ostream& out);
// One reference per (permutation, role, metric) of the experiment: its median across runs, +-tolerance. Written
// aside and renamed.
void write_references(const std::filesystem::path& exp_dir, const std::filesystem::path& file, double tolerance);

}  // namespace fanout
