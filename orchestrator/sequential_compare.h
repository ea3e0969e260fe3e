// `fanout results compare A B --until-decided`: a CI job's gate. The two experiments' own saved commands
// (command.toml) are run again with more repeats, both sides in turn, until every figure is decided (beyond the
// thresholds and significant, or shown within them) or --max_repeat runs a side. The looks come on a fixed schedule
// (5, 7, 10, 14, 20, 28, 40, ... runs a side, and the last at max_repeat), and alpha is spent evenly over them
// (alpha / looks at each: the chance of any false regression over all looks stays at most alpha, by the union
// bound); bench/sequential_alpha checks it by simulation.
#pragma once
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <vector>

#include "results/compare.h"

namespace fanout {

// Runs a side a look is taken at: from `first` (at least 5) growing by about 1.4x, ending at max_repeat.
std::vector<int> look_schedule(int first, int max_repeat);

// `more(exp_dir, runs)`: brings the experiment to `runs` repeats of each permutation (its saved command with
// --repeat=runs --resume); returns its exit status. The report is the last look's, with figures neither beyond nor
// within the threshold at max_repeat marked undecided; opts.alpha is the per-look alpha it was judged at.
ComparisonReport compare_until_decided(const std::filesystem::path& a, const std::filesystem::path& b, CompareOptions& opts,
                                       int max_repeat, const std::function<int(const std::filesystem::path&, int)>& more,
                                       std::ostream& progress);

}  // namespace fanout
