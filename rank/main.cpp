// fanout-rank: the one executable every launcher starts for every rank. It loads the plugin, learns where
// it runs, offers the plugin the host ops (parameters, samples, rendezvous, log, stop flag), runs the role
// and leaves its samples in <run>/samples/.
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <thread>

#include <sys/resource.h>
#include "common/clock.h"
#include "common/error.h"
#include "common/files.h"
#include "common/gpus.h"
#include "common/text.h"
#include "rendezvous/kv_service.h"
#include "host/abi_v3.h"
#include "host/plugin_loader.h"
#include "rendezvous/place.h"
#include "rendezvous/pmix.h"
#include "rendezvous/rendezvous.h"
#include "results/run_folder.h"
#include "plugins/sdk/fanout_nvml.hpp"
#include "plugins/sdk/fanout_process.hpp"
#include "plugins/sdk/fanout_resources.hpp"
#include "plugins/sdk/fanout_counters.hpp"
#include "results/sample_file.h"
#include "results/layout.h"

namespace {

// Set by a stop signal and by the orphan watch's thread: a lock-free atomic, safe in a handler and across threads.
std::atomic<int> g_stop{0};
static_assert(std::atomic<int>::is_always_lock_free);
void on_stop_signal(int) { g_stop = 1; }

// A rank never outlives what started it (the job script, mpirun, slurmstepd). Grid Engine ends a job at h_rt or
// qdel by SIGKILL to the job script's process group, and Open MPI starts its ranks in process groups of their own:
// such ranks ran on as orphans (a hanging role forever). When the parent ends, the role is told to stop as by
// SIGTERM (exec stops its program's group), and a role that has not returned kOrphanGraceS later ends here: longer
// than exec's own 10 s between SIGTERM and SIGKILL to its program's group, so that a program that ignores SIGTERM is
// killed by exec before its rank goes.
constexpr int kOrphanGraceS = 15;
void stop_when_orphaned() {
  // Without a pidfd (a kernel before 5.3) there is no watch: the launcher's own kill still applies.
  fanout_sdk::when_parent_ends([] {
    g_stop = 1;
    std::fprintf(stderr, "fanout-rank: the process that started this rank has ended: stopping (at most %d s)\n", kOrphanGraceS);
    std::this_thread::sleep_for(std::chrono::seconds(kOrphanGraceS));
    std::fprintf(stderr, "fanout-rank: the role did not stop within %d s of its launcher's end: exiting\n", kOrphanGraceS);
    std::_Exit(137);
  });
}

}  // namespace

struct fanout_context {
  fanout::RankPlace place;
  std::string role, run_dir, experiment_dir;
  std::string step_settings;  // fanout_host_ops.step_settings: JSON, or empty
  std::map<std::string, std::string> params;
  fanout::SampleWriter* samples = nullptr;
  std::set<std::string> declared;  // metrics the role declared itself (declare_metric): the table's entry yields
  fanout::Rendezvous* rendezvous = nullptr;
  bool record_failed = false;
  bool recorded_resources = false;  // the role recorded resource.* figures itself (exec, per invocation)
  std::string service_dir;  // fanout_host_ops.service_dir
  bool service_provider = false;
  // A service looks for <service_dir>/stop at most every 100 ms (atomics: plugins may ask from several threads).
  mutable std::atomic<int64_t> stop_checked_ns{0};
  mutable std::atomic<bool> service_stop{false};
};

namespace {

using fanout::parse_bool;
using fanout::parse_double;
using fanout::parse_int;

void log_line(const fanout_context* c, fanout_log_level level, const std::string& msg) {
  static const char* names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
  int l = (level >= FANOUT_LOG_DEBUG && level <= FANOUT_LOG_ERROR) ? int(level) : 1;
  std::fprintf(stderr, "[%s %s:%d] %s %s\n", fanout::iso8601_utc(fanout::wall_ns()).c_str(), c->role.c_str(),
               c->place.rank, names[l], msg.c_str());
}

// The host ops, one function each: both tables below (ABI 4 and ABI 3) point at the same ones.
int op_rank(const fanout_context* c) { return c->place.rank; }
int op_size(const fanout_context* c) { return c->place.size; }
int op_local_rank(const fanout_context* c) { return c->place.local_rank; }
int op_local_size(const fanout_context* c) { return c->place.local_size; }
const char* op_node_name(const fanout_context* c) { return c->place.node.c_str(); }
const char* op_role(const fanout_context* c) { return c->role.c_str(); }
const char* op_run_dir(const fanout_context* c) { return c->run_dir.c_str(); }
const char* op_experiment_dir(const fanout_context* c) { return c->experiment_dir.c_str(); }
const char* op_step_settings(const fanout_context* c) { return c->step_settings.empty() ? nullptr : c->step_settings.c_str(); }

// The CPUs this rank may run on, as a list of ranges ("0-1,4"): what the launcher's binding (Slurm's
// task/affinity or cgroups, mpirun's --bind-to) left it, recorded in rank_resources.
std::string affinity_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "";
  std::string list;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    int last = c;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
    list += (list.empty() ? "" : ",") + std::to_string(c) + (last > c ? "-" + std::to_string(last) : "");
    c = last;
  }
  return list;
}

// Its GPUs: CUDA_VISIBLE_DEVICES (set by Slurm's gres plugin or by hand), else SLURM_STEP_GPUS; "" for none.
std::string step_gpus() {
  for (const char* name : {"CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS"})
    if (const char* v = std::getenv(name); v && *v) return v;
  return "";
}

// A step that asks GPUs per task, started by a launcher that does not hand them out (local processes, mpirun):
// this task takes its share of the node's GPUs before anything can initialise a device. srun gave its own.
void take_gpu_share(const fanout::RunMetadata& meta, const std::string& role, int local_rank) {
  if (!std::getenv("FANOUT_RANK") && std::getenv("SLURM_STEP_ID")) return;  // srun's rank (local ranks set FANOUT_RANK)
  for (auto& step : meta.steps) {
    if (step.role != role || step.gpus_per_task < 1) continue;
    const auto gpus = fanout::visible_gpus();
    auto mine = fanout::task_gpus(gpus, local_rank, step.gpus_per_task);
    if (!mine)
      throw fanout::UserError("step '" + role + "' asks " + std::to_string(step.gpus_per_task) + " GPU(s) per task and this is local task " +
                              std::to_string(local_rank) + ", but the node shows " + std::to_string(gpus.size()) +
                              " (CUDA_VISIBLE_DEVICES, else /dev/nvidia<N>)");
    setenv("CUDA_VISIBLE_DEVICES", mine->c_str(), 1);
  }
}

const char* op_param(const fanout_context* c, const char* name) {
  auto it = c->params.find(name ? name : "");
  return it == c->params.end() ? nullptr : it->second.c_str();
}
int64_t op_param_int(const fanout_context* c, const char* name, int64_t fallback) {
  auto it = c->params.find(name ? name : "");
  if (it == c->params.end()) return fallback;
  if (auto b = parse_bool(it->second); b && !parse_int(it->second)) return *b ? 1 : 0;
  return parse_int(it->second).value_or(fallback);
}
double op_param_double(const fanout_context* c, const char* name, double fallback) {
  auto it = c->params.find(name ? name : "");
  return it == c->params.end() ? fallback : parse_double(it->second).value_or(fallback);
}
int64_t op_now_ns(const fanout_context*) { return fanout::monotonic_ns(); }

int op_record(fanout_context* c, const char* metric, int64_t iteration, int64_t t_start_ns, double value, const char* unit,
              int warmup) {
  if (!metric || !*metric) {
    log_line(c, FANOUT_LOG_ERROR, "record: empty metric name");
    c->record_failed = true;
    return -1;
  }
  if (std::strncmp(metric, FANOUT_RESOURCE_METRIC_PREFIX, sizeof FANOUT_RESOURCE_METRIC_PREFIX - 1) == 0) c->recorded_resources = true;
  if (!c->samples->record(metric, unit ? unit : "", iteration, t_start_ns, value, warmup != 0)) {
    if (!c->record_failed) log_line(c, FANOUT_LOG_ERROR, "record: " + c->samples->error());
    c->record_failed = true;
    return -1;
  }
  return 0;
}

int op_declare_metric(fanout_context* c, const char* metric, int better, uint32_t flags) {
  if (!metric || !*metric || better < FANOUT_BETTER_LOWER || better > FANOUT_BETTER_NONE) {
    log_line(c, FANOUT_LOG_ERROR, "declare_metric: needs a metric name and better = lower, higher or none (1 to 3)");
    return -1;
  }
  c->declared.insert(metric);
  if (!c->samples->declare(metric, uint8_t(better), flags)) {
    log_line(c, FANOUT_LOG_ERROR, "declare_metric: " + c->samples->error());
    c->record_failed = true;
    return -1;
  }
  return 0;
}

int op_kv_put(fanout_context* c, const char* key, const void* value, size_t len) {
  auto err = c->rendezvous->put(key ? key : "", std::string(static_cast<const char*>(value), len));
  if (!err.empty()) log_line(c, FANOUT_LOG_ERROR, "kv_put " + std::string(key ? key : "") + ": " + err);
  return err.empty() ? 0 : -1;
}
int op_kv_get(fanout_context* c, const char* key, void* buf, size_t cap, size_t* len, int timeout_ms) {
  std::string v;
  auto err = c->rendezvous->get(key ? key : "", timeout_ms, v);
  if (!err.empty()) {
    log_line(c, FANOUT_LOG_ERROR, "kv_get " + std::string(key ? key : "") + ": " + err);
    return -1;
  }
  if (len) *len = v.size();
  if (buf && cap) std::memcpy(buf, v.data(), std::min(cap, v.size()));
  return 0;
}
int op_fence(fanout_context* c, int timeout_ms) {
  auto err = c->rendezvous->fence(timeout_ms);
  if (!err.empty()) log_line(c, FANOUT_LOG_ERROR, "fence: " + err);
  return err.empty() ? 0 : -1;
}
void op_log(fanout_context* c, fanout_log_level level, const char* message) { log_line(c, level, message ? message : ""); }

int op_should_stop(const fanout_context* c) {
  if (g_stop) return 1;
  if (!c->service_provider || c->service_stop) return c->service_stop ? 1 : 0;
  const int64_t now = fanout::monotonic_ns();
  if (now - c->stop_checked_ns.load() < 100000000) return 0;
  c->stop_checked_ns = now;
  if (::access((c->service_dir + "/" + fanout::layout::kServiceStop).c_str(), F_OK) == 0) c->service_stop = true;
  return c->service_stop ? 1 : 0;
}
const char* op_service_dir(const fanout_context* c, int* provider) {
  if (provider) *provider = c->service_provider ? 1 : 0;
  return c->service_dir.empty() ? nullptr : c->service_dir.c_str();
}

const fanout_host_ops kHostOps = {
    FANOUT_PLUGIN_ABI_VERSION, sizeof(fanout_host_ops), op_rank, op_size, op_local_rank, op_local_size, op_node_name,
    op_role, op_run_dir, op_param, op_param_int, op_param_double, op_now_ns, op_record, op_kv_put, op_kv_get, op_fence,
    op_log, op_should_stop, op_service_dir, op_experiment_dir, op_step_settings, op_declare_metric,
};
// What an ABI 3 plugin was built to call: the same ops, without struct_size and the ones ABI 4 added.
const fanout::abi3::HostOps kHostOpsAbi3 = {
    3, op_rank, op_size, op_local_rank, op_local_size, op_node_name, op_role, op_run_dir, op_param, op_param_int,
    op_param_double, op_now_ns, op_record, op_kv_put, op_kv_get, op_fence, op_log, op_should_stop, op_service_dir,
};

const fanout_host_ops* host_ops_for(const fanout::Plugin& plugin) {
  return plugin.abi_version() == 3 ? reinterpret_cast<const fanout_host_ops*>(&kHostOpsAbi3) : &kHostOps;
}

// --kv-server: the rendezvous service for the ranks of every step of a batch job, started by the job script
// on the job's first node. It publishes "<address> <token>" to the address file and serves until SIGTERM.
int serve_kv(int ranks, const std::string& address_file) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before the service thread starts, so only sigwait sees them
  fanout::KvService kv(/*all_interfaces=*/true);
  std::string token = kv.open_job(ranks);
  fanout::write_file_atomic(address_file, kv.address() + " " + token + "\n", 0600);
  int sig = 0;
  sigwait(&set, &sig);
  return 0;
}

// One figure the rank records of its role (what it cost, its counters): declared with its direction, as the role
// would have (the plugin's table then stays out of it), then its one sample.
bool record_rank_figure(fanout_context& ctx, const std::string& metric, fanout_better better, const char* unit, int64_t t_start, double value) {
  ctx.declared.insert(metric);
  return ctx.samples->declare(metric, uint8_t(better), 0) && ctx.samples->record(metric, unit, 0, t_start, value, false);
}

// The rank's own resource.* figures, once, after its role: its threads and its waited-for children (a database
// server it started and stopped) over the role's call; the peak is the largest of them over the rank's life.
bool record_own_resources(fanout_context& ctx, const rusage& self_before, const rusage& children_before, int64_t t_start) {
  rusage self{}, children{};
  ::getrusage(RUSAGE_SELF, &self), ::getrusage(RUSAGE_CHILDREN, &children);
  // Its own peak since fanout-rank's exec (ru_maxrss starts at the driver's); a child's floor is at most this.
  if (const long kib = fanout_sdk::own_peak_rss_kib(); kib >= 0) self.ru_maxrss = kib;
  const rusage before = fanout_sdk::combined(self_before, children_before);
  for (auto& f : fanout_sdk::resource_figures(fanout_sdk::combined(self, children), &before))
    if (!record_rank_figure(ctx, f.metric, f.better, f.unit, t_start, f.value)) return false;
  return true;
}

// --counters around the role: opened on this process (its threads and the children it starts count), each checked
// first: a node that cannot count one fails the run with the reason before the role runs.
struct RankCounters {
  std::vector<std::pair<const fanout_sdk::CounterSpec*, int>> open;
  explicit RankCounters(const std::string& list) {
    for (auto& name : fanout_sdk::counter_names(list)) {
      const auto* c = fanout_sdk::counter_named(name);
      if (!c) throw fanout::UserError("--counters: no counter '" + name + "'");
      const int fd = fanout_sdk::open_counter(*c, false);
      if (fd < 0) throw fanout::UserError("--counters " + fanout_sdk::counter_unavailable(*c));
      open.emplace_back(c, fd);
    }
  }
  ~RankCounters() {
    for (auto& [c, fd] : open) ::close(fd);
  }
  void enable() {
    for (auto& [c, fd] : open) fanout_sdk::enable_counter(fd);
  }
  bool record(fanout_context& ctx, int64_t t_start) {
    for (auto& [c, fd] : open) {
      fanout_sdk::disable_counter(fd);
      const auto value = fanout_sdk::read_counter(fd, *c);
      if (!value) continue;
      if (!record_rank_figure(ctx, fanout_sdk::counter_metric(*c), FANOUT_BETTER_NONE, c->unit, t_start, *value)) return false;
    }
    return true;
  }
};

int usage() {
  std::cerr << "usage: fanout-rank --plugin PATH --role ROLE --run-dir DIR\n"
               "       fanout-rank --kv-server --ranks N --address-file FILE\n"
               "Started by fanout's launchers for every rank; not meant to be run by hand.\n";
  return 2;
}

int run_rank(int argc, char** argv) {
  std::string plugin_path, role, run_dir, address_file;
  bool kv_server = false;
  int kv_ranks = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw fanout::UserError(a + " needs a value");
      return argv[++i];
    };
    if (a == "--plugin") plugin_path = next();
    else if (a == "--role") role = next();
    else if (a == "--run-dir") run_dir = next();
    else if (a == "--kv-server") kv_server = true;
    else if (a == "--ranks") kv_ranks = int(fanout::parse_int(next()).value_or(0));
    else if (a == "--address-file") address_file = next();
    else if (a == "--help" || a == "-h") return usage();
    else throw fanout::UserError("unknown argument '" + a + "'");
  }
  if (kv_server) {
    if (kv_ranks < 1 || address_file.empty()) return usage();
    return serve_kv(kv_ranks, address_file);
  }
  if (plugin_path.empty() || role.empty() || run_dir.empty()) return usage();

  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
  // A peer that goes away (a database, a server rank) is an EPIPE for the plugin to report with its address,
  // not a silent death of the rank.
  signal(SIGPIPE, SIG_IGN);
  stop_when_orphaned();

  auto plugin = fanout::Plugin::open(plugin_path);
  fanout::RunMetadata meta = fanout::read_run_metadata(run_dir);
  // --role names the step; an experiment file's step may run a plugin role of another name (its entry).
  const fanout::RunStep* step = nullptr;
  for (auto& s : meta.steps)
    if (s.role == role) step = &s;
  const std::string entry_name = step && !step->entry.empty() ? step->entry : role;
  const fanout::RoleSpec* entry = plugin->role(entry_name);
  if (!entry)
    throw fanout::UserError("plugin " + plugin->name() + " has no role '" + entry_name + "' (roles: " +
                            fanout::join(plugin->role_names(), ", ") + ")");

  fanout_context ctx;
  // The local launcher's FANOUT_* environment first; else PMIx when a PMIx server started us; else SLURM_*/MPI env.
  // A step that runs an MPI program leaves PMIx to it: a PMIx server takes one connection per rank, even after this
  // process would finalize its own (MPI_Init then fails), so the rank never joins and its children are told.
  const bool leave_pmix = step && step->mpi_program;
  if (leave_pmix) ::setenv("FANOUT_MPI_PROGRAM", "1", 1);
  ctx.place = std::getenv("FANOUT_RANK") || leave_pmix ? fanout::detect_place() : fanout::pmix_place().value_or(fanout::detect_place());
  take_gpu_share(meta, role, ctx.place.local_rank);
  ctx.role = role;
  // Where the driver was started: a plugin resolves the user's relative paths against it (ranks start in their
  // run folder).
  if (auto cwd = meta.provenance.find("cwd"); cwd != meta.provenance.end() && !cwd->second.empty())
    ::setenv("FANOUT_SUBMIT_DIR", cwd->second.c_str(), 1);
  if (step) ctx.step_settings = step->settings;
  ctx.run_dir = run_dir;
  // Run folders are <experiment>/run-<stamp>/<session>.
  auto run_path = std::filesystem::absolute(run_dir).lexically_normal();
  if (!run_path.has_filename()) run_path = run_path.parent_path();  // "…/<session>/"
  ctx.experiment_dir = run_path.parent_path().parent_path().string();
  ctx.service_dir = meta.service_dir;
  ctx.service_provider = meta.service_provider;
  for (auto& [k, v] : plugin->values_for_roles(meta.subcommand, meta.parameters)) ctx.params[k] = v;
  auto rendezvous = fanout::make_rendezvous(ctx.place.job_ranks, ctx.place.size, leave_pmix);
  ctx.rendezvous = rendezvous.get();

  std::filesystem::create_directories(fanout::samples_dir(run_dir));
  auto sample_path = fanout::samples_dir(run_dir) / (role + "." + std::to_string(ctx.place.rank) + ".samples");
  fanout::SampleWriter writer(sample_path, ctx.place.rank, role, ctx.place.node, fanout::monotonic_ns(), fanout::wall_ns());
  if (!writer.error().empty()) throw fanout::UserError(writer.error());
  writer.resources(affinity_cpus(), step_gpus());
  // The plugin's table says which way each of its metrics is better: declared beside a metric's first sample,
  // unless the role declared the metric itself.
  writer.on_new_metric([&](const std::string& metric) {
    if (ctx.declared.count(metric)) return;
    if (const fanout::MetricSpec* spec = fanout::find_metric_spec(plugin->metrics(), metric); spec && spec->better != FANOUT_BETTER_UNDECLARED)
      writer.declare(metric, uint8_t(spec->better), spec->flags);
  });
  ctx.samples = &writer;

  log_line(&ctx, FANOUT_LOG_INFO, "rank " + std::to_string(ctx.place.rank) + "/" + std::to_string(ctx.place.size) +
                                      " on node " + ctx.place.node + " (place from " + ctx.place.source + ", rendezvous " +
                                      rendezvous->name() + ", " + std::to_string(ctx.place.job_ranks) + " ranks in the job)");
  // What the role costs (issue 54): its process and the children it waited for, over the role's call.
  const auto resources = meta.provenance.find("resources");
  const bool record_resources = resources == meta.provenance.end() || resources->second != "off";
  ::setenv(FANOUT_RESOURCES_ENV, record_resources ? "on" : "off", 1);  // the run's word, not the environment's
  const auto counters_asked = meta.provenance.find("counters");
  const std::string counter_list = counters_asked == meta.provenance.end() ? "" : counters_asked->second;
  ::setenv(FANOUT_COUNTERS_ENV, counter_list.c_str(), 1);
  RankCounters counters(counter_list);
  rusage self_before{}, children_before{};
  ::getrusage(RUSAGE_SELF, &self_before), ::getrusage(RUSAGE_CHILDREN, &children_before);
  const int64_t role_start = fanout::monotonic_ns();
  // A rank with GPUs measures their memory and energy through NVML where the node has it; a node without NVIDIA's
  // driver is said once per step (its rank 0), not an error.
  std::unique_ptr<fanout_sdk::NvmlMeter> gpu_meter;
  if (record_resources && !step_gpus().empty()) {
    std::string why;
    gpu_meter = fanout_sdk::NvmlMeter::start(step_gpus(), &why);
    if (!gpu_meter && ctx.place.rank == 0) log_line(&ctx, FANOUT_LOG_INFO, "GPU memory and energy not recorded: " + why);
  }
  plugin->init();
  counters.enable();
  int rc = entry->run(&ctx, host_ops_for(*plugin));
  if (rc == 0 && record_resources && !ctx.recorded_resources && !record_own_resources(ctx, self_before, children_before, role_start))
    ctx.record_failed = true;
  if (gpu_meter && rc == 0)
    for (auto& f : gpu_meter->stop())
      if (!record_rank_figure(ctx, f.metric, f.better, f.unit, role_start, f.value)) ctx.record_failed = true;
  // Counters are asked for explicitly: recorded even with --resources=off, unless the role counted its own (exec).
  if (rc == 0 && !ctx.recorded_resources && !counters.record(ctx, role_start)) ctx.record_failed = true;
  bool flushed = writer.flush();
  if (rc != 0) {
    log_line(&ctx, FANOUT_LOG_ERROR, "role '" + role + "' returned " + std::to_string(rc));
    return rc > 0 && rc < 256 ? rc : 1;  // a command's own status passes through as it is (exec: one account of it)
  }
  if (ctx.record_failed || !flushed) {
    log_line(&ctx, FANOUT_LOG_ERROR, "samples could not be stored: " + writer.error());
    return 3;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  fanout::never_group_or_world_writable();
  try {
    return run_rank(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fanout-rank: error: %s\n", e.what());
    return 2;
  }
}
