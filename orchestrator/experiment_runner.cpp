#include "orchestrator/experiment_runner.h"
#include "orchestrator/revision.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <deque>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <sstream>
#include <thread>

#include <toml++/toml.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/identity.h"
#include "common/toml_document.h"
#include "common/files.h"
#include "common/held_lines.h"
#include "common/parallel.h"
#include "common/subprocess.h"
#include "common/text.h"
#include "orchestrator/progress.h"
#include "orchestrator/scheduler_usage.h"
#include "launchers/step_launcher.h"
#include "schedulers/scheduler.h"
#include "results/csv_export.h"
#include "results/run_folder.h"
#include "results/metric_stats.h"
#include "results/store.h"
#include "common/git_revision.h"
#include "version.h"
#include "results/layout.h"

namespace fanout {

namespace fs = std::filesystem;

namespace {

JobSpec job_for(const ExperimentPlan& plan, const RunPlan& run, const Plugin& plugin, const RunnerOptions& opts,
                const fs::path& run_dir) {
  JobSpec job;
  job.name = run.session;
  job.run_dir = run_dir;
  job.rank_exe = opts.rank_exe;
  job.plugin_path = fs::absolute((run.plugin ? *run.plugin : plugin).path());  // a service of another plugin loads its own
  job.steps = run.steps;
  job.walltime_s = plan.request.settings.walltime_s;
  job.options = plan.request.settings.run_options();
  job.site_lines = opts.site.site.shell();
  for (auto& [role, lines] : opts.site.roles)
    for (auto& step : job.steps)
      if (step.role == role && !lines.empty()) job.role_lines[role] = lines.shell();
  return job;
}

// A shared step's service job: on nodes of its own (as a step on disjoint nodes would be), its wall time covering
// the `runs` it serves one after another, each with its retries, plus 10 minutes for the gaps between them (queue
// waits, start-up). It normally ends well before: the driver stops it after its last run.
JobSpec service_job_for(const ExperimentPlan& plan, const RunPlan& service, size_t runs, const Plugin& plugin,
                        const RunnerOptions& opts, const fs::path& dir) {
  const ExperimentSettings& st = plan.request.settings;
  JobSpec job = job_for(plan, service, plugin, opts, dir);
  job.walltime_s = st.service_walltime_s ? st.service_walltime_s : job.walltime_s * int64_t(runs * size_t(1 + st.max_retries) + 1) + 600;
  job.options = st.service_options();
  job.options.exclusive = true;
  return job;
}

// Every service's job as it will be submitted, each covering all the runs of the plan that use it.
std::vector<JobSpec> service_jobs(const ExperimentPlan& plan, const Plugin& plugin, const RunnerOptions& opts, const fs::path& root) {
  std::vector<size_t> served(plan.services.size());
  for (const auto& r : plan.runs)
    if (r.service >= 0) ++served[size_t(r.service)];
  std::vector<JobSpec> jobs;
  for (size_t k = 0; k < plan.services.size(); ++k)
    jobs.push_back(service_job_for(plan, plan.services[k], served[k], plugin, opts, root / plan.services[k].session));
  return jobs;
}

// Tells a shared step's service that its group is done (its ranks watch for this file).
void stop_service(const fs::path& dir) { write_file_atomic(dir / layout::kServiceStop, "", 0644); }

// The command line in every run's provenance, bounded: a sweep's list flags grow with its number of runs, and
// a whole copy per run made the driver's memory and the database quadratic (10,000 runs of a 49 KB command
// line: 650 MB of driver memory). The whole command is in <exp>/command.toml.
std::string bounded_command_line(const std::string& cl) {
  constexpr size_t kMax = 512;
  if (cl.size() <= kMax) return cl;
  return cl.substr(0, kMax) + "... (" + std::to_string(cl.size()) + " bytes; the whole command is in command.toml)";
}

// What a verdict on a comparison needs to know about where a run was made, read once per driver: this host's
// CPU, cores, memory, kernel and OS; the versions of the software benchmarks lean on; and the environment
// variables that change speed. (The ranks' node names are recorded per rank; a batch job's nodes are described
// by the host only as far as they are alike.)
const std::map<std::string, std::string>& machine_provenance() {
  static const std::map<std::string, std::string> info = [] {
    std::map<std::string, std::string> m;
    auto first_line_with = [](const fs::path& file, const std::string& prefix) -> std::string {
      std::ifstream in(file);
      for (std::string line; std::getline(in, line);)
        if (line.rfind(prefix, 0) == 0) return trim(line.substr(line.find_first_of(":=") + 1));
      return "";
    };
    m["host_cpu_model"] = first_line_with("/proc/cpuinfo", "model name");
    m["host_cpus"] = std::to_string(::sysconf(_SC_NPROCESSORS_ONLN));
    m["host_memory"] = first_line_with("/proc/meminfo", "MemTotal");
    m["host_os"] = first_line_with("/etc/os-release", "PRETTY_NAME");
    if (m["host_os"].size() >= 2 && m["host_os"].front() == '"') m["host_os"] = m["host_os"].substr(1, m["host_os"].size() - 2);
    if (struct utsname u; ::uname(&u) == 0) m["host_kernel"] = std::string(u.release) + " " + u.machine;
    if (auto r = run_process({"redis-server", "--version"}, {}, 5); r.exit_code == 0)
      m["version_redis_server"] = printable(trim(r.out.substr(0, r.out.find('\n'))));
    for (auto& [key, version] : scheduler_tool_versions()) m["version_" + key] = version;
    if (auto r = run_process({"dpkg-query", "-W", "-f=${Version}", "libtorch-dev"}, {}, 5); r.exit_code == 0) m["version_libtorch"] = printable(trim(r.out));
    for (const char* v : {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES", "CUDA_VISIBLE_DEVICES",
                          "LD_PRELOAD", "LOADEDMODULES"})
      if (const char* x = std::getenv(v)) m[std::string("env_") + v] = printable(x);
    for (auto it = m.begin(); it != m.end();) it = it->second.empty() ? m.erase(it) : std::next(it);
    return m;
  }();
  return info;
}

// What every run of a sweep made with `plugin` shares in its run.toml: made once per plugin (a run's copy of it
// was 2.4 % of the driver's CPU a local run when each run asked the host, the cwd and the command line again).
RunMetadata sweep_metadata(const ExperimentPlan& plan, const Plugin& plugin, const RunnerOptions& opts, const std::string& scheduler) {
  RunMetadata m;
  m.experiment = plan.request.settings.exp_name;
  m.subcommand = plan.request.subcommand;
  m.plugin = plugin.name();
  m.plugin_path = fs::absolute(plugin.path()).string();
  m.plugin_version = plugin.version();
  m.scheduler = scheduler;  // what --launcher resolved to (auto -> slurm or local)
  m.walltime_s = plan.request.settings.walltime_s;
  m.provenance = {{"host", host_name()},
                  {"user", user_name()},
                  {"cwd", fs::current_path().string()},
                  {"command_line", bounded_command_line(opts.command_line)},
                  {"fanout_version", FANOUT_VERSION},
                  {"fanout_git_revision", git_revision()},
                  {"plugin_abi", std::to_string(FANOUT_PLUGIN_ABI_VERSION)}};
  // What speedup is measured against (process_scaling_results reads it back): the sweep's, not a later guess.
  if (!plan.scaling.empty()) m.provenance["scaling"] = plan.scaling;
  // Which parameters are the plugin's settings (exec's command, parser, ...): the CSV files leave out those that
  // hold one value (results/metric_stats.h shown_parameters).
  std::string settings;
  for (auto& p : plugin.params())
    if (p.setting) settings += (settings.empty() ? "" : ",") + p.name;
  if (!settings.empty()) m.provenance["plugin_settings"] = settings;
  for (auto& [k, v] : plan.revision) m.provenance[k] = v;  // the code under test
  if (!plan.request.settings.resources) m.provenance["resources"] = "off";  // fanout-rank reads it
  if (!plan.request.settings.counters.empty()) m.provenance["counters"] = plan.request.settings.counters;  // and this
  for (auto& [k, v] : machine_provenance()) m.provenance[k] = v;
  return m;
}

// A run's run.toml without its status or creation time: its sweep's shared part (sweep_metadata of its plugin) and
// its own.
RunMetadata run_metadata(RunMetadata shared, const ExperimentPlan& plan, const RunPlan& run) {
  RunMetadata m = std::move(shared);
  m.session = run.session;
  m.param_hash = run.param_hash;
  m.parameters = run.point->pairs();
  for (auto& s : run.steps)
    m.steps.push_back({s.role, s.nodes, s.tasks_per_node, s.placement, s.cpus_per_task, s.gpus_per_task, s.memory_mb, s.binding, s.exclusive, s.entry, s.settings, s.mpi_program});
  // Which of the permutation's --repeat runs: provenance, not a parameter (compare matches the runs across it).
  if (plan.request.settings.repeat > 1)
    m.provenance["repeat"] = std::to_string(run.repeat + 1) + "/" + (plan.request.settings.repeat_auto ? std::string("auto") : std::to_string(plan.request.settings.repeat));
  return m;
}

RunStatusRecord status_record(const JobStatus& s, const std::vector<StepSpec>& steps) {
  RunStatusRecord r;
  r.state = job_state_name(s.state);
  r.job_id = s.job_id;
  r.node_list = s.node_list;
  r.reason = s.reason;
  r.exit_code = s.exit_code;
  r.signal = s.signal;
  r.start_wall_ns = s.start_wall_ns;
  r.end_wall_ns = s.end_wall_ns;
  for (auto& e : s.ranks) r.ranks.push_back({steps[e.step].role, e.rank, e.exit_code, e.signal});
  return r;
}


// Creates the folder: two drivers started in the same second on one experiment get one each.
fs::path unique_run_root(const fs::path& exp_dir) {
  fs::path base = exp_dir / ("run-" + compact_utc_stamp(wall_ns()));
  fs::path p = base;
  for (int i = 2; !fs::create_directory(p); ++i) p = base.string() + "-" + std::to_string(i);
  return p;
}

constexpr const char* kCommandFile = layout::kCommand;

// An advisory lock on <exp>/driver.lock (flock: released by the kernel when the driver dies, even by SIGKILL).
class DriverLock {
 public:
  DriverLock(const fs::path& exp_dir, bool alone) {
    const fs::path file = exp_dir / layout::kDriverLock;
    fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0) throw UserError(file.string() + ": " + std::strerror(errno));
    if (::flock(fd_, (alone ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
      std::string holder = read_file(file);
      while (!holder.empty() && std::isspace((unsigned char)holder.back())) holder.pop_back();
      ::close(fd_);
      throw UserError(exp_dir.string() + ": another fanout driver is running this experiment" +
                      (holder.empty() ? std::string() : " (" + holder + ")") +
                      (alone ? "; resume once it has ended" : "; a resume holds it alone, start once it has ended"));
    }
    const std::string me = "pid " + std::to_string(::getpid()) + " on " + host_name() + "\n";
    if (::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, me.data(), me.size(), 0) < 0) { /* the holder's name is only for messages */ }
  }
  ~DriverLock() { ::close(fd_); }
  DriverLock(const DriverLock&) = delete;
  DriverLock& operator=(const DriverLock&) = delete;

 private:
  int fd_ = -1;
};

void save_command(const fs::path& exp_dir, const RunnerOptions& opts) {
  toml::array argv;
  for (auto& a : opts.argv)
    if (a != "--resume") argv.push_back(a);  // resume adds it back
  toml::table t{{"cwd", fs::current_path().string()}, {"argv", argv}};
  std::ostringstream out;
  out << "# The command that made this experiment; `fanout resume " << exp_dir.string() << "` runs it again with --resume.\n"
      << t << "\n";
  write_file_atomic(exp_dir / kCommandFile, out.str(), 0600);
}

// A run folder of an earlier driver, not in the database and without a status: its job was live when
// that driver stopped.
struct Straggler {
  fs::path dir;
  RunMetadata meta;
  std::string job_id;
};

// The job id a fanout before 2026-12-06 kept in job.id beside run.toml (now run.toml's [job]), or "": a folder
// whose id cannot be read is not followed, its permutation runs again.
std::string legacy_job_id(const fs::path& dir) {
  try {
    std::error_code ec;
    return fs::is_regular_file(dir / layout::kJobId, ec) ? trim(read_input_file(dir / layout::kJobId, 4096)) : std::string();
  } catch (const UserError&) {
    return "";
  }
}

// Run folders the database does not know: those whose run ended (status recorded, the driver died
// between the two) are ingested now; those still unfinished are returned for adoption.
std::vector<Straggler> recover_stragglers(const fs::path& exp_dir, ResultsDb& db, size_t& ingested) {
  // Runs are known by their place inside the experiment (run-<stamp>/<session>): the database keeps absolute
  // paths, which an experiment folder that was moved no longer matches.
  auto place = [](const fs::path& run_dir) { return (run_dir.parent_path().filename() / run_dir.filename()).string(); };
  std::set<std::string> known;
  for (auto& r : db.runs()) known.insert(place(fs::path(r.path)));
  std::vector<Straggler> live;
  std::error_code ec;
  for (auto& e : fs::recursive_directory_iterator(exp_dir, ec)) {
    if (e.path().filename() != kRunMetadataFile) continue;
    const fs::path dir = fs::absolute(e.path().parent_path()).lexically_normal();
    if (known.count(place(dir))) continue;
    try {
      RunMetadata meta = read_run_metadata(dir);
      if (meta.status) {
        db.ingest_run(dir);
        ++ingested;
      } else {
        if (meta.job_id.empty()) meta.job_id = legacy_job_id(dir);
        std::string id = meta.job_id;
        if (!id.empty()) live.push_back({dir, std::move(meta), std::move(id)});
      }
    } catch (const UserError&) {
      continue;  // not a readable run folder: its permutation runs again
    }
  }
  return live;
}

// Wall-clock time of the newest write to a run's sample files (ranks flush at least every second while
// they record), or 0 when there is none yet.
int64_t newest_sample_write_ns(const fs::path& run_dir) {
  int64_t newest = 0;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(samples_dir(run_dir), ec)) {
    struct stat st {};
    if (::stat(e.path().c_str(), &st) == 0)
      newest = std::max(newest, int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec);
  }
  return newest;
}

bool worth_a_retry(JobState s) {
  return s == JobState::Failed || s == JobState::Timeout || s == JobState::NodeFail || s == JobState::OutOfMemory ||
         s == JobState::Preempted || s == JobState::Unknown;
}

}  // namespace

SavedCommand read_saved_command(const fs::path& exp_dir) {
  const fs::path file = exp_dir / kCommandFile;
  if (!fs::exists(file)) throw UserError(exp_dir.string() + ": no " + kCommandFile + " (not an experiment folder, or made by a fanout older than the resume command)");
  const toml::table t = parse_toml_document(read_input_file(file, 1 << 20), file.string());
  SavedCommand c;
  c.cwd = t["cwd"].value_or(std::string());
  if (auto* a = t["argv"].as_array())
    for (auto& v : *a) c.argv.push_back(v.value_or(std::string()));
  if (c.argv.size() < 2 || c.cwd.empty()) throw UserError(file.string() + ": needs cwd and argv");
  return c;
}

namespace {
// Launchers that hand out no GPUs (local processes, mpirun) leave each rank to take its share of its host's GPUs by
// local rank (rank/main.cpp): two steps on one node asking GPUs, or locally two nodes (all this one host), would take
// the same ones.
void refuse_shared_gpu_hosts(const RunPlan& run, const std::string& scheduler, const SchedulerTraits& traits) {
  if (traits.hands_out_gpus) return;
  JobSpec probe;
  probe.steps = run.steps;
  std::map<int, int> askers;  // host -> (step, node) pairs asking GPUs on it
  for (size_t s = 0; s < probe.steps.size(); ++s)
    if (probe.steps[s].gpus_per_task > 0)
      for (int node : probe.step_nodes(s)) ++askers[traits.one_host ? 0 : node];
  for (auto& [host, n] : askers)
    if (n > 1)
      throw UserError(run.session + ": " + (traits.one_host ? "more than one step or node asks GPUs on this host" : "two steps on one node ask GPUs") +
                      ", and the " + scheduler + " launcher hands out none: each rank takes its share by local rank, so they would take the same GPUs");
}

}  // namespace

// A scheduler that starts every rank on this host cannot run SmartSim-Scaling's 128 nodes x 32 clients: refused,
// before anything starts, when the ranks that run at once (a run's steps times the runs --max_parallel lets run
// together, plus the service they share) exceed --max_local_ranks (default 8 per usable CPU).
void refuse_too_many_local_ranks(const ExperimentPlan& plan, const std::string& scheduler) {
  if (!scheduler_traits(scheduler).one_host) return;
  const ExperimentSettings& st = plan.request.settings;
  const size_t cpus = usable_cpus();  // the CPUs this process may run on (its affinity mask)
  const int64_t limit = st.max_local_ranks > 0 ? st.max_local_ranks : int64_t(8 * cpus);
  // --array on the local launcher starts every run at once (one submission each, no throttle).
  const int64_t together = st.array ? int64_t(plan.runs.size()) : std::max<int64_t>(1, std::min<int64_t>(st.max_parallel, int64_t(plan.runs.size())));
  for (const RunPlan& r : plan.runs) {
    int64_t ranks = 0, service = 0;
    for (const StepSpec& step : r.steps) ranks += step.ranks();
    if (r.service >= 0)
      for (const StepSpec& step : plan.services[size_t(r.service)].steps) service += step.ranks();
    ranks = ranks * together + service;
    if (ranks <= limit) continue;
    const auto from = st.origins.find("launcher");
    const std::string launcher_from = from == st.origins.end() ? "the default --launcher=local" : from->second + "=" + scheduler;
    throw UserError(r.session + ": " + std::to_string(ranks) + " ranks on this host (" + launcher_from + ")" +
                    (together > 1 ? ", " + std::to_string(together) + " runs at once (--max_parallel)" : "") + ", more than --max_local_ranks=" +
                    std::to_string(limit) + (st.max_local_ranks > 0 ? "" : " (8 per CPU; " + std::to_string(cpus) + " CPUs)") +
                    ": use a scheduler (--launcher=slurm or pbs), fewer nodes or ranks per node, or raise --max_local_ranks");
  }
}

namespace {

// What `launcher` cannot honour, of the run's options and of what each step of each run and service asks: refused.
void refuse_unhonoured(const ExperimentPlan& plan, const std::string& scheduler) {
  const SchedulerTraits traits = scheduler_traits(scheduler);
  const auto& honoured = traits.honoured;
  const ExperimentSettings& st = plan.request.settings;
  st.run_options().refuse_unhonoured(scheduler, honoured, st.origins);
  // Given for a service job (by the user: a site profile's are defaults for experiments that have one).
  for (auto [name, alias] : {std::pair{"service_hosts", "db_hosts"}, {"service_args", "db_node_feature"}, {"service_walltime", "wall_time"}})
    if (st.given.count(name) && plan.services.empty())
      throw UserError(std::string("--") + name + " (--" + alias + "): this experiment starts no service job (no shared step, or --no_reuse): " +
                      "nothing would take it");
  // The MPI flavour shapes mpirun's command line only (a site profile may name it for the day mpirun is used).
  const bool mpirun = traits.step_launcher(st.options.step_launcher) == mpirun_launcher().name;
  if (st.given.count("mpi") && !mpirun)
    throw UserError("--mpi: the " + scheduler + " launcher starts steps " + traits.starts_steps(st.options.step_launcher) +
                    ", not with " + mpirun_launcher().name + ": nothing would take it");
  if (!st.service_hosts.empty() && std::find(honoured.begin(), honoured.end(), "batch_args") == honoured.end())
    throw UserError("--service_hosts (--db_hosts): the " + scheduler + " launcher cannot place a job on given nodes");
  if (!plan.services.empty()) st.service_options().refuse_unhonoured(scheduler, honoured, st.origins);
  for (const auto* runs : {&plan.services, &plan.runs})
    for (const RunPlan& r : *runs) {
      for (const StepSpec& step : r.steps) refuse_unhonoured_step(step, r.session, scheduler, honoured);
      refuse_shared_gpu_hosts(r, scheduler, traits);
    }
  refuse_too_many_local_ranks(plan, scheduler);
}
}  // namespace

namespace {
// A job script as a dry run shows it: whole up to 60 lines; longer (a local script starts a line per rank, 2,880
// for SmartSim-Scaling's defaults) its first 40 and last 5 lines, saying how many were left out.
std::string summarised(const std::string& script) {
  std::vector<std::string_view> lines;
  for (size_t at = 0; at < script.size();) {
    size_t end = script.find('\n', at);
    if (end == std::string::npos) end = script.size();
    lines.push_back(std::string_view(script).substr(at, end - at));
    at = end + 1;
  }
  constexpr size_t kWhole = 60, kHead = 40, kTail = 5;
  if (lines.size() <= kWhole) return script;
  std::string out;
  for (size_t i = 0; i < kHead; ++i) out.append(lines[i]).append("\n");
  out += "# ... " + std::to_string(lines.size() - kHead - kTail) + " of this script's " + std::to_string(lines.size()) +
         " lines left out (the run writes it whole as job.sh in its folder)\n";
  for (size_t i = lines.size() - kTail; i < lines.size(); ++i) out.append(lines[i]).append("\n");
  return out;
}
}  // namespace

// What a sweep runs, for its banner: a plugin's experiment ("calibration 'calibration_sleep'"), or an experiment
// file's by its name ("experiment 'kv' (plugin exec)").
static std::string what_runs(const ExperimentPlan& plan, const Plugin& plugin) {
  if (plan.request.subcommand == "run") return "experiment '" + printable(plan.request.settings.exp_name) + "' (plugin " + plugin.name() + ")";
  return plugin.name() + " '" + plan.request.subcommand + "'";
}

void print_dry_run(const ExperimentPlan& plan, const Plugin& plugin, const RunnerOptions& opts, std::ostream& out) {
  const auto& st = plan.request.settings;
  if (!scheduler_is_detected(st.scheduler)) refuse_unhonoured(plan, st.scheduler);  // as a real run would
  else refuse_too_many_local_ranks(plan, st.scheduler);  // auto that means local here
  out << "# dry run: " << plan.runs.size() << " run(s) of " << what_runs(plan, plugin) << ", launcher " << st.scheduler << ", nothing is submitted or written\n";
  for (size_t i = 0; i < plan.runs.size(); ++i) {
    const auto& r = plan.runs[i];
    if (r.service >= 0 && (i == 0 || plan.runs[i - 1].service != r.service))
      out << "service " << plan.services[size_t(r.service)].session << " (step " << plan.services[size_t(r.service)].steps[0].role
          << ", shared by the runs below until the next service)\n";
    out << "[" << (i + 1) << "/" << plan.runs.size() << "] " << printable(r.session);
    // The plan holds what the experiment uses.
    for (size_t k = 0; k < r.point->size(); ++k) out << " " << r.point->name(k) << "=" << printable(r.point->values[k]);
    out << "\n";
    // What each rank of each step will run, placeholders filled (the plugin's plan_step; the step's own
    // variables stay {FANOUT_RANK}), before the job scripts that start fanout-rank.
    for (size_t k = 0; k < r.step_commands.size() && k < r.steps.size(); ++k)
      if (!r.step_commands[k].empty()) {
        std::string text = printable_lines(r.step_commands[k]);
        for (size_t at = 0; (at = text.find('\n', at)) != std::string::npos; at += 5) text.replace(at, 1, "\n    ");
        out << "  step " << printable(r.steps[k].role) << " runs: " << text << "\n";
      }
  }
  fs::path root = fs::absolute(st.results_dir) / st.exp_name / "run-<timestamp>";
  for (const JobSpec& job : service_jobs(plan, plugin, opts, root)) {
    out << "\n# ---- job script for service " << job.name << "\n";
    out << summarised(render_job_script(st.scheduler, job));
  }
  for (const auto& r : plan.runs) {
    out << "\n# ---- job script for " << r.session << "\n";
    out << summarised(render_job_script(st.scheduler, job_for(plan, r, plugin, opts, root / r.session)));
  }
}

namespace {

// The driver's own cost, reported at the end (bench/driver_scale_bench.sh reads it).
struct DriverCost {
  double submit_s = 0, poll_s = 0, ingest_s = 0;
  double last_poll_s = 0;  // the last scheduler query's wall time
  double cpu_submitted_s = -1;  // the driver's CPU when the last run was submitted: planning, writing, submitting
  uint64_t polls = 0;
};

// The process's CPU time (user + system), seconds.
double process_cpu_s() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

template <typename Fn>
void timed(double& into, Fn&& fn) {
  const int64_t a = monotonic_ns();
  fn();
  into += double(monotonic_ns() - a) / 1e9;
}

// One experiment carried out by one driver, in named steps (run() takes them in order):
//   open()          check where runs go, create the folder, take the driver lock, open the database, and (resume)
//                   choose what is left; false when nothing is
//   queue()         lay out every run folder (and a shared step's service before its group), in order
//   interrupt()     on Ctrl-C: cancel what runs, record what never started
//   submit_ready()  submit what may go now (services, --max_parallel, arrays, a group's runs one at a time)
//   poll_once()     one scheduler query for every active job; finish() each that ended
//   check_stalls()  --stall_timeout
//   check_pending() --max_pending, --fatal_pending
//   back_off()      poll fast while things change, slower while they do not
//   report()        csv/, the summary, the driver's own cost
// Members outlive every step; the destructor stops any service this session started and did not see end.
class ExperimentSession {
 public:
  ExperimentSession(const ExperimentPlan& plan, const Plugin& plugin, const RunnerOptions& opts)
      : plan_(plan), plugin_(plugin), opts_(opts), st_(plan.request.settings), log_(opts.progress ? *opts.progress : stderr_lines_),
        progress_(log_, !opts.progress && isatty(STDERR_FILENO), double(st_.status_interval_s)),
        scheduler_(make_scheduler(st_.scheduler)), jobs_end_with_this_host_(scheduler_traits(st_.scheduler).one_host) {
    scheduler_->record_usage(st_.resources);
  }
  ~ExperimentSession() {
    try {
      for (auto& g : groups_)
        if (!slots_[g.service].ended && !slots_[g.service].job_id.empty()) stop_service(dir_of(slots_[g.service]));
    } catch (...) {
    }
  }
  ExperimentSession(const ExperimentSession&) = delete;
  ExperimentSession& operator=(const ExperimentSession&) = delete;

  ExperimentOutcome run() {
    if (!open()) return outcome_;
    queue();
    t0_ = monotonic_ns();
    max_parallel_ = st_.max_parallel > 0 ? st_.max_parallel : scheduler_->default_max_parallel();
    max_submitted_ = st_.max_submitted > 0 ? size_t(st_.max_submitted) : scheduler_->max_submitted();
    drive();
    while (st_.repeat_auto && !cancelling_ && add_auto_round() > 0) drive();
    if (st_.repeat_auto) report_auto_repeats();
    if (progress_.terminal()) progress_.status(counts(), monotonic_ns(), true);  // the last state stays on screen
    progress_.end_status();
    outcome_.interrupted = cancelling_;
    // Every slot has ended: they go before the CSV pass reads every run back (together they were the peak of a
    // 100,000-run sweep's driver).
    const size_t slots = slots_.size();
    std::deque<Slot>().swap(slots_);
    std::vector<Group>().swap(groups_);
    report(slots);
    return outcome_;
  }

 private:
  // Submits, polls and records until every slot has ended.
  void drive() {
    while (done_ < slots_.size()) {
      if (interrupt_requested() && !cancelling_) interrupt();
      bool changed = submit_ready();
      if (active_.empty()) {
        // Nothing to poll: the scheduler took none of the runs left (its controller full of others' jobs). Waits as
        // a poll would, instead of asking again at once for 5 s on end.
        if (!changed) back_off(false);
        continue;
      }
      // Before the poll: the first one shows every run still to end. Counted only when it is shown (a pass over them all).
      const int64_t now = monotonic_ns();
      if (progress_.due(slots_.size() - groups_.size(), double(now - t0_) / 1e9, now)) progress_.status(counts(), now);
      changed |= poll_once();
      check_stalls();
      check_pending();
      // A batch job's outcome is durable only once committed: before the driver sleeps, not a second later.
      if (db_->in_batch() && (!jobs_end_with_this_host_ || monotonic_ns() - batch_since_ns_ >= kBatchNs)) commit_runs();
      back_off(changed);
    }
    commit_runs();
  }

  // The runs stored since the last commit, durable with it for a batch scheduler (ResultsDb::sync_commits). Not a
  // syncfs: it waits for everything dirty on the filesystem (a busy login node's, the test cluster's 160 slurmd);
  // 1,000 runs on Slurm spent 78 s of wall time storing with it, 29 s with an fsync of each run.toml.
  void commit_runs() {
    if (db_->in_batch()) timed(cost_.ingest_s, [&] { keep_outcomes_on_failure([&] { db_->commit_batch(); }); });
  }

  // A store or commit that fails takes the batch back: the outcomes of its batch jobs are then only in their
  // run.toml, appended without an fsync, and are synced before the error goes on (resume ingests them).
  template <typename Fn>
  void keep_outcomes_on_failure(Fn&& fn) {
    try {
      fn();
    } catch (...) {
      if (!jobs_end_with_this_host_) sync_filesystem(outcome_.run_root);
      throw;
    }
  }

  // A permutation as its stored parameters name it (across_runs groups runs so).
  static std::string parameters_key(const std::vector<std::pair<std::string, std::string>>& params) {
    std::string key;
    for (auto& [k, v] : params) key += k + "=" + v + "\n";
    return key;
  }

  // --repeat=auto: after the runs so far, one more run (the next repeat index) of every permutation whose
  // across-runs interval of some figure is wider than +-precision of its median and that has fewer than
  // max_repeat runs; a round is laid out as the first was, interleaved across permutations. Figures declared
  // informational (better = none), setup costs and what a run cost (resource.*) do not hold a permutation back.
  // Returns the runs added.
  size_t add_auto_round() {
    std::map<std::string, bool> wide;  // permutation -> some figure still too wide
    for (const AcrossRuns& f : across_runs(compute_statistics(*db_, st_.exp_name))) {
      if (f.setup_cost || f.better == "none" || is_resource_metric(f.metric)) continue;
      const double half = std::max(f.runs.median - f.runs.low, f.runs.high - f.runs.median);
      bool& w = wide[parameters_key(f.parameters)];
      w = w || !std::isfinite(half) || half > st_.precision_pct / 100 * std::fabs(f.runs.median);
    }
    std::vector<const RunPlan*> round;
    for (const RunPlan& base : plan_.runs) {
      if (base.repeat != 0) continue;
      int& planned = auto_planned_.try_emplace(base.param_hash, st_.repeat).first->second;
      auto it = wide.find(parameters_key(base.point->pairs()));
      if (it == wide.end() || !it->second || planned >= st_.max_repeat) continue;  // precise, at the cap, or never completed
      auto_extra_.push_back(repeat_of(plan_.identity_head, base, planned++));
      round.push_back(&auto_extra_.back());
    }
    if (round.empty()) return 0;
    log() << "fanout: --repeat=auto: " << round.size() << " permutation(s) not yet within +-" << st_.precision_pct
          << " %: one more run each\n";
    enqueue(round);
    outcome_.runs = slots_.size();
    return round.size();
  }

  // What --repeat=auto reached, per permutation (up to 20 named, then counted by runs).
  void report_auto_repeats() {
    std::map<int, size_t> by_runs;
    size_t permutations = 0;
    for (const RunPlan& base : plan_.runs) {
      if (base.repeat != 0) continue;
      const int runs = auto_planned_.count(base.param_hash) ? auto_planned_[base.param_hash] : st_.repeat;
      ++by_runs[runs];
      if (++permutations <= 20) log() << "fanout:   " << base.session_stem << ": " << runs << " runs\n";
    }
    std::string text;
    for (auto& [runs, perms] : by_runs) text += (text.empty() ? "" : ", ") + std::to_string(perms) + " permutation(s) at " + std::to_string(runs) + " runs";
    log() << "fanout: --repeat=auto (precision +-" << st_.precision_pct << " %, at most " << st_.max_repeat << "): " << text;
    if (by_runs.count(st_.max_repeat)) log() << " (those at " << st_.max_repeat << " reached --max_repeat, perhaps before the precision)";
    log() << "\n";
  }

  // What the driver still reads of a run while the sweep goes on. Its job and its run.toml's metadata are made
  // again from its plan when needed (slot_job, slot_metadata), not held: a copy of each per slot (provenance,
  // parameters, steps) was 5 KiB a run, 537 MB while a 100,000-run sweep was laid out.
  struct Slot {
    const RunPlan* run;
    int attempt;  // its folder is named after its run and attempt (dir_of): a path held was 100 B a run
    int64_t created_wall_ns = 0;  // its run.toml's created time, kept as laid out
    size_t served = 0;            // a service: the runs it serves (its wall time covers them)
    // A dead driver's run followed again: its folder, and its run.toml as that driver wrote it.
    struct Adopted {
      fs::path dir;
      RunMetadata meta;
    };
    std::shared_ptr<const Adopted> adopted{};
    std::string job_id{};
    int64_t started_ns = 0;
    int64_t running_since_wall_ns = 0;
    int64_t queued_since_ns = 0;  // when --max_pending's clock started: submission, or the end of fanout's own holds
    int64_t unknown_since_ns = 0;  // first of an unbroken series of polls that could not say its state (0: none)
    JobState state = JobState::Pending;
    int group = -1;        // the shared-step group this slot belongs to (its service or one of its runs)
    bool service = false;  // the slot is the group's service
    bool ended = false;
    bool failed = false;   // ended without completing, and not retried
    bool stalled = false;  // cancelled by --stall_timeout: its end is recorded as TIMEOUT with that reason
    // What is said of it while the scheduler has it: made when first said, gone as it ends (every ended slot of a
    // 100,000-run sweep kept these three strings, 96 B a run).
    struct Notes {
      std::string waiting;        // why the scheduler keeps it pending, when it says
      std::string node_list;      // where it runs, as the scheduler said when it started
      std::string never_started;  // cancelled while pending (--max_pending, a fatal reason): recorded FAILED with this
    };
    std::unique_ptr<Notes> notes{};
    Notes& note() {
      if (!notes) notes = std::make_unique<Notes>();
      return *notes;
    }
    const std::string& waiting() const { return notes ? notes->waiting : nothing(); }
    const std::string& node_list() const { return notes ? notes->node_list : nothing(); }
    const std::string& never_started() const { return notes ? notes->never_started : nothing(); }
    static const std::string& nothing() {
      static const std::string none;
      return none;
    }
  };
  // A shared step's group: its service slot, started first; its runs start once the service has written
  // <dir>/ready, one at a time (as SmartSim-Scaling's inner loop: runs measured against one database must not
  // share it with each other), and the driver writes <dir>/stop when the last of them has ended (retries included).
  struct Group {
    size_t service;
    size_t runs_left = 0;
    bool ready = false;
    bool run_active = false;
  };
  // Whether a slot may be submitted now: a run of a group waits for its service to be ready, and is recorded
  // FAILED without running when the service ended first.
  enum class Gate { Go, Wait, Gone };

  std::ostream& log() { return progress_.event(); }

  // The sweep as the status line shows it: runs (retries included) apart from services; ETA from the rate at
  // which runs have ended so far (it holds for any parallelism, queueing included).
  SweepCounts counts() const {
    SweepCounts c;
    const Slot* oldest_pending = nullptr;
    for (const Slot& s : slots_) {
      if (s.service) {
        c.services_up += !s.job_id.empty() && !s.ended;
        continue;
      }
      ++c.runs;
      if (s.ended) c.done += 1, c.failed += s.failed;
      else if (s.state == JobState::Running) ++c.running;
      else {
        ++c.pending;
        if (!oldest_pending && !s.job_id.empty()) oldest_pending = &s;
      }
    }
    c.retried = size_t(outcome_.retries);
    c.elapsed_s = double(monotonic_ns() - t0_) / 1e9;
    // The rate at which runs ended so far, counted to the last end: time since then is spent on the next runs,
    // so the ETA falls between ends instead of growing with the elapsed time.
    if (c.done > 0) {
      const double to_last_s = double(last_done_ns_ - t0_) / 1e9, since_s = double(monotonic_ns() - last_done_ns_) / 1e9;
      c.eta_s = std::max(0.0, to_last_s / double(c.done) * double(c.runs - c.done) - since_s);
    }
    if (oldest_pending && !oldest_pending->waiting().empty())
      c.waiting = oldest_pending->run->session + " (job " + oldest_pending->job_id + "): " + oldest_pending->waiting();
    return c;
  }

  // A slot's folder: its run's session, and its attempt after a retry, under this sweep's run root; an adopted run's
  // is where the driver before laid it out.
  fs::path dir_of(const Slot& s) const {
    if (s.adopted) return s.adopted->dir;
    fs::path dir = outcome_.run_root / s.run->session;
    if (s.attempt > 0) dir += "-retry" + std::to_string(s.attempt);
    return dir;
  }

  JobSpec job(const RunPlan& r, const fs::path& dir) const { return job_for(plan_, r, plugin_, opts_, dir); }
  RunMetadata metadata(const RunPlan& r) const {
    const Plugin& own = r.plugin ? *r.plugin : plugin_;
    auto it = sweep_metadata_.find(&own);
    if (it == sweep_metadata_.end()) it = sweep_metadata_.emplace(&own, sweep_metadata(plan_, own, opts_, scheduler_->name())).first;
    return run_metadata(it->second, plan_, r);
  }

  bool open() {
    if (st_.exp_name.empty()) throw UserError("--exp_name: an experiment needs a name");
    outcome_.exp_dir = fs::absolute(st_.results_dir) / st_.exp_name;
    {
      // Before anything is written or submitted: can every run go where it is asked to, with what it asks for?
      refuse_unhonoured(plan_, scheduler_->name());
      // Checked in batches: a job per run held at once was 100 MB for 100,000 runs.
      std::vector<JobSpec> probe = service_jobs(plan_, plugin_, opts_, outcome_.exp_dir);
      std::optional<JobSpec> first;
      for (const auto& r : plan_.runs) {
        probe.push_back(job(r, outcome_.exp_dir / r.session));
        if (!first) first = probe.front();
        if (probe.size() >= 4096) scheduler_->check(probe), probe.clear();
      }
      if (!probe.empty() || !first) scheduler_->check(probe);
      if (!first && !probe.empty()) first = probe.front();
      // A script the scheduler refuses to write (a --step_launcher it cannot start steps with) is refused now.
      if (first) scheduler_->render_script(*first);
    }
    refuse_a_folder_fanout_did_not_make(outcome_.exp_dir);
    make_private_dirs(outcome_.exp_dir);
    // Drivers adding runs share the experiment; a resume needs it alone (it would run the others' pending
    // permutations again). Held until the session ends.
    lock_.emplace(outcome_.exp_dir, st_.resume);
    outcome_.database = outcome_.exp_dir / layout::kDatabase;
    db_.emplace(outcome_.database);
    db_->require_writable();
    // 16 MiB: what the driver stores is run after run, appended, and at 100,000 runs the 64 MiB default was most
    // of its memory (0.66 KiB a run); the CSV pass at the end reads through the kernel's cache either way.
    db_->cap_page_cache(16);
    // A batch job's outcome must survive this host: the scheduler forgets the job minutes after it ends. It is made
    // durable with the runs that ended in the same poll (one sync of the database's log a commit, not an fsync of
    // each run.toml: 12 % of the driver's CPU a run on Slurm).
    if (!jobs_end_with_this_host_) db_->sync_commits();
    refuse_another_revision();
    if (!st_.resume) {
      for (const auto& r : plan_.runs) todo_.push_back(&r);
      return true;
    }
    if (!resume()) {
      CsvFiles csv = write_csv();  // csv/ after every driver, also one that found nothing left to run
      log() << "fanout: samples  " << csv.samples.string() << " (" << csv.sample_rows << " rows)\n";
      return false;
    }
    return true;
  }


  // One experiment measures one revision of the code under test: runs added later (a resume, compare --until-decided,
  // a second driver) at another commit would mix two codes under one name, and history would read it as one point.
  void refuse_another_revision() {
    const std::string why = revision_conflict(plan_.revision, db_->provenance_values("revision"), db_->provenance_values("source_dirty"));
    if (!why.empty()) throw UserError(revision_refusal(st_, outcome_.exp_dir, why));
  }

  // The permutations without a COMPLETED run; a dead driver's live jobs are followed instead of resubmitted.
  bool resume() {
    size_t recovered = 0;
    std::vector<Straggler> live = recover_stragglers(outcome_.exp_dir, *db_, recovered);
    std::set<std::string> completed;
    for (auto& r : db_->runs())
      if (r.status == "COMPLETED") completed.insert(r.param_hash);
    std::map<std::string, const RunPlan*> by_hash;
    for (const auto& r : plan_.runs) by_hash[r.param_hash] = &r;
    std::set<std::string> followed;
    for (auto& sg : live) {
      if (sg.meta.service_provider) {
        // A shared step's service the dead driver left up: nothing will use it again (its runs get a new one).
        stop_service(sg.dir);
        continue;
      }
      auto it = by_hash.find(sg.meta.param_hash);
      if (it == by_hash.end() || completed.count(sg.meta.param_hash) || followed.count(sg.meta.param_hash)) continue;
      if (!scheduler_->adopt(sg.job_id, job(*it->second, sg.dir))) continue;
      followed.insert(sg.meta.param_hash);
      adopted_.emplace_back(it->second, std::move(sg));
    }
    for (const auto& r : plan_.runs)
      if (!completed.count(r.param_hash) && !followed.count(r.param_hash)) todo_.push_back(&r);
    log() << "fanout: resume: " << completed.size() << " of " << plan_.runs.size() << " permutation(s) already COMPLETED";
    if (recovered) log() << " (" << recovered << " run folder(s) that ended after the driver stopped ingested now)";
    if (!adopted_.empty()) log() << ", " << adopted_.size() << " still in the " << scheduler_->name() << " queue followed again";
    log() << "; running " << todo_.size() << "\n" << std::flush;  // before laying out what is left, which takes a while
    return !todo_.empty() || !adopted_.empty();
  }

  void queue() {
    if (!st_.resume || !fs::exists(outcome_.exp_dir / kCommandFile)) save_command(outcome_.exp_dir, opts_);
    outcome_.run_root = unique_run_root(outcome_.exp_dir);
    make_private_dirs(outcome_.run_root);
    for (auto& [r, sg] : adopted_) {
      Slot s{r, 0};
      if (auto a = parse_int(sg.meta.provenance["attempt"])) s.attempt = int(std::max<int64_t>(1, *a)) - 1;
      s.adopted = std::make_shared<const Slot::Adopted>(Slot::Adopted{std::move(sg.dir), std::move(sg.meta)});  // adopted_ is not read again
      s.job_id = sg.job_id;
      s.started_ns = monotonic_ns();
      slots_.push_back(std::move(s));
      active_[sg.job_id] = next_++;
    }
    enqueue(todo_);
    // Every folder on disk before any job can start. syncfs flushes what this host has written on that
    // filesystem (on a shared $HOME, this host's other writes too): once per experiment, not per run.
    sync_filesystem(outcome_.run_root);
    queued_ = true;
    outcome_.runs = slots_.size();
    log() << "fanout: " << slots_.size() << " run(s) of " << what_runs(plan_, plugin_) << " on launcher " << st_.scheduler;
    if (!groups_.empty()) log() << " (" << groups_.size() << " of them shared " << plan_.services[0].steps[0].role << " service(s))";
    log() << " -> " << outcome_.run_root.string() << "\n";
  }

  // Slots for runs in order; consecutive runs of one shared step get one service slot before them.
  void enqueue(const std::vector<const RunPlan*>& runs) {
    for (size_t i = 0; i < runs.size(); ++i) {
      // Laying out 100,000 folders takes a while: Ctrl-C stops it there (the rest get no folder; resume runs them).
      if (interrupt_requested()) {
        not_laid_out_ += runs.size() - i;
        return;
      }
      const RunPlan& r = *runs[i];
      if (r.service < 0) {
        add_slot(r, 0, -1);
        continue;
      }
      if (i == 0 || runs[i - 1]->service != r.service) {
        size_t n = 1;
        while (i + n < runs.size() && runs[i + n]->service == r.service) ++n;
        add_service(plan_.services[size_t(r.service)], n);
      }
      add_slot(r, 0, int(groups_.size()) - 1);
    }
  }

  // What a slot's job is: a service's covers the runs it serves (service_job_for), a run's is its plan's.
  JobSpec slot_job(const Slot& s) const {
    return s.service ? service_job_for(plan_, *s.run, s.served, plugin_, opts_, dir_of(s)) : job(*s.run, dir_of(s));
  }

  // A slot's run.toml without its status: its plan's metadata as this attempt in this folder.
  RunMetadata slot_metadata(const Slot& s) const {
    if (s.adopted) return s.adopted->meta;
    RunMetadata m = metadata(*s.run);
    const fs::path dir = dir_of(s);
    m.created_wall_ns = s.created_wall_ns;
    m.session = dir.filename().string();
    m.provenance["attempt"] = std::to_string(s.attempt + 1);
    if (s.service) {
      m.provenance["shared_step"] = s.run->steps[0].role;
      m.service_dir = dir.string();
      m.service_provider = true;
      m.walltime_s = slot_job(s).walltime_s;
    } else if (s.group >= 0) {
      m.service_dir = dir_of(slots_[groups_[size_t(s.group)].service]).string();
      m.provenance["service"] = fs::absolute(m.service_dir).lexically_normal().string();  // its runs.path
    }
    return m;
  }

  // A slot's folder: private, with its run.toml and job.sh.
  // Before the first submission every folder is laid out in place (nothing reads it before the one
  // sync_filesystem() for them all; a folder cut short by a crash has no [job], and resume runs its permutation
  // again); later ones (retries, --repeat=auto's rounds) each durable at once.
  void lay_out(Slot& s) {
    s.created_wall_ns = wall_ns();
    const fs::path dir = dir_of(s);
    make_private_dirs(dir);
    const std::string script = scheduler_->render_script(slot_job(s));
    if (queued_) {
      write_run_metadata(dir, slot_metadata(s));
      write_file_atomic(dir / layout::kJobScript, script, 0755);
    } else {
      write_new_file(dir / kRunMetadataFile, run_metadata_text(slot_metadata(s)));
      write_new_file(dir / layout::kJobScript, script, 0755);
    }
  }

  // A run's slot, last in order; or, for a retry of a group's run, next in order (its service is waiting for it).
  void add_slot(const RunPlan& r, int attempt, int group, size_t at = SIZE_MAX) {
    Slot s{&r, attempt};
    s.group = group;
    if (group >= 0) ++groups_[size_t(group)].runs_left;
    lay_out(s);
    if (at >= slots_.size()) {
      slots_.push_back(std::move(s));
      return;
    }
    slots_.insert(slots_.begin() + long(at), std::move(s));  // mostly slots not yet submitted move
    inserted_at_ = at;
    for (auto& g : groups_)
      if (g.service >= at) ++g.service;
    for (auto& [id, i] : active_)  // and those submitted ahead of a run the scheduler could not take then
      if (i >= at) ++i;
  }

  // The service of the group that `runs` (consecutive, same service) use.
  void add_service(const RunPlan& service, size_t runs) {
    Slot s{&service, 0};
    s.served = runs;
    s.service = true;
    s.group = int(groups_.size());
    groups_.push_back({slots_.size()});
    lay_out(s);
    slots_.push_back(std::move(s));
  }

  // A submitted run: tracked by its job id, which the folder of a job a resume can follow keeps (run.toml's [job],
  // appended: a file of its own was a new inode a run, 15-25 % of the driver's CPU on this VM's ext4). It reaches the
  // disk before the driver goes on, so that a resume after this host crashed adopts the job rather than runs it
  // twice. A job no resume follows (the local launcher's, the steps of an allocation fanout runs inside: a resume
  // runs them again) has its id written with its outcome ([status] job_id) and no [job] (4.5 % of the driver's CPU
  // a local run on 2026-12-06), unless it is a shared step's service, which a resume finds by its [job] to tell it
  // to stop (its ranks may outlive a driver killed outright).
  void track_submitted(size_t i, const std::string& id, Durability durability = Durability::Now) {
    if (slots_[i].group >= 0 && !slots_[i].service) groups_[size_t(slots_[i].group)].run_active = true;
    slots_[i].started_ns = slots_[i].queued_since_ns = monotonic_ns();
    slots_[i].job_id = id;
    if (scheduler_->adopts_jobs()) append_run_job(dir_of(slots_[i]), id, durability);
    else if (slots_[i].service) append_run_job(dir_of(slots_[i]), id, Durability::Deferred);
    slots_[i].state = JobState::Pending;
    active_[id] = i;
  }

  void set_state(Slot& s, JobState state) {
    if (state == JobState::Running && s.state != JobState::Running) s.running_since_wall_ns = wall_ns();
    s.state = state;
  }

  // The first ERROR a rank logged in the run (its <step>.err files), as "; first error: ..." for the run's reason,
  // so that a failure says why where it is reported, not only where its logs are.
  static std::string first_rank_error(const fs::path& dir) {
    std::string first_at, first;
    std::error_code ec;
    for (auto& e : fs::directory_iterator(dir, ec)) {
      if (e.path().extension() != ".err" || !e.is_regular_file(ec) || e.file_size(ec) > (size_t(64) << 20)) continue;
      std::ifstream in(e.path());
      for (std::string line; std::getline(in, line);) {
        // "[<time> <step>:<rank>] ERROR <message>"; "role 'x' returned N" only repeats that the rank failed.
        const size_t at = line.find("] ERROR ");
        if (line.empty() || line[0] != '[' || at == std::string::npos || line.find("] ERROR role '") == at) continue;
        if (first.empty() || line.substr(0, at) < first_at) first_at = line.substr(0, at), first = line.substr(at + 8);
        break;
      }
    }
    if (first.empty()) return "";
    return "; first error: " + printable(first.size() > 300 ? first.substr(0, 300) + "..." : first);
  }

  CsvFiles write_csv() {
    outcome_.csv_dir = outcome_.exp_dir / layout::kCsvDir;
    // The pass reads each table in order and none again soon, through the kernel's cache: the 16 MiB of pages kept
    // for storing go (its peak was the sweep's, 14 MiB of 125 at 100,000 runs).
    db_->cap_page_cache(2);
    return export_csv(*db_, outcome_.csv_dir);
  }

  // The scheduler's accounting of the job, as samples in its folder (ingested with the ranks'); why there is none,
  // once per sweep.
  void record_scheduler_usage(const Slot& s, const JobStatus& js) {
    if (!js.usage_note.empty() && usage_notes_.insert(js.usage_note).second) log() << "fanout: " << js.usage_note << "\n";
    try {
      write_scheduler_usage(dir_of(s), js);
    } catch (const std::exception& e) {  // UserError, or the filesystem's own
      log() << "fanout: " << dir_of(s).filename().string() << ": the scheduler's accounting was not stored: " << e.what() << "\n";
    }
  }

  // A slot's end: its status in its folder and the database, progress, a retry or its group's service stopped.
  // Announced: its line now and, when it did not complete, in the recap (an interrupt's runs never started are
  // counted in one line instead: 59,040 of them were as many lines, twice, for a 100,000-run sweep).
  void finish(Slot& s, JobStatus js, bool announced = true) {
    const fs::path dir = dir_of(s);  // `s` may move below (a retry is inserted)
    if (!s.never_started().empty() && js.state != JobState::Completed) {
      js.state = JobState::Failed;
      js.reason = s.never_started();
    }
    if (s.stalled && js.state != JobState::Completed) {
      js.state = JobState::Timeout;
      js.reason = "no rank recorded a sample for " + std::to_string(st_.stall_timeout_s) + " s (--stall_timeout): stopped; logs: " +
                  dir.string();
    }
    if (js.state != JobState::Completed) js.reason += first_rank_error(dir);
    set_state(s, js.state);
    s.ended = true;
    if (s.service && !s.job_id.empty()) --active_services_;
    else if (s.group >= 0) groups_[size_t(s.group)].run_active = false;
    RunMetadata meta = slot_metadata(s);
    meta.status = status_record(js, s.run->steps);
    // The outcome reaches the disk with the batch it is stored in (committed, and synced for a batch scheduler's
    // jobs, before the driver sleeps: drive()), not with its own fsync: a host that crashes before that leaves the run
    // with its [job], which `fanout resume` follows while the scheduler still knows the job (else runs it again).
    // On this host's launcher the ranks' sample files are never synced either; a driver that dies leaves the
    // write to the kernel. The fsync was 18 % of the driver's CPU a local run (2026-12-02), 12 % a Slurm run.
    // A followed job's run.toml is written whole: a status its dead driver began to append and never closed (read
    // as no status) would stand before the one appended now, and the file would no longer parse.
    // Written aside and renamed over the old file: synced, or a crash could leave it empty, its [job] with it.
    if (s.adopted) write_run_metadata(dir, meta, jobs_end_with_this_host_ ? Durability::Deferred : Durability::Now);
    else append_run_status(dir, *meta.status, Durability::Deferred);
    if (st_.resources) record_scheduler_usage(s, js);
    IngestReport report;
    timed(cost_.ingest_s, [&] {
      if (!db_->in_batch()) {
        db_->begin_batch();
        batch_since_ns_ = monotonic_ns();
      }
      keep_outcomes_on_failure([&] { report = db_->ingest_run(dir, std::move(meta)); });  // as written: not read back
    });
    ++done_;
    last_done_ns_ = monotonic_ns();
    // A service is not retried; the runs of its group are, next in order and against the same service, while
    // it is up (its wall time allows for their retries).
    const bool service_gone = s.group >= 0 && !s.service && slots_[groups_[size_t(s.group)].service].ended;
    const bool retry = !s.service && !service_gone && worth_a_retry(js.state) && s.attempt < st_.max_retries && !cancelling_ &&
                       s.never_started().empty();  // it would wait again on what stopped it
    if (js.state == JobState::Completed) ++outcome_.completed;
    else if (!retry) ++outcome_.failed, s.failed = true;
    const double dur = double(monotonic_ns() - s.started_ns) / 1e9;
    const std::string name = s.service ? s.run->steps[0].role + " service " + s.run->session : dir.filename().string();
    const std::string nodes = !js.node_list.empty() ? js.node_list : s.node_list();
    // One write (stderr is unbuffered: a write per piece was 5 % of the driver's CPU a run).
    std::string line = "fanout: " + name + " " + job_state_name(js.state) + " in " + format_duration(dur) + ", " +
                       std::to_string(report.samples) + " samples (job " + s.job_id + (nodes.empty() ? "" : " on " + nodes) + ")";
    if (js.state != JobState::Completed) line += " -- " + js.reason;
    if (announced) log() << line + "\n";
    if (js.state != JobState::Completed && announced) {
      // Its reason was printed above as it ended: the recap names it and where its logs are, once.
      failures_.push_back(name + " " + job_state_name(js.state) + (retry ? " (retried)" : "") + "; logs: " + dir.string());
    }
    for (auto& w : report.warnings) log() << "  warning: " << w << "\n";
    s.notes.reset();
    const int group = s.group;  // `s` may move below: a group's retry is inserted ahead of the slots not yet submitted
    const bool run_of_group = group >= 0 && !s.service;
    if (retry) {
      log() << "fanout: retrying " << s.run->session << " (attempt " << s.attempt + 2 << " of " << st_.max_retries + 1 << ")\n";
      if (run_of_group) add_slot(*s.run, s.attempt + 1, group, next_);
      else add_slot(*s.run, s.attempt + 1, -1);
      ++outcome_.retries;
    }
    if (run_of_group && --groups_[size_t(group)].runs_left == 0) {
      // The group's last run has ended: its service may stop (rank runners watch for this file).
      stop_service(dir_of(slots_[groups_[size_t(group)].service]));
    }
  }

  Gate gate(size_t i) {
    const Slot& s = slots_[i];
    if (s.group < 0 || s.service) return Gate::Go;
    Group& g = groups_[size_t(s.group)];
    const Slot& service = slots_[g.service];
    if (!g.ready && fs::exists(dir_of(service) / layout::kServiceReady)) g.ready = true;
    if (service.ended) return Gate::Gone;
    return g.ready && !g.run_active ? Gate::Go : Gate::Wait;
  }

  // The gate of the next slot in order, after recording the runs whose service is gone.
  Gate next_gate() {
    for (; next_ < slots_.size(); ++next_) {
      if (slots_[next_].started_ns) continue;  // submitted ahead of a run the scheduler could not take then
      Gate g = gate(next_);
      if (g != Gate::Gone) return g;
      const Slot& service = slots_[groups_[size_t(slots_[next_].group)].service];
      JobStatus js;
      js.state = JobState::Failed;
      js.reason = "not started: its shared " + service.run->steps[0].role + " service " + dir_of(service).filename().string() + " ended (" +
                  job_state_name(service.state) + "); logs: " + dir_of(service).string();
      slots_[next_].started_ns = monotonic_ns();
      finish(slots_[next_], js);
    }
    return Gate::Wait;
  }

  bool interrupt_requested() const { return opts_.interrupt && *opts_.interrupt; }

  void interrupt() {
    cancelling_ = true;
    const auto not_started = std::count_if(slots_.begin() + long(next_), slots_.end(), [](const Slot& s) { return !s.started_ns; });
    log() << "fanout: interrupted: cancelling " << active_.size() << " running job(s); " << not_started << " run(s) not started";
    if (not_laid_out_) log() << ", " << not_laid_out_ << " more not laid out (no folder; `fanout resume` runs them)";
    log() << "\n" << std::flush;  // seen before the cancels, which can take a while (and a second Ctrl-C ends at once)
    std::vector<std::string> ids;
    for (auto& [id, i] : active_) ids.push_back(id);
    scheduler_->cancel(ids);
    // Runs never started are recorded as CANCELLED so that the folder and database say what happened.
    const std::string why = "not started: the experiment was interrupted";
    for (; next_ < slots_.size(); ++next_) {
      if (slots_[next_].started_ns) continue;  // submitted ahead: cancelled above
      JobStatus js;
      js.state = JobState::Cancelled;
      js.reason = why;
      slots_[next_].started_ns = monotonic_ns();
      finish(slots_[next_], js, false);
      ++not_started_recorded_;
    }
    if (not_started_recorded_)
      log() << "fanout: " << not_started_recorded_ << " run(s) not started recorded CANCELLED (\"" << why << "\")\n";
  }

  // In order: a service is submitted when its turn comes (it does not count against --max_parallel); runs one by
  // one up to --max_parallel, or with --array every run that may go, in as few submissions as the scheduler can
  // make (arrays per resource shape); never more of the sweep's jobs at once than --max_submitted (or what the
  // scheduler takes). True when anything was submitted.
  bool submit_ready() {
    bool changed = false, arrays_submitted = false;
    // The arrays' job ids (Durability::Deferred) reach the disk with one sync for every call of this round (nothing
    // polls in between), also when a later call throws: a resume follows what was queued.
    struct SyncArrayIds {
      const bool& any;
      const fs::path& root;
      ~SyncArrayIds() {
        if (any) sync_filesystem(root);
      }
    } sync_ids{arrays_submitted, outcome_.run_root};
    grow_limit_window();
    while (!cancelling_ && next_gate() == Gate::Go && monotonic_ns() >= submit_again_ns_) {
      const size_t runs_active = active_.size() - active_services_, max_submitted = submission_window();
      if (slots_[next_].service) {
        std::string id;
        timed(cost_.submit_s, [&] { id = scheduler_->submit(slot_job(slots_[next_])); });
        ++active_services_;
        log() << "fanout: submitted " << slots_[next_].run->steps[0].role << " service " << slots_[next_].run->session << " (job " << id << ")\n";
        track_submitted(next_++, id);
      } else if (runs_active >= max_submitted) {
        break;
      } else if (st_.array) {
        // Room for a whole call's runs, or a quarter of the window, or what is left, whichever is least: a sweep
        // bigger than the window goes as arrays of that size as its runs end, not as an array of a few every poll.
        const size_t room = max_submitted - runs_active, left = slots_.size() - next_;
        if (room < std::min({std::max<size_t>(1, max_submitted / 4), kArraySubmission, left})) break;
        // At most kArraySubmission runs a call: their JobSpecs are made for it at once (50,000 of them were most of a
        // 100,000-run sweep's peak memory); the loop goes on with the next.
        const std::vector<size_t> go = slots_that_may_go(std::min(room, kArraySubmission));
        std::vector<JobSpec> jobs;
        for (size_t i : go) jobs.push_back(slot_job(slots_[i]));
        std::vector<Scheduler::Submitted> got;
        timed(cost_.submit_s, [&] { got = scheduler_->submit_array(jobs, st_.max_parallel); });
        const std::string from = slots_[go.front()].run->session;
        const Submission taken = take_submitted(go, got, Durability::Deferred, true);
        if (taken.ids)
          log() << "fanout: submitted " << taken.ids << " run(s) from " << from << " as job(s) " << taken.first_id
                << (taken.ids > 1 ? " .. " + taken.last_id : "") << "\n";
        arrays_submitted |= taken.ids > 0;
        if (taken.later) break;
      } else if (runs_active < size_t(max_parallel_)) {
        if (submit_runs_together(std::min(size_t(max_parallel_), max_submitted) - runs_active).later) break;
      } else {
        break;
      }
      changed = true;
    }
    if (next_ == slots_.size() && cost_.cpu_submitted_s < 0) cost_.cpu_submitted_s = process_cpu_s();
    return changed;
  }

  // The runs from next_ that may start now (at most `limit`): runs, not services, whose gate is open, not submitted
  // yet (an array or a submission the scheduler took in part leaves some behind), and one run of each group (a
  // group's runs go one at a time).
  std::vector<size_t> slots_that_may_go(size_t limit) {
    std::vector<size_t> go;
    std::set<int> groups_taken;
    for (size_t i = next_; i < slots_.size() && go.size() < limit && !slots_[i].service; ++i) {
      if (slots_[i].started_ns) continue;
      if (gate(i) != Gate::Go || (slots_[i].group >= 0 && !groups_taken.insert(slots_[i].group).second)) break;
      go.push_back(i);
    }
    return go;
  }

  // What a submission did with the slots `go`, in order: each submitted one is followed, each refused one recorded
  // FAILED with the scheduler's words, and the ones the scheduler could not take now (its controller full) wait for
  // a later call, once earlier runs end; said once a wait. next_ moves past the slots handled. A refusal by a limit
  // that may count the sweep's own queued jobs (own_limit) narrows the submission window instead (learn_limit).
  struct Submission {
    size_t ids = 0, later = 0;
    std::string first_id, last_id;
  };
  Submission take_submitted(std::vector<size_t> go, const std::vector<Scheduler::Submitted>& got, Durability durability, bool as_array) {
    Submission taken;
    std::string why;
    std::vector<size_t> refused, over_limit;
    for (size_t k = 0; k < got.size() && k < go.size(); ++k) {
      if (!got[k].id.empty()) {
        // One line per run, at its end (job and nodes with it); its submission and start only with --verbose.
        if (st_.verbose && !st_.array) log() << "fanout: submitted " << dir_of(slots_[go[k]]).filename().string() << " (job " << got[k].id << ")\n";
        track_submitted(go[k], got[k].id, durability);
        queued_peak_ = std::max(queued_peak_, active_.size() - active_services_);
        if (!taken.ids++) taken.first_id = got[k].id;
        taken.last_id = got[k].id;
      } else if (got[k].own_limit) {
        over_limit.push_back(k);
      } else if (got[k].later) {
        if (!taken.later++ && got[k].error) why = refusal_text(got[k].error);
      } else if (got[k].error) {
        refused.push_back(k);
      }
    }
    if (!over_limit.empty() && !learn_limit(over_limit.size(), as_array, refusal_text(got[over_limit.front()].error))) {
      refused.insert(refused.end(), over_limit.begin(), over_limit.end());
      std::sort(refused.begin(), refused.end());
    }
    // Last, as recording one can insert its retry ahead of the slots not yet submitted (a group's run): the slots
    // after that place move one on.
    for (size_t r = 0; r < refused.size(); ++r) {
      inserted_at_ = SIZE_MAX;
      record_refused(slots_[go[refused[r]]], got[refused[r]].error);
      for (size_t later = r + 1; later < refused.size() && inserted_at_ != SIZE_MAX; ++later)
        if (go[refused[later]] >= inserted_at_) ++go[refused[later]];
    }
    while (next_ < slots_.size() && slots_[next_].started_ns) ++next_;
    if (taken.later) {
      // Asked again in a few seconds (the window of --max_submitted keeps this for a controller other users fill).
      submit_again_ns_ = monotonic_ns() + kSubmitAgainNs;
      if (!waiting_for_room_)
        log() << "fanout: " << (why.empty() ? std::string("the scheduler takes no more jobs now") : why) << ": " << taken.later
              << " run(s) wait to be submitted as earlier ones end\n";
      waiting_for_room_ = true;
    } else if (taken.ids) {
      waiting_for_room_ = false;
    }
    return taken;
  }
  static constexpr int64_t kSubmitAgainNs = 5'000'000'000;
  static constexpr size_t kArraySubmission = 4096;

  // A limit on queued jobs refused `refused` runs (Submitted::own_limit: Slurm's MaxSubmitJobs and the like, which
  // count the user's queued jobs). With some of the sweep's runs queued, the window becomes what the limit took (the
  // most queued since its last refusal, or now), and the rest go as those end: a 100,000-run sweep under a site's
  // MaxSubmitJobs of 1,000 recorded 99,000 runs FAILED before. With none queued, an array is halved and offered
  // again, and a single job's refusal is final. False: record them refused.
  bool learn_limit(size_t refused, bool as_array, const std::string& why) {
    const size_t queued = active_.size() - active_services_;
    if (!queued && !(as_array && refused > 1)) return false;
    limit_window_ = queued ? std::max(queued, queued_peak_) : refused / 2;
    queued_peak_ = 0;
    limit_grow_ns_ = monotonic_ns() + kSubmitAgainNs;
    if (!queued)
      log() << "fanout: " << why << ": offered again as an array of at most " << limit_window_ << " run(s)\n";
    else if (!limit_said_ || st_.verbose)
      log() << "fanout: " << why << ": at most " << limit_window_ << " of the sweep's runs are kept submitted, the rest submitted as "
            << "earlier ones end (" << refused << " wait now)\n";
    limit_said_ |= queued > 0;
    return true;
  }

  // Runs of the sweep submitted at once at most: --max_submitted (or what the scheduler takes), or less while a limit
  // (learn_limit) holds. That window grows every 5 s without a refusal, as others' jobs may have ended: by a quarter
  // with --array (one request tries it), else by one (each run tried is a request, and a refused one a line libslurm
  // prints: a quarter of a window of 1,000 was 250 of each every 5 s).
  size_t submission_window() const { return std::min(max_submitted_, limit_window_); }
  void grow_limit_window() {
    if (limit_window_ == SIZE_MAX || monotonic_ns() < limit_grow_ns_) return;
    limit_window_ += st_.array ? std::max<size_t>(1, limit_window_ / 4) : 1;
    limit_grow_ns_ = monotonic_ns() + kSubmitAgainNs;
    if (limit_window_ >= max_submitted_) limit_window_ = SIZE_MAX;
  }

  // The runs that may start now, from next_, submitted together (Scheduler::submit_each: Slurm overlaps the
  // controller's requests), at most kSubmitTogether at a time so that a sweep's first call does not hold every
  // run's job at once. A run the scheduler refuses (UserError: more memory than a node has, a program that cannot
  // start) is recorded FAILED with the refusal and the sweep goes on, as a job pending on a reason no wait cures:
  // stopping the sweep there left the runs submitted before it queued with no driver to record them.
  static constexpr size_t kSubmitTogether = 64;
  Submission submit_runs_together(size_t room) {
    const std::vector<size_t> go = slots_that_may_go(std::min(room, kSubmitTogether));
    std::vector<JobSpec> jobs;
    for (size_t i : go) jobs.push_back(slot_job(slots_[i]));
    std::vector<Scheduler::Submitted> got;
    timed(cost_.submit_s, [&] { got = scheduler_->submit_each(jobs); });
    return take_submitted(go, got, Durability::Now, false);
  }

  // A run whose submission was refused: FAILED with the scheduler's words. Anything but a refusal propagates.
  void record_refused(Slot& slot, const std::exception_ptr& error) {
    JobStatus js;
    js.state = JobState::Failed;
    js.reason = "not submitted: " + refusal_text(error);
    slot.started_ns = monotonic_ns();
    finish(slot, js);
  }

  static std::string refusal_text(const std::exception_ptr& error) {
    try {
      std::rethrow_exception(error);
    } catch (const UserError& e) {
      return e.what();
    }
  }

  // One scheduler query for every active job. True when any job changed state.
  bool poll_once() {
    bool changed = false;
    std::vector<JobStatus> states;
    const double before = cost_.poll_s;
    // Timed with the query: asking for every active job costs the driver time that grows with them (a queued
    // 100,000-task array), and back_off keeps the polls four times that apart.
    timed(cost_.poll_s, [&] {
      std::vector<std::string> ids;
      ids.reserve(active_.size());
      for (auto& [id, i] : active_) ids.push_back(id);
      states = scheduler_->poll(ids);
    });
    cost_.last_poll_s = cost_.poll_s - before;
    ++cost_.polls;
    std::vector<std::string> ended;  // seen final here: the scheduler need not answer for them again
    // A scheduler may leave out a job whose state is as it was (scheduler.h): a job's time without a known state
    // counts from its first Unknown after the last poll that answered for every job it reported.
    const bool any_unknown = std::any_of(states.begin(), states.end(), [](const JobStatus& js) { return js.state == JobState::Unknown; });
    for (const auto& js : states) {
      // A scheduler that cannot say a job's state (its queries fail) is asked again, for a bounded time: then the
      // run is recorded FAILED, saying so, rather than waited on for ever.
      if (js.state == JobState::Unknown) {
        auto& slot = slots_[active_.at(js.job_id)];
        const int64_t now = monotonic_ns();
        if (!slot.unknown_since_ns || slot.unknown_since_ns < known_since_ns_) slot.unknown_since_ns = now;
        if (now - slot.unknown_since_ns < st_.unknown_timeout_s * 1000000000) continue;
        JobStatus lost = js;
        lost.state = JobState::Failed;
        lost.reason = "the scheduler could not say the state of job " + js.job_id + " for " + std::to_string(st_.unknown_timeout_s) +
                      " s (its queries failed; --unknown_timeout): recorded FAILED, cancelled if it still runs; logs: " + dir_of(slot).string();
        scheduler_->cancel({js.job_id});
        active_.erase(js.job_id);
        slot.note().never_started = lost.reason;  // not retried: the first copy may still run where the scheduler cannot see
        finish(slot, lost);
        ended.push_back(js.job_id);
        changed = true;
        continue;
      }
      slots_[active_.at(js.job_id)].unknown_since_ns = 0;
      if (!job_state_final(js.state)) {
        if (js.state == JobState::Running || js.state == JobState::Pending) {
          auto& slot = slots_[active_.at(js.job_id)];
          if (js.state == JobState::Running && slot.state != JobState::Running) {
            if (js.node_list != slot.node_list()) slot.note().node_list = js.node_list;
            if (st_.verbose)
              log() << "fanout: " << dir_of(slot).filename().string() << " running (job " << js.job_id << ")"
                    << (js.node_list.empty() ? "" : " on " + js.node_list) << "\n";
          }
          changed |= slot.state != js.state;
          const std::string& waiting = js.state == JobState::Pending ? js.reason : Slot::nothing();  // no copy each poll
          if (waiting != slot.waiting()) slot.note().waiting = waiting;
          set_state(slot, js.state);
        }
        continue;
      }
      size_t slot = active_.at(js.job_id);
      active_.erase(js.job_id);
      finish(slots_[slot], js);
      ended.push_back(js.job_id);
      changed = true;
    }
    if (!ended.empty()) scheduler_->forget(ended);
    if (!any_unknown) known_since_ns_ = monotonic_ns();
    return changed;
  }

  void check_stalls() {
    if (st_.stall_timeout_s <= 0 || cancelling_ || monotonic_ns() - last_stall_check_ns_ <= 1000000000) return;
    last_stall_check_ns_ = monotonic_ns();
    std::vector<std::string> stalled;
    for (auto& [id, i] : active_) {
      Slot& s = slots_[i];
      if (s.state != JobState::Running || s.stalled || s.service) continue;  // a service records nothing while it serves
      const int64_t last = std::max(s.running_since_wall_ns, newest_sample_write_ns(dir_of(s)));
      if (wall_ns() - last < st_.stall_timeout_s * 1000000000) continue;
      s.stalled = true;
      stalled.push_back(id);
      log() << "fanout: " << s.run->session << ": no sample from any rank for " << st_.stall_timeout_s << " s: stopping it\n";
    }
    if (!stalled.empty()) scheduler_->cancel(stalled);
  }

  // A job that waits on a reason no wait will cure (a partition down, an invalid QOS ...), or longer than
  // --max_pending, is cancelled and recorded FAILED with the scheduler's reason; the sweep goes on.
  void check_pending() {
    // Once a second at most, as check_stalls: a pass over every active job, and its limits are in seconds.
    const int64_t now = monotonic_ns();
    if (cancelling_ || now - last_pending_check_ns_ < 1000000000) return;
    last_pending_check_ns_ = now;
    std::vector<std::string> hopeless;
    for (auto& [id, i] : active_) {
      Slot& s = slots_[i];
      if (s.state != JobState::Pending || !s.never_started().empty()) continue;
      // A queued array task has no reason of its own: only --max_pending can end its wait (a big array queues
      // thousands of them, and this runs every poll).
      if (s.waiting().empty() && st_.max_pending_s <= 0) continue;
      // Waits fanout itself asked for (an array's throttle, a dependency) are not the queue's: the clock restarts.
      for (const char* own : {"JobArrayTaskLimit", "Dependency", "BeginTime"})
        if (starts_with(s.waiting(), own)) s.queued_since_ns = now;
      const bool fatal = std::any_of(st_.fatal_pending.begin(), st_.fatal_pending.end(),
                                     [&](const std::string& f) { return !f.empty() && starts_with(s.waiting(), f); });
      const double waited = double(now - s.queued_since_ns) / 1e9;
      if (!fatal && (st_.max_pending_s <= 0 || waited < double(st_.max_pending_s))) continue;
      s.note().never_started = "never started: pending " + std::string(fatal ? "on '" + s.waiting() + "', which --fatal_pending lists" :
                                                                   "for " + std::to_string(st_.max_pending_s) + " s (--max_pending)" +
                                                                       (s.waiting().empty() ? "" : ", last reason '" + s.waiting() + "'")) +
                        "; job " + id + " cancelled";
      log() << "fanout: " << s.run->session << ": " << s.never_started() << "\n";
      hopeless.push_back(id);
    }
    if (!hopeless.empty()) scheduler_->cancel(hopeless);
  }

  // Poll fast while things change, back off toward the scheduler's maximum while they do not. Never faster than
  // four times the last query took: a controller slow to answer (a thousand jobs, busy cores) is not asked again
  // at once, which keeps the queries under a fifth of the driver's and the controller's time.
  void back_off(bool changed) {
    const double floor = std::min(std::max(0.005, 4 * cost_.last_poll_s), scheduler_->max_poll_interval_s());
    interval_ = changed ? floor : std::clamp(interval_ * 1.5, floor, scheduler_->max_poll_interval_s());
    if (!log_.flush()) log_.clear();  // a log that took nothing this time may take the next lines
    if (done_ < slots_.size()) std::this_thread::sleep_for(std::chrono::duration<double>(interval_));
  }

  void report(size_t slots) {
    double csv_s = 0;
    CsvFiles csv;
    timed(csv_s, [&] { csv = write_csv(); });
    double wall = double(monotonic_ns() - t0_) / 1e9;
    log() << "fanout: " << outcome_.completed << "/" << outcome_.runs << " run(s) COMPLETED";
    if (outcome_.failed) {
      const bool listed = !failures_.empty();  // attempts; the runs never started are counted, not listed
      log() << ", " << outcome_.failed << " did not ("
            << (not_started_recorded_ ? std::to_string(not_started_recorded_) + " never started" + (listed ? ", the others listed below" : "")
                                      : "listed below")
            << ")";
    }
    log() << " in " << format_duration(wall) << "\n";
    if (!failures_.empty()) {
      log() << "fanout: " << failures_.size() << " attempt(s) did not complete (why: each one's line above, and its logs):\n";
      for (auto& f : failures_) log() << "  " << f << "\n";
    }
    log() << "fanout: results  " << outcome_.database.string() << "\n"
         << "fanout: samples  " << csv.samples.string() << " (" << csv.sample_rows << " rows)\n"
         << "fanout: stats    " << csv.statistics.string() << " (" << csv.statistic_rows << " rows), " << csv.runs.string() << "\n"
         << "fanout: runs     " << outcome_.run_root.string() << "\n";
    const std::string exp_dir = shell_quote(outcome_.database.parent_path().string());
    if (cancelling_ || outcome_.failed) log() << "fanout: next:    fanout resume " << exp_dir << "   # runs again what did not complete\n";
    else log() << "fanout: next:    fanout process_scaling_results " << exp_dir << "   # plots and an HTML report\n";
    if (!st_.verbose) return;
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    // "n/a" when not every run was submitted (interrupted, cancelled): no figure rather than a wrong one.
    char submitted[32] = "n/a";
    if (cost_.cpu_submitted_s >= 0) std::snprintf(submitted, sizeof submitted, "%.3f", cost_.cpu_submitted_s);
    char line[360];
    std::snprintf(line, sizeof line,
                  "fanout: driver   %zu runs: submit %.3f s, %llu polls %.3f s (%llu scheduler queries), ingest %.3f s, csv %.3f s, "
                  "cpu %.3f s (until all submitted %s s), peak memory %.1f MiB\n",
                  slots, cost_.submit_s, (unsigned long long)cost_.polls, cost_.poll_s, (unsigned long long)scheduler_->queries(),
                  cost_.ingest_s, csv_s, process_cpu_s(), submitted, double(ru.ru_maxrss) / 1024);
    log() << line;
  }

  const ExperimentPlan& plan_;
  const Plugin& plugin_;
  const RunnerOptions& opts_;
  const ExperimentSettings& st_;
  mutable std::map<const Plugin*, RunMetadata> sweep_metadata_;  // what its runs share, per plugin (metadata())
  // What the driver tells its user, held and written once a poll cycle (lines of a sweep of short runs were three
  // write(2) calls a run); written at once before the driver sleeps.
  HeldLines stderr_lines_{STDERR_FILENO};
  std::ostream& log_;
  ProgressDisplay progress_;
  std::unique_ptr<Scheduler> scheduler_;  // destroyed last: the members below may refer to its jobs
  const bool jobs_end_with_this_host_;  // its ranks run here (local): a job id need not reach the disk at once
  ExperimentOutcome outcome_;
  std::optional<DriverLock> lock_;  // released after the database is closed
  std::optional<ResultsDb> db_;
  std::vector<const RunPlan*> todo_;
  std::deque<RunPlan> auto_extra_;          // --repeat=auto's further runs (slots point at them)
  std::map<std::string, int> auto_planned_;  // --repeat=auto: runs planned per permutation (by its repeat 0's hash)
  std::vector<std::pair<const RunPlan*, Straggler>> adopted_;  // jobs of a dead driver, followed instead of resubmitted
  std::deque<Slot> slots_;  // a retry is inserted while others are referenced: a deque keeps them in place
  std::vector<Group> groups_;
  size_t next_ = 0, done_ = 0, active_services_ = 0;
  int64_t last_done_ns_ = 0;  // monotonic time of the last run's end (for the ETA)
  // Runs ending within a second of the first are stored in one transaction (ResultsDb::begin_batch): a commit per
  // run wrote about ten 32 KiB pages for each, most of the driver's time at a sweep of short runs. A driver that
  // dies first loses nothing: a resume stores the run folders the database does not know. The same second as
  // `fanout results ingest` commits after (IngestBatch).
  static constexpr int64_t kBatchNs = int64_t(IngestBatch{}.seconds * 1e9);
  int64_t batch_since_ns_ = 0;
  std::map<std::string, size_t> active_;  // job id -> slot
  DriverCost cost_;
  int64_t t0_ = 0;
  int max_parallel_ = 1;
  size_t max_submitted_ = SIZE_MAX;  // --max_submitted, or what the scheduler takes
  int64_t submit_again_ns_ = 0;      // the scheduler took no more jobs: not asked again before this
  bool waiting_for_room_ = false;    // said so, once for the wait
  size_t limit_window_ = SIZE_MAX;   // what a limit on the user's queued jobs took at its last refusal (learn_limit)
  int64_t limit_grow_ns_ = 0;        // the window grows again from then
  size_t queued_peak_ = 0;           // the most of the sweep's runs queued since the limit's last refusal
  bool limit_said_ = false;
  size_t inserted_at_ = SIZE_MAX;    // where add_slot last inserted a slot ahead of others
  double interval_ = 0.005;
  int64_t known_since_ns_ = 0;  // when the last poll answered with no Unknown state
  bool queued_ = false;  // every run folder of the plan is laid out (later ones, retries, are written durably)
  bool cancelling_ = false;
  size_t not_laid_out_ = 0;  // planned runs an interrupt left without a folder
  int64_t last_stall_check_ns_ = 0, last_pending_check_ns_ = 0;
  std::set<std::string> usage_notes_;  // the schedulers' reasons for no accounting, each said once
  std::vector<std::string> failures_;  // every attempt that did not complete, for the recap at the end
  size_t not_started_recorded_ = 0;      // runs an interrupt recorded CANCELLED before they started: counted, not listed
};

}  // namespace

void refuse_a_folder_fanout_did_not_make(const fs::path& dir) {
  std::error_code ec;
  auto marked_ours = [&] { return fs::exists(dir / layout::kDatabase, ec) || fs::exists(dir / layout::kDriverLock, ec); };
  if (!fs::exists(dir, ec) || marked_ours()) return;
  if (fs::is_directory(dir, ec)) {
    bool only_ours = true;  // empty, or holding only what [build] wrote before the first run (its log, written aside)
    for (auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      only_ours = only_ours && (name == layout::kBuildLog || name.rfind(std::string(layout::kBuildLog) + ".tmp.", 0) == 0);
    }
    // Asked again after the listing: a driver starting beside this one may have made the folder after the first
    // question, and the lock is the first thing it puts in it, so whatever else of its own was listed, the lock is
    // there by now.
    if (only_ours || marked_ours()) return;
  }
  throw UserError(dir.string() + " exists and is no fanout experiment (it has no " + layout::kDatabase +
                  "): fanout writes only into folders it made; choose another --exp_name or --results_dir");
}

ExperimentOutcome run_experiment(const ExperimentPlan& plan, const Plugin& plugin, const RunnerOptions& opts) {
  return ExperimentSession(plan, plugin, opts).run();
}

}  // namespace fanout
