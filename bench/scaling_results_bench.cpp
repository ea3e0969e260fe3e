// process_scaling_results on a SmartSim-Scaling results tree of the size a real sweep leaves: S sessions x R ranks
// (default 48 x 128) of throughput timings, I put/unpack iterations per rank (default 100: 1.25 M timing lines).
// The tree is written as SmartSim-Scaling itself writes one (read from its sources: utils.py
// create_experiment_and_dir and write_run_config, driverthroughput/main.py's session names, cpp-throughput's
// timing lines), not by fanout's exporter: results/<exp>/run-<date>-<time>/ with scaling-<date>.log, the
// Orchestrator's database/ folder, and one folder per session named throughput-sess-<language>-N-T-DBN-DBCPU-ITER-
// TB-<uuid4[:4]> holding configparser's run.cfg, the model's .out/.err and rank_<r>_timing.csv ("rank,function,
// seconds" as std::ostream prints a double: 6 significant digits), languages mixed (cpp, c, fortran sessions).
// Writing the tree is not timed. Timed: `process_scaling_results` (import into fanout.sqlite, statistics, CSV,
// plots, HTML report), against a baseline in the same invocation: reading every timing file and parsing each
// line's number, which any tool must do at least.  Prints a table.
//   Usage: scaling_results_bench [sessions] [ranks] [iterations]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "bench/figures.h"
#include "common/files.h"
#include "results/processing.h"

namespace fs = std::filesystem;
using namespace fanout;
using Clock = std::chrono::steady_clock;

static double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A double as `std::ostream << double` prints it (precision 6, %g), which is how the C++ client writes times.
static std::string ostream_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// configparser.write: "[section]", "key = value" lines, a blank line after each section.
static std::string run_cfg(const std::vector<std::pair<std::string, std::string>>& run,
                           const std::vector<std::pair<std::string, std::string>>& attributes) {
  std::string s = "[run]\n";
  for (auto& [k, v] : run) s += k + " = " + v + "\n";
  s += "\n[attributes]\n";
  for (auto& [k, v] : attributes) s += k + " = " + v + "\n";
  return s + "\n";
}

// One throughput session as driverthroughput/main.py creates it and cpp-throughput's ranks fill it.
static void write_session(const fs::path& run_dir, int session, int ranks, int iterations, std::mt19937_64& rng) {
  static const char* const kLanguages[] = {"cpp", "c", "fortran"};
  const std::string language = kLanguages[session % 3];
  const int nodes = 1 << (session % 6), tasks = std::max(1, ranks >> (session % 6)), db_nodes = 1 << (session / 6 % 4), db_cpus = 8;
  const int bytes = 1024 << (session / 24 % 2 * 10);
  char uuid[8];
  std::snprintf(uuid, sizeof uuid, "%04x", unsigned(rng() & 0xffff));
  const std::string name = "throughput-sess-" + language + "-N" + std::to_string(nodes) + "-T" + std::to_string(tasks) + "-DBN" +
                           std::to_string(db_nodes) + "-DBCPU" + std::to_string(db_cpus) + "-ITER" + std::to_string(iterations) + "-TB" +
                           std::to_string(bytes) + "-" + uuid;
  const fs::path dir = run_dir / name;
  fs::create_directories(dir);
  write_file_atomic(dir / "run.cfg",
                    run_cfg({{"name", name}, {"path", dir.string()}, {"smartsim_version", "0.4.2"}, {"smartredis_version", "0.3.1"},
                             {"db", "redis-server"}, {"date", "2026-11-27"}, {"language", language}},
                            {{"colocated", "0"}, {"client_total", std::to_string(tasks * nodes)}, {"client_per_node", std::to_string(tasks)},
                             {"client_nodes", std::to_string(nodes)}, {"database_nodes", std::to_string(db_nodes)},
                             {"database_cpus", std::to_string(db_cpus)}, {"iterations", std::to_string(iterations)},
                             {"tensor_bytes", std::to_string(bytes)}, {"language", language}}));
  write_file_atomic(dir / (name + ".out"), "Finished throughput test.\n");
  write_file_atomic(dir / (name + ".err"), "");
  std::lognormal_distribution<double> latency(-9.0, 0.4);
  for (int r = 0; r < ranks; ++r) {
    std::string t;
    t.reserve(size_t(iterations) * 48 + 128);
    auto line = [&](const char* function, double seconds) { t += std::to_string(r) + "," + function + "," + ostream_double(seconds) + "\n"; };
    line("client()", 0.05);
    for (int i = 0; i < iterations; ++i) {
      line("put_tensor", latency(rng));
      line("unpack_tensor", latency(rng));
    }
    line("loop_time", 0.2);
    line("main()", 0.3);
    write_file_atomic(dir / ("rank_" + std::to_string(r) + "_timing.csv"), t);
  }
}

// The experiment folder SmartSim's Experiment and Orchestrator leave beside the sessions.
static void write_experiment_files(const fs::path& run_dir) {
  write_file_atomic(run_dir / "scaling-2026-11-27.log", "12:00:00 vm SmartSim[1] INFO Running with database backend: redis-server\n");
  fs::create_directories(run_dir / "database");
  write_file_atomic(run_dir / "database" / "orchestrator_0.out", "1:M 27 Nov 2026 12:00:00.000 * Ready to accept connections\n");
  write_file_atomic(run_dir / "database" / "orchestrator_0.err", "");
  write_file_atomic(run_dir / "database" / "smartsim_db.dat", std::string(64, '\0'));
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
  const fs::path tree = root / "results" / "throughput-standard-scaling", run_dir = tree / "run-2026-11-27-12:00:00";
  std::mt19937_64 rng(1);
  fs::create_directories(run_dir);
  write_experiment_files(run_dir);
  for (int s = 0; s < sessions; ++s) write_session(run_dir, s, ranks, iterations, rng);

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
