// Does `fanout results compare --until-decided` hold alpha? It looks at the data several times (5, 7, 10, ... runs
// a side) and stops at the first look that decides, so a plain test at alpha at every look would call a regression
// by chance far more often than alpha. This simulates the gate exactly as compare runs it (measure_row, judge_row,
// decided, look_schedule: the same code) on run medians drawn from one distribution for both sides (no change:
// every "regression" is false) and with a planted slowdown (power), with fixed seeds.
//   sequential_alpha [pairs] [max_repeat] [cv]     default 2000 pairs, 30, run-to-run spread 0.10 (copy-like)
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "bench/figures.h"
#include "orchestrator/sequential_compare.h"
#include "results/compare.h"

using namespace fanout;

namespace {

struct Outcome {
  int regressions = 0, decided = 0;
  double runs = 0;
};

// One pair of experiments under the gate: run medians lognormal around 1 (A) and 1 + shift (B).
// sequential: looks on compare's schedule; spend: alpha split over them (compare's rule) or the full alpha at each.
Outcome simulate(int pairs, int max_repeat, double cv, double shift, bool sequential, uint64_t seed, bool spend = true) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> noise(0, cv);
  Outcome out;
  const std::vector<int> looks = sequential ? look_schedule(5, max_repeat) : std::vector<int>{5};
  CompareOptions opts;
  opts.alpha = spend ? 0.05 / double(looks.size()) : 0.05;
  for (int p = 0; p < pairs; ++p) {
    std::vector<double> a, b;
    ComparisonRow row;
    row.better = "lower";
    for (int n : looks) {
      while (int(a.size()) < n) a.push_back(noise(rng)), b.push_back((1 + shift) * noise(rng));
      measure_row(row, a, b, opts);
      if (row.verdict.empty()) judge_row(row, 0, opts);
      if (decided(row)) break;
    }
    out.regressions += row.verdict == "regression";
    out.decided += decided(row);
    out.runs += double(a.size());
  }
  out.runs /= pairs;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int pairs = argc > 1 ? std::atoi(argv[1]) : 2000;
  const int max_repeat = argc > 2 ? std::atoi(argv[2]) : 30;
  const double cv = argc > 3 ? std::atof(argv[3]) : 0.10;
  if (pairs < 1 || max_repeat < 5 || !(cv > 0)) {
    std::fprintf(stderr, "usage: sequential_alpha [pairs >= 1] [max_repeat >= 5] [cv > 0]\n");
    return 2;
  }
  std::printf("%d simulated pairs, run medians lognormal with sigma %.2f, threshold 5 %%, alpha 0.05\n", pairs, cv);
  std::printf("%-34s %16s %10s %14s\n", "design", "false regressions", "decided", "runs a side");
  const Outcome fixed0 = simulate(pairs, max_repeat, cv, 0, false, 1), seq0 = simulate(pairs, max_repeat, cv, 0, true, 1);
  const Outcome fixed10 = simulate(pairs, max_repeat, cv, 0.10, false, 2), seq10 = simulate(pairs, max_repeat, cv, 0.10, true, 2);
  std::printf("%-34s %16.4f %10.3f %14.1f\n", "--repeat=5, no change", double(fixed0.regressions) / pairs, double(fixed0.decided) / pairs, fixed0.runs);
  std::printf("%-34s %16.4f %10.3f %14.1f\n", "--until-decided, no change", double(seq0.regressions) / pairs, double(seq0.decided) / pairs, seq0.runs);
  std::printf("%-34s %16s %10s %14s\n", "", "found", "decided", "runs a side");
  std::printf("%-34s %16.4f %10.3f %14.1f\n", "--repeat=5, +10 % planted", double(fixed10.regressions) / pairs, double(fixed10.decided) / pairs, fixed10.runs);
  std::printf("%-34s %16.4f %10.3f %14.1f\n", "--until-decided, +10 % planted", double(seq10.regressions) / pairs, double(seq10.decided) / pairs, seq10.runs);
  bench::figure("false_regressions_sequential", double(seq0.regressions) / pairs, "fraction");
  bench::figure("detected_10pct_sequential", double(seq10.regressions) / pairs, "fraction");
  bench::figure("runs_per_side_sequential_10pct", seq10.runs, "runs");
  // Unspent: the full alpha at every look, what the spending rule is there to prevent.
  const Outcome naive = simulate(pairs, max_repeat, cv, 0, true, 1, false);
  std::printf("%-34s %16.4f %10.3f %14.1f   (what spending prevents)\n", "looks at full alpha, no change", double(naive.regressions) / pairs,
              double(naive.decided) / pairs, naive.runs);
  bench::figure("false_regressions_unspent", double(naive.regressions) / pairs, "fraction");
  return 0;
}
