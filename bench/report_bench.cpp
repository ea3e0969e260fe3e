// How long the report of a large sweep takes (issue 51): RUNS completed runs (default 10,000) of 100 permutations
// (10 sizes x 10 node counts, repeated), 8 samples each of a figure that grows as size * log2(size) / nodes, written as
// fanout-rank writes them and ingested (timed apart), then `process_scaling_results` timed: statistics, CSVs, the
// scaling models of every figure and parameter, csv/scaling.csv, every plot through gnuplot, report.html.
// Goal (bench/goals.txt): the report of 10,000 runs in under 10 s on this machine.
//   report_bench [runs]
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "bench/figures.h"
#include "bench/generated_run.h"
#include "results/processing.h"
#include "results/sample_file.h"
#include "results/store.h"

namespace fs = std::filesystem;
using namespace fanout;

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 10000;
  if (runs < 100) {
    std::fprintf(stderr, "usage: report_bench [runs >= 100]\n");
    return 2;
  }
  const fs::path root = fs::temp_directory_path() / ("fanout-report-bench-" + std::to_string(getpid()));
  fs::create_directories(root);
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> noise(0, 0.02);
  std::vector<fs::path> dirs;
  for (int r = 0; r < runs; ++r) {
    const int size = 1 << (4 + r % 10), nodes = 1 << ((r / 10) % 10);
    const fs::path dir = root / "run" / ("r" + std::to_string(r));
    bench::write_completed_run(dir, "bench", r, {{"size", std::to_string(size)}, {"nodes", std::to_string(nodes)}});
    SampleWriter w(samples_dir(dir) / "client.0.samples", 0, "client", "n1", 0, 0);
    for (int i = 0; i < 8; ++i)
      w.record("t", "s", i, int64_t(i) * 1000, 1e-6 * size * std::log2(double(size)) / nodes * noise(rng) + 1e-4, false);
    dirs.push_back(dir);
  }
  auto t0 = std::chrono::steady_clock::now();
  {
    ResultsDb db(root / "fanout.sqlite");
    db.ingest_runs(dirs, [](const fs::path&, const IngestReport&) {});
  }
  const double ingest_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  t0 = std::chrono::steady_clock::now();
  ProcessOptions opts;
  const ProcessReport report = process_scaling_results(root, opts);
  const double report_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%d runs (100 permutations x %d), 8 samples each: ingest %.2f s; process_scaling_results %.2f s (", runs, runs / 100, ingest_s,
              report_s);
  for (size_t i = 0; i < report.phase_s.size(); ++i)
    std::printf("%s%s %.2f s", i ? ", " : "", report.phase_s[i].first.c_str(), report.phase_s[i].second);
  std::printf("); %zu files, %zu warnings\n", report.files.size(), report.warnings.size());
  for (auto& w : report.warnings) std::printf("  warning: %s\n", w.c_str());
  bench::figure("report_s." + std::to_string(runs), report_s, "s");
  bench::figure("ingest_s." + std::to_string(runs), ingest_s, "s");
  std::error_code ec;
  fs::remove_all(root, ec);
  return 0;
}
