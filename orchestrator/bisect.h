// fanout history bisect (issue 55): the first revision between a good and a bad one at which an experiment got
// slower, found as git bisect finds a bug: the experiment is built ([build]) and run at a revision halfway between
// the last known good and the first known bad, and the compare gate (results compare, its threshold and its test)
// says which side it falls on.
#pragma once
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

namespace fanout {

struct BisectOptions {
  std::string good, bad;              // revisions of `source` (anything git rev-parse takes)
  std::filesystem::path source, file; // the git working tree under test; the experiment file that builds and runs it
  std::filesystem::path out;          // where each revision's experiment goes (default: bisect-<good>-<bad>)
  int repeat = 10;                    // runs of each revision (the same on both sides of every comparison)
  double threshold_pct = 5;           // compare's --threshold
  std::vector<std::string> metrics;   // compare only these figures (all when empty)
};

// The revisions are checked out in `source` one at a time (its tree must be clean, as git bisect asks) and it is
// put back where it was at the end, whatever happens. The good revision is measured first, as the baseline of
// every comparison; the bad one is taken as given (as git bisect takes it), so N candidates cost 1 + ceil(log2 N)
// builds. Returns the exit status: 0 when a first bad revision is named; 2 when a revision does not build or run,
// or the input is wrong; 3 when the gate stays undecided at a revision (more runs: --repeat).
int history_bisect(const BisectOptions& opts, const std::filesystem::path& fanout_exe, std::ostream& out);

}  // namespace fanout
