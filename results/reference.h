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
};

struct ReferenceResult {
  const Reference* ref = nullptr;  // into the vector check_references was given: keep it alive
  bool pass = false;
  double measured = 0;
  size_t runs = 0;
  std::string why;  // for a failure without a figure: no run matched, the unit differs
};

// Throws UserError naming the file and line.
std::vector<Reference> read_references(const std::filesystem::path& file);
std::vector<ReferenceResult> check_references(const std::filesystem::path& exp_dir, const std::vector<Reference>& refs);
void print_reference_results(const std::vector<ReferenceResult>& results, std::ostream& out);
// One reference per (permutation, role, metric) of the experiment: its median across runs, +-tolerance. Written
// aside and renamed.
void write_references(const std::filesystem::path& exp_dir, const std::filesystem::path& file, double tolerance);

}  // namespace fanout
