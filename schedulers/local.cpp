#include "schedulers/local.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/clock.h"
#include "common/error.h"
#include "common/gpus.h"
#include "common/new_processes.h"
#include "common/spawn.h"
#include "common/subprocess.h"
#include "common/text.h"

extern char** environ;

namespace fanout {

struct LocalScheduler::LocalJob {
  std::string id, token;
  JobSpec spec;
  pid_t pgid = 0;
  ProcessMark started;  // before its first rank: whatever the job makes comes after
  std::map<pid_t, RankExit> running;  // pid -> which rank
  std::vector<RankExit> exits;
  std::optional<RankExit> first_failure;
  int64_t deadline_ns = 0, kill_at_ns = 0;
  bool timed_out = false, cancelled = false, terminating = false;
  JobStatus status;
};

namespace {

std::string hostname() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

std::vector<char*> c_array(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

std::string describe_exit(const JobSpec& spec, const RankExit& e) {
  std::string who = "rank " + std::to_string(e.rank) + " of step '" + spec.steps[e.step].role + "'";
  std::string how = e.signal ? "was killed by signal " + std::to_string(e.signal) + " (" + signal_name(e.signal) + ")"
                             : "exited with code " + std::to_string(e.exit_code);
  return who + " " + how + "; logs: " + (spec.run_dir / (spec.steps[e.step].role + ".err")).string();
}

}  // namespace

LocalScheduler::LocalScheduler(double kill_grace_s)
    : host_(hostname()), id_prefix_("local-" + std::to_string(::getpid()) + "-"), kill_grace_s_(kill_grace_s) {}

LocalScheduler::~LocalScheduler() {
  for (auto& [id, j] : jobs_)
    if (!job_state_final(j->status.state)) signal_job(*j, SIGKILL);
  for (auto& [pid, j] : by_pid_) waitpid(pid, nullptr, 0);
}

std::string LocalScheduler::render_script(const JobSpec& job) const { return local_job_script(job, host_); }

std::string local_job_script(const JobSpec& job, const std::string& host_) {
  if (!job.site_lines.empty() || !job.role_lines.empty())
    throw UserError("--site: the local launcher starts every rank itself, without a shell: a site profile's modules, env "
                    "and setup lines need --launcher=slurm or pbs (--site=none runs without the profile)");
  if (!job.options.step_launcher.empty())
    throw UserError("--step_launcher: the local launcher starts every rank itself; " + job.options.step_launcher +
                    " applies to batch jobs (--launcher=slurm or pbs)");
  std::string s = "#!/bin/bash\n# fanout local job " + job.name + ": " + std::to_string(job.total_ranks()) +
                  " rank(s); fanout runs these processes itself and serves their rendezvous (FANOUT_KV).\n";
  s += "cd " + shell_quote(job.run_dir.string()) + " || exit 1\n";
  for (auto& r : plan_local_ranks(job, host_, {})) {
    std::string line = "env";
    for (auto& [k, v] : r.env) line += " " + k + "=" + shell_quote(v);
    for (auto& a : r.argv) line += " " + shell_quote(a);
    const std::string& role = job.steps[r.step].role;
    line += " >>" + shell_quote(role + ".out") + " 2>>" + shell_quote(role + ".err") + " &\n";
    s += line;
  }
  s += "wait\n";
  return s;
}

std::vector<LocalScheduler::Process> LocalScheduler::processes(const JobSpec& job, const EnvList& kv_env) const {
  std::vector<Process> out;
  for (auto& r : plan_local_ranks(job, host_, kv_env)) {
    const std::string& role = job.steps[r.step].role;
    out.push_back({r.step, r.rank, r.argv, r.env, job.run_dir / (role + ".out"), job.run_dir / (role + ".err")});
  }
  return out;
}

std::string LocalScheduler::submit(const JobSpec& spec) {
  spec.validate();
  auto job = std::make_unique<LocalJob>();
  job->id = id_prefix_ + std::to_string(next_id_++);
  job->spec = spec;
  job->token = kv_.open_job(spec.total_ranks());
  job->status.job_id = job->id;
  job->status.node_list = host_;
  job->status.state = JobState::Running;
  job->status.start_wall_ns = wall_ns();
  job->deadline_ns = monotonic_ns() + spec.walltime_s * 1000000000;
  job->started = cycle_mark();

  // A job of one rank has no one to meet: it gets no service address (its rank keeps its own keys and makes no
  // connection; the connection and its AUTH were 17 % of the driver's CPU a run), only the token that marks its
  // processes.
  EnvList kv_env{{"FANOUT_KV_TOKEN", job->token}};
  if (spec.total_ranks() > 1) kv_env.insert(kv_env.begin(), {"FANOUT_KV", kv_.address()});
  for (auto& r : processes(spec, kv_env)) {
    const std::string out = r.out.string(), err = r.err.string();
    auto cargv = c_array(r.argv);
    Environment env = environment_with(r.env);
    SpawnRequest request;
    request.path = cargv[0];
    request.argv = cargv.data();
    request.envp = env.entries.data();
    request.cwd = spec.run_dir.c_str();  // ranks start in their run folder
    request.out = out.c_str();
    request.err = err.c_str();
    request.process_group = job->pgid;  // 0 for the first rank: it leads the job's group
    int error = 0;
    const pid_t pid = spawn_program(request, error);
    if (pid < 0) {
      signal_job(*job, SIGKILL);
      for (auto& [p, e] : job->running) waitpid(p, nullptr, 0);
      kv_.close_job(job->token);
      throw UserError("cannot start " + r.argv[0] + " for run " + spec.name + ": " + std::strerror(error));
    }
    if (job->pgid == 0) job->pgid = pid;
    RankExit who;
    who.step = r.step;
    who.rank = r.rank;
    job->running[pid] = who;
  }
  for (auto& [pid, e] : job->running) by_pid_[pid] = job.get();
  std::string id = job->id;
  jobs_[id] = std::move(job);
  return id;
}

void LocalScheduler::signal_job(LocalJob& job, int sig) {
  if (job.pgid > 0) ::killpg(job.pgid, sig);
}

namespace {

// Kills every process of this user made since `since` whose environment holds `entry` ("NAME=value") exactly: what
// a job's ranks started in process groups of their own (exec puts each program in one), a program that ignores
// SIGTERM, or a daemon that left with setsid, all still carry the job's token. Rounds until none is found (one may
// have forked while we looked), at most 10. `ranks`: the live ranks of the other jobs, our unreaped children (their
// pids cannot be reused), each holding its own job's token: not read. Their environ was the one open in four a job's
// end made that found a process, and the dearest: it waits on the mmap lock of a rank that is starting
// (2026-12-06: 4 % of the driver's CPU in a 10,000-run local sweep). `gone`: ranks reaped, pid -> their job's start
// mark's forks; one started after `since` held its pid alone in the window, when the ring held (not read either).
template <class RankPids>
void kill_by_environment(const std::string& entry, const ProcessMark& since, const ProcessMark& reaped, const RankPids& ranks,
                         const std::map<pid_t, uint64_t>& gone) {
  const std::string needle = std::string(1, '\0') + entry + std::string(1, '\0');
  for (int round = 0; round < 10; ++round) {
    int found = 0;
    // The first round up to the mark taken after the ranks were reaped; later ones up to now, for what forked since.
    const ProcessMark now = round == 0 ? reaped : mark_processes();
    const bool held = ring_held_between(since, now);
    for_each_process_between(since, now, [&](pid_t pid) {
      if (ranks.count(pid)) return;
      if (auto g = gone.find(pid); held && g != gone.end() && g->second >= since.forks) return;
      // Most pids of a window are gone (a rank's threads, each a pid of its own): asked without a path, a tenth of a
      // failed open's cost.
      if (::kill(pid, 0) != 0 && errno == ESRCH) return;
      const int fd = ::open(("/proc/" + std::to_string(pid) + "/environ").c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return;  // gone, or another user's
      std::string env(1, '\0');
      char buf[65536];
      for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) env.append(buf, size_t(n));
      ::close(fd);
      env.push_back('\0');
      if (env.find(needle) != std::string::npos && ::kill(pid, SIGKILL) == 0) ++found;
    });
    if (!found) return;
  }
}

}  // namespace

void LocalScheduler::reap() {
  int st = 0;
  pid_t pid;
  while ((pid = ::waitpid(-1, &st, WNOHANG)) > 0) {
    auto it = by_pid_.find(pid);
    if (it == by_pid_.end()) continue;
    LocalJob& job = *it->second;
    by_pid_.erase(it);
    RankExit e = job.running[pid];
    job.running.erase(pid);
    if (job.started.known) reaped_[pid] = job.started.forks;
    if (WIFSIGNALED(st)) e.signal = WTERMSIG(st);
    else e.exit_code = WEXITSTATUS(st);
    job.exits.push_back(e);
    // Only a failure before we started terminating the job is a cause; the rest are our own signals.
    if ((e.signal || e.exit_code) && !job.first_failure && !job.terminating) job.first_failure = e;
  }
}

void LocalScheduler::advance(LocalJob& job, int64_t now) {
  if (job_state_final(job.status.state)) return;
  if (!job.terminating && (job.first_failure || now >= job.deadline_ns || job.cancelled)) {
    // A failed rank fails the run: stop its peers instead of letting them wait on it.
    job.timed_out = !job.first_failure && !job.cancelled && now >= job.deadline_ns;
    job.terminating = true;
    job.kill_at_ns = now + int64_t(kill_grace_s_ * 1e9);
    signal_job(job, SIGTERM);
  } else if (job.terminating && now >= job.kill_at_ns && !job.running.empty()) {
    signal_job(job, SIGKILL);
  }
  if (!job.running.empty()) return;
  // Every rank has exited: any processes the ranks left behind in the group go too, and those that left the group
  // (a program exec started in a group of its own and that ignored SIGTERM, a setsid daemon) by the job's token.
  signal_job(job, SIGKILL);
  kill_by_environment("FANOUT_KV_TOKEN=" + job.token, job.started, cycle_mark(), by_pid_, reaped_);
  forget_reaped_before_running_jobs();
  kv_.close_job(job.token);
  JobStatus& s = job.status;
  s.end_wall_ns = wall_ns();
  s.ranks = job.exits;
  if (job.first_failure) {
    s.state = JobState::Failed;
    s.exit_code = job.first_failure->exit_code;
    s.signal = job.first_failure->signal;
    s.reason = describe_exit(job.spec, *job.first_failure);
  } else if (job.cancelled) {
    s.state = JobState::Cancelled;
    s.reason = "cancelled";
  } else if (job.timed_out) {
    s.state = JobState::Timeout;
    s.reason = "exceeded its wall time of " + std::to_string(job.spec.walltime_s) + " s; logs: " + job.spec.run_dir.string();
  } else {
    s.state = JobState::Completed;
  }
  finish_status(job.spec, s);
}

// A reaped rank started before every running job's start mark is in none of their windows as that rank.
void LocalScheduler::forget_reaped_before_running_jobs() {
  constexpr size_t kMaxReaped = 4096;  // a long job beside many short ones: the rest are read, as before
  if (reaped_.size() < 64) return;
  uint64_t oldest = UINT64_MAX;
  for (auto& [id, j] : jobs_)
    if (!j->running.empty() || !job_state_final(j->status.state)) oldest = std::min(oldest, j->started.known ? j->started.forks : 0);
  std::erase_if(reaped_, [&](const auto& r) { return r.second < oldest; });
  if (reaped_.size() > kMaxReaped) reaped_.clear();
}

const ProcessMark& LocalScheduler::cycle_mark() {
  if (!cycle_mark_) cycle_mark_ = mark_processes();
  return *cycle_mark_;
}

std::vector<JobStatus> LocalScheduler::poll(const std::vector<std::string>& job_ids) {
  cycle_mark_.reset();
  reap();
  int64_t now = monotonic_ns();
  std::vector<JobStatus> out;
  for (auto& id : job_ids) {
    if (auto e = ended_.find(id); e != ended_.end()) {
      out.push_back(e->second);
      continue;
    }
    auto it = jobs_.find(id);
    if (it == jobs_.end()) {
      JobStatus s;
      s.job_id = id;
      s.state = JobState::Unknown;
      out.push_back(s);
      continue;
    }
    advance(*it->second, now);
    out.push_back(it->second->status);
    // An ended job, its ranks reaped, is answered from its status alone: what started it goes (a 100,000-run sweep
    // kept every job's spec and process table, 0.9 KiB each).
    if (job_state_final(it->second->status.state) && it->second->running.empty()) {
      ended_[id] = std::move(it->second->status);
      jobs_.erase(it);
    }
  }
  return out;
}

void LocalScheduler::cancel(const std::vector<std::string>& job_ids) {
  for (auto& id : job_ids) {
    auto it = jobs_.find(id);
    if (it == jobs_.end() || job_state_final(it->second->status.state)) continue;
    it->second->cancelled = true;
    advance(*it->second, monotonic_ns());
  }
}

void LocalScheduler::check(const std::vector<JobSpec>& jobs) {
  for (const JobSpec& job : jobs) {
    const int asked = job.busiest_node().gpus;
    if (asked == 0) continue;
    const size_t shown = visible_gpus().size();
    if (shown < size_t(asked))
      throw UserError(job.name + ": its steps ask " + std::to_string(asked) + " GPU(s) on a node and this host shows " +
                      std::to_string(shown) + " (CUDA_VISIBLE_DEVICES, else /dev/nvidia<N>)");
  }
}

}  // namespace fanout
