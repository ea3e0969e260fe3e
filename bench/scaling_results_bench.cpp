// process_scaling_results on a SmartSim-Scaling results tree of the size a real sweep leaves: S sessions x R ranks
// (default 48 x 128) of throughput timings, I put/unpack iterations per rank (default 100: 1.25 M timing lines).
// The tree is written by fanout's own SmartSim-Scaling export (results/smartsim_export.h: run.cfg through
// configparser's layout, rank_<r>_timing.csv as the C++ clients print them) from a generated experiment; that is
// not timed. Timed: `process_scaling_results` (import into fanout.sqlite, statistics, CSV, plots, HTML report),
// against a baseline in the same invocation: reading every timing file and parsing each line's number, which any
// tool must do at least.  Prints a table.   Usage: scaling_results_bench [sessions] [ranks] [iterations]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "bench/figures.h"
#include "bench/generated_run.h"
#include "common/files.h"
#include "results/processing.h"
#include "results/run_folder.h"
#include "results/sample_file.h"
#include "results/smartsim_export.h"
#include "results/store.h"

namespace fs = std::filesystem;
using namespace fanout;
using Clock = std::chrono::steady_clock;

static double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// One throughput session as fanout's smartsim plugin records it: per rank client(), then put_tensor and
// unpack_tensor per iteration, loop_time and main().
static void write_session(const fs::path& dir, int session, int ranks, int iterations, std::mt19937_64& rng) {
  std::lognormal_distribution<double> latency(-9.0, 0.4);
  bench::write_completed_run(dir, "smartsim", session,
                             {{"client_nodes", std::to_string(1 << (session % 6))}, {"clients_per_node", std::to_string(ranks >> (session % 6))},
                              {"db_nodes", std::to_string(1 << (session / 6 % 4))}, {"db_cpus", "8"}, {"iterations", std::to_string(iterations)},
                              {"tensor_bytes", std::to_string(1024 << (session / 24 % 2 * 10))}, {"languages", "cpp"}});
  const int64_t t0 = int64_t(1.7e18);
  for (int r = 0; r < ranks; ++r) {
    SampleWriter w(samples_dir(dir) / ("client." + std::to_string(r) + ".samples"), r, "client", "n1", 0, t0);
    int64_t t = 0;
    auto rec = [&](const char* name, double s) {
      w.record(name, "s", 0, t, s, false);
      t += int64_t(s * 1e9);
    };
    rec("client()", 0.05);
    for (int i = 0; i < iterations; ++i) {
      rec("put_tensor", latency(rng));
      rec("unpack_tensor", latency(rng));
    }
    rec("loop_time", 0.2);
    rec("main()", 0.3);
  }
}

int main(int argc, char** argv) {
  const int sessions = argc > 1 ? std::atoi(argv[1]) : 48;
  const int ranks = argc > 2 ? std::atoi(argv[2]) : 128;
  const int iterations = argc > 3 ? std::atoi(argv[3]) : 100;
  if (sessions < 1 || ranks < 1 || iterations < 1) {
    std::fprintf(stderr, "usage: scaling_results_bench [sessions >= 1] [ranks >= 1] [iterations >= 1]\n");
    return 2;
  }
  const fs::path root = fs::temp_directory_path() / ("fanout-scaling-results-bench-" + std::to_string(getpid()));
  const fs::path generated = root / "generated", tree = root / "throughput-standard-scaling";
  std::mt19937_64 rng(1);
  fs::create_directories(generated);
  {
    ResultsDb db(generated / "fanout.sqlite");
    for (int s = 0; s < sessions; ++s) {
      const fs::path dir = generated / ("session-" + std::to_string(s));
      write_session(dir, s, ranks, iterations, rng);
      db.ingest_run(dir);
    }
    export_smartsim_layout(db, tree);
  }
  fs::remove_all(generated);

  // Baseline: read every rank file and parse the number on each line.
  auto t = Clock::now();
  uint64_t lines = 0, files = 0;
  double checksum = 0;
  for (auto& e : fs::recursive_directory_iterator(tree)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("rank_", 0) != 0) continue;
    ++files;
    const std::string text = read_file(e.path());
    for (size_t at = 0; at < text.size();) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      const size_t comma = text.rfind(',', end);
      if (comma != std::string::npos && comma > at) checksum += std::strtod(text.c_str() + comma + 1, nullptr), ++lines;
      at = end + 1;
    }
  }
  const double decode_s = since(t);

  t = Clock::now();
  ProcessReport report = process_scaling_results(tree, ProcessOptions{});
  const double process_s = since(t);
  const size_t outputs = report.files.size();
  fs::remove_all(root);
  if (report.imported_runs != sessions || !report.unreadable.empty()) {
    std::fprintf(stderr, "scaling_results_bench: imported %d of %d sessions (%zu unreadable)\n", report.imported_runs, sessions,
                 report.unreadable.size());
    return 1;
  }

  std::printf("SmartSim-Scaling tree: %d sessions x %d ranks, %llu timing lines in %llu files (checksum %.3g)\n", sessions, ranks,
              (unsigned long long)lines, (unsigned long long)files, checksum);
  std::printf("%-44s %10s %14s\n", "phase", "seconds", "lines/s");
  std::printf("%-44s %10.2f %14.0f\n", "process_scaling_results (import..report)", process_s, lines / process_s);
  for (auto& [phase, seconds] : report.phase_s) std::printf("  %-42s %10.2f\n", phase.c_str(), seconds);
  std::printf("%-44s %10.2f %14.0f   (process = %.1fx this)\n", "baseline: read and parse the timing files", decode_s,
              lines / decode_s, process_s / decode_s);
  std::printf("%zu output files\n", outputs);
  bench::figure("timing_lines", double(lines), "count");
  bench::figure("process_s", process_s, "s");
  bench::figure("decode_s", decode_s, "s");
  bench::figure("process_vs_decode", process_s / decode_s, "x");
  for (auto& [phase, seconds] : report.phase_s) bench::figure(phase + "_s", seconds, "s");
  return 0;
}
