// Submission cost on the real Slurm test cluster: N trivial permutations submitted (held, so that running
// them does not compete with submission for the 2 CPUs) through the libslurm API one job each, as one job
// array, and with an `sbatch` loop, all in the same invocation; then the cost of polling all of them.
// Prints a table. Usage: slurm_submit_bench [N=1000]
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/figures.h"

#include <fstream>
#include "common/files.h"
#include "schedulers/slurm.h"

namespace fs = std::filesystem;
using namespace fanout;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

JobSpec trivial_job(const fs::path& root, int i) {
  JobSpec j;
  j.name = "fanout-bench";  // every job of this benchmark, so that cleanup cancels exactly these
  j.run_dir = root / std::to_string(i);
  fs::create_directories(j.run_dir);
  j.rank_exe = "/bin/true";
  j.plugin_path = "/nonexistent.so";
  j.steps = {StepSpec{"noop", 1, 1, 1, "disjoint", 0, 0, "", false, "", ""}};
  j.walltime_s = 60;
  j.options.hold = true;
  write_file_atomic(j.run_dir / "job.sh", slurm_job_script(j), 0755);
  return j;
}

void cancel_sbatch_jobs() {
  if (fork() == 0) {
    execlp("scancel", "scancel", "--name=fanout-bench", nullptr);
    _exit(127);
  }
  wait(nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 1000;
  fs::path root = fs::temp_directory_path() / ("fanout-bench-" + std::to_string(getpid()));
  std::vector<JobSpec> jobs;
  for (int i = 0; i < n; ++i) jobs.push_back(trivial_job(root, i));
  SlurmScheduler slurm;

  // The baseline (an sbatch loop) and fanout's submissions take turns going first from round to round (ROUND, from
  // bench/run-all), so that a controller warming up or filling up lands on both sides alike.
  const char* round = std::getenv("ROUND");
  const bool baseline_first = round && std::atoi(round) % 2 == 0;
  double sbatch_s = 0;
  auto sbatch_loop = [&] {
    auto t0 = Clock::now();
    for (auto& j : jobs) {
      pid_t pid = fork();
      if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        std::string script = (j.run_dir / "job.sh").string();
        execlp("sbatch", "sbatch", "-Q", "-H", script.c_str(), nullptr);
        _exit(127);
      }
      waitpid(pid, nullptr, 0);
    }
    const double s = seconds_since(t0);
    cancel_sbatch_jobs();
    return s;
  };
  if (baseline_first) sbatch_s = sbatch_loop();

  // As the driver submits runs that may start together: Scheduler::submit_each, kSubmitters requests in flight.
  auto t0 = Clock::now();
  std::vector<std::string> ids;
  for (auto& s : slurm.submit_each(jobs)) {
    if (s.error) std::rethrow_exception(s.error);
    ids.push_back(s.id);
  }
  double api_s = seconds_since(t0);

  uint64_t q0 = slurm.queries();
  t0 = Clock::now();
  const int polls = 5;
  for (int p = 0; p < polls; ++p) slurm.poll(ids);
  double poll_s = seconds_since(t0) / polls;
  uint64_t queries_per_poll = (slurm.queries() - q0) / polls;
  slurm.cancel(ids);

  t0 = Clock::now();
  const auto array_jobs = slurm.submit_array(jobs);
  double array_s = seconds_since(t0);
  const std::string& first_task = array_jobs.front().id;
  if (!first_task.empty()) slurm.cancel({first_task.substr(0, first_task.find('_'))});
  for (auto& a : array_jobs)
    if (a.id.empty()) throw std::runtime_error("slurm_submit_bench: the controller did not take every run of the array");

  if (!baseline_first) sbatch_s = sbatch_loop();

  // The array anchor as Slurm's users submit arrays: one `sbatch --array=0-(n-1)` of a script that runs task k's job
  // (issue 42: the array was compared with an sbatch loop only).
  const fs::path wrapper = root / "array.sh";
  std::ofstream(wrapper) << "#!/bin/bash\n#SBATCH --job-name=fanout-bench\nexec bash " << root.string() << "/$SLURM_ARRAY_TASK_ID/job.sh\n";
  const std::string range = "--array=0-" + std::to_string(n - 1);
  t0 = Clock::now();
  if (pid_t pid = fork(); pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    execlp("sbatch", "sbatch", "-Q", "-H", range.c_str(), wrapper.c_str(), nullptr);
    _exit(127);
  } else {
    waitpid(pid, nullptr, 0);
  }
  double sbatch_array_s = seconds_since(t0);
  cancel_sbatch_jobs();
  fs::remove_all(root);

  std::string title = "submitting " + std::to_string(n) + " trivial permutations";
  std::printf("%-44s %10s %12s %10s\n", title.c_str(), "seconds", "jobs/s", "vs sbatch");
  std::printf("%-44s %10.3f %12.0f %9.1fx\n", "sbatch loop (baseline, same run)", sbatch_s, n / sbatch_s, 1.0);
  std::printf("%-44s %10.3f %12.0f %9.1fx\n", "libslurm API, one job per permutation", api_s, n / api_s, sbatch_s / api_s);
  std::printf("%-44s %10.3f %12.0f %9.1fx\n", "libslurm API, one job array", array_s, n / array_s, sbatch_s / array_s);
  std::printf("%-44s %10.3f %12.0f %9.1fx   (array anchor: fanout's array is %.2fx of it)\n", "sbatch --array (one call)", sbatch_array_s,
              n / sbatch_array_s, sbatch_s / sbatch_array_s, sbatch_array_s / array_s);
  std::printf("\npolling %d jobs: %llu controller quer%s per poll cycle, %.1f ms per cycle\n", n,
              (unsigned long long)queries_per_poll, queries_per_poll == 1 ? "y" : "ies", poll_s * 1e3);
  bench::figure("jobs", n, "count");
  bench::figure("sbatch_loop_s", sbatch_s, "s");
  bench::figure("api_s", api_s, "s");
  bench::figure("array_s", array_s, "s");
  bench::figure("api_vs_sbatch", sbatch_s / api_s, "x");
  bench::figure("array_vs_sbatch", sbatch_s / array_s, "x");
  bench::figure("sbatch_array_s", sbatch_array_s, "s");
  bench::figure("array_vs_sbatch_array", sbatch_array_s / array_s, "x");
  bench::figure("queries_per_poll", double(queries_per_poll), "count");
  bench::figure("poll_ms", poll_s * 1e3, "ms");
  std::printf("goal: array < 1 s for 1000 (%s), API >= 10x sbatch with arrays (%s)\n", array_s < 1.0 ? "met" : "NOT met",
              sbatch_s / array_s >= 10 ? "met" : "NOT met");
  return 0;
}
