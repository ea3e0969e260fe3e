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
#include "bench/generated_run.h"
#include "common/parallel.h"
#include "results/history_report.h"
#include "results/lab_store.h"
#include "results/sample_file.h"
#include "results/store.h"

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
        f.parameters = ParameterList{{"n", "1024"}};
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
  opts.parallel = false;  // one level of threads, as the command
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
  // The lab's dashboard of the same (history report --lab): a page per benchmark, every plot drawn by gnuplot.
  std::vector<std::pair<std::string, HistoryChanges>> all;
  for (int b = 0; b < benchmarks; ++b) all.emplace_back("bench" + std::to_string(b), analysed[size_t(b)]);
  const auto t1 = std::chrono::steady_clock::now();
  const HistoryReport site = write_lab_report(all, lab, dir / "site");
  const double dashboard_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  if (!site.warnings.empty()) std::fprintf(stderr, "history_bench: %zu plot(s) not drawn, first: %s\n", site.warnings.size(), site.warnings[0].c_str());
  // `history add` of one experiment of 1,000,000 samples (10 runs x 4 ranks, two metrics): its folder read (the
  // statistics of every figure) and recorded in the lab. The experiment is made and ingested first, untimed.
  const std::filesystem::path exp = dir / "experiment";
  std::vector<std::filesystem::path> runs;
  std::lognormal_distribution<double> latency(-7.0, 0.3);
  for (int r = 0; r < 10; ++r) {
    const std::filesystem::path run = exp / ("run-" + std::to_string(r));
    bench::write_completed_run(run, "bench", r, {{"client_nodes", std::to_string(1 << (r % 4))}});
    for (int k = 0; k < 4; ++k) {
      SampleWriter w(samples_dir(run) / ("client." + std::to_string(k) + ".samples"), k, "client", "n1", 0, 0);
      for (int i = 0; i < 25000; ++i) w.record(i % 2 ? "unpack_tensor" : "put_tensor", "s", i / 2, int64_t(i) * 1000, latency(rng), false);
    }
    runs.push_back(run);
  }
  {
    ResultsDb db(exp / "fanout.sqlite");
    db.ingest_runs(runs, [](const std::filesystem::path&, const IngestReport&) {});
  }
  const auto t2 = std::chrono::steady_clock::now();
  uint64_t added_samples = 0;
  {
    LabStore lab_store(lab, false);
    const HistoryInput input = history_input(exp);
    for (auto& f : input.figures) added_samples += f.samples;
    lab_store.add({input});
  }
  if (added_samples != 1000000) {
    std::fprintf(stderr, "history_bench: the experiment's figures hold %llu samples, not 1,000,000\n", (unsigned long long)added_samples);
    return 1;
  }
  const double add_experiment_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t2).count();
  std::filesystem::remove_all(dir);
  const std::string tag = std::to_string(benchmarks) + "x" + std::to_string(points);
  std::printf("lab of %d benchmarks x %d revisions (SQLite): add %.2f s; change points of every benchmark read back %.2f s "
              "(%.1f ms each, %u cores); steps found where put %d of %d, changes elsewhere %d, benchmarks exactly right %d of %d; dashboard %.2f s; history add of an experiment of 1,000,000 samples %.2f s\n",
              benchmarks, points, add_s, changes_s, changes_s / benchmarks * 1e3, std::thread::hardware_concurrency(), found_steps, steps,
              false_changes, right, benchmarks, dashboard_s, add_experiment_s);
  bench::figure("lab_add_s." + tag, add_s, "s");
  bench::figure("changes_s." + tag, changes_s, "s");
  bench::figure("changes_right_fraction", double(right) / benchmarks, "fraction");
  bench::figure("dashboard_s." + tag, dashboard_s, "s");
  bench::figure("add_experiment_s.1M", add_experiment_s, "s");
  return 0;
}
