// What `fanout history changes --lab` costs at a team's scale (issue 55): B benchmarks of P revisions each in a lab
// store (SQLite), one figure a benchmark; half of them step +10 % at a revision of their own, the rest are noise
// (lognormal, sigma 1 %, fixed seed). Times the store's add (one transaction per benchmark) and the change points of
// every benchmark read back from it (load + E-Divisive with 100 permutations, as the command does); checks that the
// steps are found where they were put and nowhere else. Goal (bench/goals.txt): 1,000 x 365 in under 10 s.
//   history_bench [benchmarks [points]]    default 1000 365
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include "bench/figures.h"
#include "common/parallel.h"
#include "results/lab_store.h"

using namespace fanout;

int main(int argc, char** argv) {
  const int benchmarks = argc > 1 ? std::atoi(argv[1]) : 1000, points = argc > 2 ? std::atoi(argv[2]) : 365;
  if (benchmarks < 1 || points < 10) {
    std::fprintf(stderr, "usage: history_bench [benchmarks >= 1 [points >= 10]]\n");
    return 2;
  }
  char tmpl[] = "/tmp/history-bench-XXXXXX";
  const std::filesystem::path dir = ::mkdtemp(tmpl);
  const std::string lab = (dir / "lab.sqlite").string();
  std::mt19937_64 rng(55);
  std::lognormal_distribution<double> noise(0, 0.01);
  auto step_of = [&](int b) { return b % 2 ? -1 : points / 4 + b % (points / 2); };  // where benchmark b steps, or -1
  double add_s = 0;
  {
    LabStore store(lab, true);
    for (int b = 0; b < benchmarks; ++b) {
      std::vector<HistoryInput> series(static_cast<size_t>(points));
      for (int i = 0; i < points; ++i) {
        HistoryInput& h = series[size_t(i)];
        h.name = "bench" + std::to_string(b);
        h.machine = "bench";
        h.point.dir = "/bench/" + h.name + "/" + std::to_string(i);
        h.point.revision = "r" + std::to_string(i);
        h.start = 1.8e9 + 86400.0 * i;
        AcrossRuns f;
        f.role = "run", f.metric = "t", f.unit = "ms", f.better = "lower";
        f.parameters = {{"n", "1024"}};
        f.runs.runs = 3;
        f.runs.median = 100 * (step_of(b) >= 0 && i >= step_of(b) ? 1.1 : 1.0) * noise(rng);
        f.runs.low = f.runs.median * 0.99, f.runs.high = f.runs.median * 1.01;
        f.samples = 3;
        h.figures.push_back(f);
      }
      const auto t0 = std::chrono::steady_clock::now();
      store.add(series);
      add_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  LabStore store(lab, false);
  int right = 0, steps = 0, found_steps = 0, false_changes = 0;
  HistoryOptions opts;
  // As `history changes --lab` does it: each benchmark read in turn, their change points over the cores.
  std::vector<std::vector<HistoryInput>> loaded;
  for (int b = 0; b < benchmarks; ++b) loaded.push_back(store.load("bench" + std::to_string(b)));
  std::vector<HistoryChanges> analysed(loaded.size());
  parallel_for(loaded.size(), [&](size_t b) { analysed[b] = history_changes(std::move(loaded[b]), opts); });
  for (int b = 0; b < benchmarks; ++b) {
    const HistoryChanges& h = analysed[size_t(b)];
    bool ok = h.changes.size() == (step_of(b) >= 0 ? 1u : 0u);
    if (step_of(b) >= 0) {
      ++steps;
      const bool at = !h.changes.empty() && h.changes[0].after == "r" + std::to_string(step_of(b));
      found_steps += at;
      ok = ok && at;
      false_changes += int(h.changes.size()) - (at ? 1 : 0);
    } else {
      false_changes += int(h.changes.size());
    }
    right += ok;
  }
  const double changes_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::filesystem::remove_all(dir);
  const std::string tag = std::to_string(benchmarks) + "x" + std::to_string(points);
  std::printf("lab of %d benchmarks x %d revisions (SQLite): add %.2f s; change points of every benchmark read back %.2f s "
              "(%.1f ms each, %u cores); steps found where put %d of %d, changes elsewhere %d, benchmarks exactly right %d of %d\n",
              benchmarks, points, add_s, changes_s, changes_s / benchmarks * 1e3, std::thread::hardware_concurrency(), found_steps, steps,
              false_changes, right, benchmarks);
  bench::figure("lab_add_s." + tag, add_s, "s");
  bench::figure("changes_s." + tag, changes_s, "s");
  bench::figure("changes_right_fraction", double(right) / benchmarks, "fraction");
  return 0;
}
