// Helpers shared by the tests: temporary folders, running a command (no shell) with captured output, and
// waiting on a condition with a deadline (a readiness check, never a fixed sleep).
#pragma once
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/subprocess.h"
#include "launchers/job_spec.h"
#include "schedulers/scheduler.h"

namespace fanout::test {

// A one-rank job running /bin/true in dir/name (created), for scheduler tests that only need jobs to exist.
JobSpec trivial_job(const std::filesystem::path& dir, const std::string& name);

// Six held jobs in dir/two, the odd ones asking for `missing_queue` (a partition or queue the cluster does not have):
// two resource shapes for submit_array, one of which the scheduler refuses.
std::vector<JobSpec> two_shapes_one_refused(const std::filesystem::path& dir, const std::string& missing_queue);
// submit_array's results for those jobs, checked: each even run accepted (an id, no error), each odd run refused
// with `words` in its reason and not offered again later. Returns the accepted runs' arrays (each id up to `sep`).
std::set<std::string> arrays_of_accepted_runs(const std::vector<Scheduler::Submitted>& got, char sep, const std::string& words);

// How many files in dir have names that begin with `prefix` (an array's scripts, "array-1.sh", ...).
size_t files_named_from(const std::filesystem::path& dir, const std::string& prefix);

struct TempDir {
  TempDir();
  ~TempDir();
  std::filesystem::path path;
};

using CommandResult = ProcessResult;  // exit_code is 128+signal when killed by one

// Runs argv (argv[0] is a path) in cwd with extra environment; kills it after timeout_s.
CommandResult run_command(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                          const std::vector<std::pair<std::string, std::string>>& env = {}, double timeout_s = 120);

// git in a repository the test made (a test identity for its commits): expects success, returns stdout trimmed.
std::string git(const std::filesystem::path& repo, std::vector<std::string> args);

// A waitpid status as a shell reports it: the exit code, or 128 + the signal that killed the process (so a
// driver killed by a signal never reads as exit 0).
int exit_status(int wait_status);

// A TCP connection to 127.0.0.1:port that has sent `bytes` (a peer, or a stranger, of a server under test); the
// caller closes it. A failed connect or send fails the calling test.
int connect_and_send(int port, const std::string& bytes = "");

// A TCP port on 127.0.0.1 that was free a moment ago (the kernel's pick from its ephemeral range), for programs
// that must be told their port before they start: no fixed range that another test binary may be using.
int free_tcp_port();
int free_udp_port();  // the same for UDP (a multicast group's port that several processes must be told)

// Polls cond until it is true or timeout_s passes; returns cond's last value.
bool wait_for(const std::function<bool()>& cond, double timeout_s);

// Starts the fanout driver in cwd without waiting (stderr to err_file), for tests that interrupt it.
pid_t spawn_fanout(const std::filesystem::path& cwd, const std::vector<std::string>& args, const std::filesystem::path& err_file);
// True once some rank of an experiment below dir has started (a sample file exists), within timeout_s.
bool wait_for_a_running_rank(const std::filesystem::path& dir, double timeout_s);
// Every process (this test's own excepted) whose command line contains `needle`, as "pid: command line". A run's
// processes are found by a path of the run on their command line (a rank's --run-dir) or a number no other has.
std::vector<std::string> processes_with(const std::string& needle);
// Waits (bounded: a SIGKILLed process leaves /proc when it is reaped) until processes_with(needle) is empty and
// returns what is left; SIGKILLs what is left, so that it does not reach the next test.
std::vector<std::string> processes_left(const std::string& needle, double timeout_s);
// True once a Slurm job is neither pending nor running, within timeout_s.
bool wait_for_slurm_job_end(const std::string& job_id, double timeout_s);

// The scheduler job ids the runs below dir were submitted as (their run.toml's [job]), e.g. to check that a resume
// followed the same jobs instead of submitting again; and each by its run folder.
std::set<std::string> submitted_job_ids(const std::filesystem::path& dir);
std::map<std::filesystem::path, std::string> submitted_jobs(const std::filesystem::path& dir);

// Runs the fanout driver in cwd.
CommandResult run_fanout(const std::filesystem::path& cwd, std::vector<std::string> args, double timeout_s = 300);
// Every row of a query on a SQLite file, as text (read-only). A missing file or a failing query fails the
// calling test (ADD_FAILURE) and gives no rows.
std::vector<std::vector<std::string>> sql_rows(const std::filesystem::path& db_file, const std::string& sql);
// The same for a readiness loop on a database still being made: errors give no rows and fail nothing.
std::vector<std::vector<std::string>> sql_rows_while_polling(const std::filesystem::path& db_file, const std::string& sql);
// The first column of the first row, or "<none>".
std::string sql_one(const std::filesystem::path& db_file, const std::string& sql);

// process_scaling_results on an experiment folder (failing the test on a non-zero exit), then the titles of the plots
// its report.html shows under "What was swept" ("median goodput (worker) by len"), each an embedded PNG that is not
// empty, in the page's order.
std::vector<std::string> headline_plots(const std::filesystem::path& cwd, const std::filesystem::path& exp_dir);

std::filesystem::path build_dir();
std::filesystem::path fanout_exe();
std::filesystem::path broken_plugin(int kind);
std::string line_count_summary(const std::string& s);  // number of non-empty lines, as text

}  // namespace fanout::test
