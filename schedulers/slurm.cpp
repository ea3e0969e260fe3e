#include "schedulers/slurm.h"

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <slurm/slurmdb.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "common/error.h"
#include "common/files.h"
#include "common/identity.h"
#include "common/subprocess.h"
#include "common/text.h"
#include "common/clock.h"
#include "schedulers/batch_script.h"
#include "launchers/step_launcher.h"
#include "results/layout.h"

extern char** environ;
// Exported by libslurm (squeue's REASON column comes from it) but declared only in Slurm's internal headers.
extern "C" char* slurm_job_reason_string(enum job_state_reason inx);

namespace fanout {

namespace fs = std::filesystem;

namespace {

std::string slurm_error() { return slurm_strerror(slurm_get_errno()); }

void init_slurm_once() {
  static bool done = [] {
    slurm_init(nullptr);
    return true;
  }();
  (void)done;
}

JobState map_state(uint32_t raw) {
  if (raw & JOB_REQUEUE) return JobState::Requeued;
  switch (raw & JOB_STATE_BASE) {
    case JOB_PENDING: return JobState::Pending;
    case JOB_RUNNING:
    case JOB_SUSPENDED: return JobState::Running;
    case JOB_COMPLETE: return JobState::Completed;
    case JOB_CANCELLED: return JobState::Cancelled;
    case JOB_FAILED: return JobState::Failed;
    case JOB_TIMEOUT:
    case JOB_DEADLINE: return JobState::Timeout;
    case JOB_NODE_FAIL:
    case JOB_BOOT_FAIL: return JobState::NodeFail;
    case JOB_PREEMPTED: return JobState::Preempted;
    case JOB_OOM: return JobState::OutOfMemory;
  }
  return JobState::Unknown;
}

// A final state's reason: the failed step from the job's markers, else Slurm's word, with the log path.
std::string final_reason(const fs::path& run_dir, const JobStatus& s, const std::string& log) {
  if (s.state == JobState::Completed) return "";
  std::string step = describe_step_failure(run_dir);
  std::string what = std::string("Slurm says ") + job_state_name(s.state);
  if (s.signal) what += " (signal " + std::to_string(s.signal) + ")";
  else if (s.exit_code) what += " (exit code " + std::to_string(s.exit_code) + ")";
  return step.empty() ? what + "; logs: " + log : step + " (" + what + ")";
}

std::vector<std::string> feature_words(const std::string& constraint) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : constraint + "&") {
    if (c == '&' || c == '|' || c == ',' || c == '(' || c == ')' || c == '[' || c == ']') {
      if (!trim(cur).empty()) out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

}  // namespace

bool slurm_configured() {
  if (const char* c = std::getenv("SLURM_CONF")) return fs::exists(c);
  return fs::exists("/etc/slurm/slurm.conf");
}

const std::vector<std::string>& slurm_batch_arg_keys() {
  static const std::vector<std::string> keys = {"qos", "reservation", "mem", "gres", "nodelist", "exclude_nodes", "comment"};
  return keys;
}

namespace {
// The sbatch option each batch_args key stands for.
std::string sbatch_option(const std::string& key) {
  if (key == "exclude_nodes") return "--exclude";
  return "--" + key;
}

// A value on an #SBATCH line as sbatch reads it back (job.sh resubmitted by hand; fanout itself submits through
// libslurm): sbatch's _get_argument splits a directive into words at blanks, groups what quotes enclose and takes
// the character after a backslash as it is. A value with a blank, a quote, a backslash or '#' is written in double
// quotes with its double quotes and backslashes escaped. A control character cannot be on a line at all: refused,
// naming the flag it came from.
std::string sbatch_value(const std::string& flag, const std::string& v) {
  bool plain = true;
  std::string quoted = "\"";
  for (unsigned char c : v) {
    if (c < 0x20 || c == 0x7f) throw UserError(flag + ": '" + printable(v) + "' holds a control character, which cannot go on an #SBATCH line");
    plain = plain && c != ' ' && c != '\'' && c != '"' && c != '\\' && c != '#';
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += char(c);
  }
  return plain ? v : quoted + "\"";
}
}  // namespace

SlurmRequest slurm_request(const JobSpec& job) {
  SlurmRequest r;
  r.name = job.name;
  r.partition = job.options.partition;
  r.account = job.options.account;
  r.constraint = job.options.constraint;
  r.exclusive = job.options.exclusive;
  r.nodes = job.total_nodes();
  const JobSpec::NodeLoad most = job.busiest_node();
  r.tasks_per_node = most.cpus;  // one CPU per task at the job's level: srun gives each step its cpus_per_task
  r.gpus_per_node = most.gpus;
  r.memory_mb = most.memory_mb;
  r.cpus_per_task = 1;
  r.time_minutes = std::max<int64_t>(1, (job.walltime_s + 59) / 60);
  r.work_dir = job.run_dir.string();
  r.output = (job.run_dir / "slurm-%j.out").string();
  const auto& keys = slurm_batch_arg_keys();
  for (auto& [k, v] : job.options.batch_args) {
    if (std::find(keys.begin(), keys.end(), k) == keys.end())
      throw UserError("--batch_args: the slurm launcher does not know '" + k + "' (known: " + join(keys, ", ") + ")");
    if (k == "mem" && !parse_int(v)) throw UserError("--batch_args: mem=" + v + " must be megabytes per node, an integer");
    // The steps' own requests and a job-wide one must not contradict each other: refused rather than one dropped.
    if (k == "gres" && r.gpus_per_node > 0)
      throw UserError("--batch_args: gres=" + v + " and steps asking GPUs (" + std::to_string(r.gpus_per_node) +
                      " per node, gpus_per_task) both set the job's GRES: give one");
    if (k == "mem" && *parse_int(v) < r.memory_mb)
      throw UserError("--batch_args: mem=" + v + " is less than the " + std::to_string(r.memory_mb) + " MB per node its steps ask (memory_mb)");
    if (k == "mem") r.memory_mb = 0;  // the batch_args line says it
    r.batch_args.emplace_back(k, v);
  }
  return r;
}

std::string sbatch_preamble(const SlurmRequest& r) {
  std::string s = "#!/bin/bash\n";
  auto line = [&](const std::string& opt) { s += "#SBATCH " + opt + "\n"; };
  line("--job-name=" + sbatch_value("--exp_name", r.name));
  line("--nodes=" + std::to_string(r.nodes));
  line("--ntasks-per-node=" + std::to_string(r.tasks_per_node));
  line("--cpus-per-task=" + std::to_string(r.cpus_per_task));
  line("--time=" + std::to_string(r.time_minutes));
  line("--output=" + sbatch_value("--results_dir", r.output));
  line("--no-requeue");  // a run on a failed node ends NODE_FAIL (retried by the driver), not rerun in its own folder
  if (!r.partition.empty()) line("--partition=" + sbatch_value("--partition", r.partition));
  if (!r.account.empty()) line("--account=" + sbatch_value("--account", r.account));
  if (!r.constraint.empty()) line("--constraint=" + sbatch_value("--constraint", r.constraint));
  if (r.exclusive) line("--exclusive");
  if (r.gpus_per_node > 0) line("--gres=gpu:" + std::to_string(r.gpus_per_node));
  if (r.memory_mb > 0) line("--mem=" + std::to_string(r.memory_mb));
  for (auto& [k, v] : r.batch_args) line(sbatch_option(k) + "=" + sbatch_value("--batch_args " + k, v));
  return s;
}

std::string slurm_job_script(const JobSpec& job) {
  // Steps start with srun: it knows the allocation's nodes (mpirun would need host files fanout does not write here).
  if (!job.options.step_launcher.empty() && job.options.step_launcher != "srun")
    throw UserError("--step_launcher: a Slurm job starts its steps with srun, not " + job.options.step_launcher);
  std::vector<std::vector<std::string>> prefixes;
  for (size_t s = 0; s < job.steps.size(); ++s) prefixes.push_back(srun_launcher().prefix(job, s));
  return sbatch_preamble(slurm_request(job)) + "# fanout job " + job.name + "\n" + batch_script_body(job, prefixes);
}

SlurmScheduler::SlurmScheduler() {
  if (!slurm_configured())
    throw UserError("--launcher=slurm: Slurm is not configured on this host (no /etc/slurm/slurm.conf; set SLURM_CONF)");
  init_slurm_once();
  if (slurm_ping(0) != SLURM_SUCCESS)
    throw UserError("--launcher=slurm: the Slurm controller does not answer: " + slurm_error());
  slurm_conf_t* conf = nullptr;
  if (slurm_load_ctl_conf(0, &conf) == SLURM_SUCCESS) {
    accounting_storage_ = conf->accounting_storage_type ? conf->accounting_storage_type : "";
    energy_plugin_ = conf->acct_gather_energy_type ? conf->acct_gather_energy_type : "";
    if (conf->max_array_sz > 0) max_array_size_ = conf->max_array_sz;
    if (conf->max_job_cnt > 0 && conf->max_job_cnt != NO_VAL) max_submitted_ = std::max<size_t>(1, conf->max_job_cnt / 2);
    slurm_free_ctl_conf(conf);
  }
}

std::optional<double> slurm_duration_s(const std::string& text) {
  // Slurm's _elapsed_time: "D-HH:MM:SS" from a day, "HH:MM:SS" from an hour, "MM:SS.mmm" below.
  std::string t = trim(text);
  double days = 0;
  if (auto dash = t.find('-'); dash != std::string::npos) {
    auto d = parse_int(t.substr(0, dash));
    if (!d || *d < 0) return std::nullopt;
    days = double(*d);
    t = t.substr(dash + 1);
  }
  const std::vector<std::string> parts = split(t, ':');
  if (parts.empty() || parts.size() > 3) return std::nullopt;
  double total = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const bool last = i + 1 == parts.size();
    const std::string& p = parts[i];
    if (p.empty() || p.find_first_not_of(last ? "0123456789." : "0123456789") != std::string::npos) return std::nullopt;
    total = total * 60 + std::strtod(p.c_str(), nullptr);
  }
  return days * 86400 + total;
}

std::map<std::string, SacctJob> parse_sacct(const std::string& text, bool with_energy) {
  std::map<std::string, SacctJob> jobs;
  for (const std::string& line : split(text, '\n')) {
    const std::vector<std::string> f = split(line, '|');
    if (f.size() < 10) continue;
    const size_t dot = f[0].find('.');
    SacctJob& job = jobs[f[0].substr(0, dot)];
    if (dot == std::string::npos) {
      // A state sacct may still change: the job's end has not reached the accounting store yet.
      const std::string state = f[2].substr(0, f[2].find(' '));
      job.final = !state.empty() && state != "RUNNING" && state != "PENDING" && state != "REQUEUED" && state != "SUSPENDED" &&
                  state != "RESIZING" && state != "REQUEUE_HOLD" && state != "REQUEUE_FED";
      continue;
    }
    const std::string step = f[0].substr(dot + 1);
    if (step.empty() || step.find_first_not_of("0123456789") != std::string::npos) continue;  // .batch, .extern
    StepUsage u;
    u.step = f[1];
    u.nodes = f[3];
    auto bytes = [&](const char* name, const std::string& v) {
      if (auto n = parse_int(v); n && *n >= 0) u.figures.push_back({name, "B", double(*n)});  // empty: no sample was taken
    };
    auto seconds = [&](const char* name, const std::string& v) {
      if (auto d = slurm_duration_s(v)) u.figures.push_back({name, "s", *d});
    };
    bytes("max_rss", f[4]);
    bytes("ave_rss", f[5]);
    seconds("cpu", f[6]);
    seconds("user_cpu", f[7]);
    seconds("system_cpu", f[8]);
    if (with_energy)
      if (auto j = parse_int(f[9]); j && *j > 0) u.figures.push_back({"energy", "J", double(*j)});
    job.steps.push_back(std::move(u));
  }
  return jobs;
}

namespace {

// A job's key in one poll's answers: the job id, and for an array task its task id + 1 (0 for a plain job).
// Numbers, not strings: an array's answer holds every task the controller remembers, thousands in a big sweep.
uint64_t job_key(uint32_t job_id, uint32_t task_id) { return (uint64_t(job_id) << 32) | (task_id == NO_VAL ? 0 : uint64_t(task_id) + 1); }

std::optional<uint64_t> job_key(std::string_view id) {
  const size_t u = id.find('_');
  auto base = parse_int(id.substr(0, u));
  if (!base || *base <= 0 || *base > int64_t(UINT32_MAX)) return std::nullopt;
  if (u == std::string_view::npos) return job_key(uint32_t(*base), NO_VAL);
  auto task = parse_int(id.substr(u + 1));
  if (!task || *task < 0 || *task >= int64_t(NO_VAL)) return std::nullopt;
  return job_key(uint32_t(*base), uint32_t(*task));
}

// The controller's answers to one poll, indexed by job. Held only while the poll reads them: libslurm's records
// are kilobytes each, and an array's answer has all its tasks, so keeping them between polls held a second copy of
// the sweep's jobs at every cycle's peak.
struct JobAnswers {
  std::vector<std::unique_ptr<job_info_msg_t, void (*)(job_info_msg_t*)>> msgs;
  std::unordered_map<uint64_t, const slurm_job_info_t*> by_key;
  std::unordered_set<uint32_t> pending_arrays;  // arrays whose tasks have not been split off yet

  explicit JobAnswers(const std::vector<job_info_msg_t*>& answers) {
    for (job_info_msg_t* m : answers) {
      msgs.emplace_back(m, slurm_free_job_info_msg);
      by_key.reserve(by_key.size() + m->record_count);
      for (uint32_t i = 0; i < m->record_count; ++i) {
        const slurm_job_info_t& j = m->job_array[i];
        by_key[j.array_task_id != NO_VAL ? job_key(j.array_job_id, j.array_task_id) : job_key(j.job_id, NO_VAL)] = &j;
        if (j.array_task_str && (j.job_state & JOB_STATE_BASE) == JOB_PENDING) pending_arrays.insert(j.array_job_id);
      }
    }
  }
  const slurm_job_info_t* find(std::optional<uint64_t> key) const {
    if (!key) return nullptr;
    auto it = by_key.find(*key);
    return it == by_key.end() ? nullptr : it->second;
  }
};

// A submission the controller turned away for now (EAGAIN: it holds MaxJobCount jobs), not for what it asked.
struct ControllerFull : UserError {
  using UserError::UserError;
};

// A submission turned away by a limit on queued jobs (MaxSubmitJobs and the like, ESLURM_ACCOUNTING_POLICY): it
// frees as the user's jobs end.
struct OverQueuedJobLimit : UserError {
  using UserError::UserError;
};

// What a submission's exception says for the driver (Submitted): a wait for room, a limit on queued jobs, or a refusal.
Scheduler::Submitted refusal_of(const std::exception_ptr& error) {
  Scheduler::Submitted out;
  out.error = error;
  try {
    std::rethrow_exception(error);
  } catch (const ControllerFull&) {
    out.later = true;
  } catch (const OverQueuedJobLimit&) {
    out.own_limit = true;
  } catch (...) {
  }
  return out;
}

bool limit_set(uint32_t v) { return v != INFINITE && v != NO_VAL; }

template <typename T, typename Fn>
void for_each_in(List list, Fn&& fn) {
  if (!list) return;
  ListIterator it = slurm_list_iterator_create(list);
  while (auto* x = static_cast<T*>(slurm_list_next(it))) fn(*x);
  slurm_list_iterator_destroy(it);
}

}  // namespace

SlurmScheduler::~SlurmScheduler() = default;

std::string SlurmScheduler::submit_script(const JobSpec& shape, const std::string& script, const std::string& array_spec,
                                          const std::string& dependency) {
  SlurmRequest r = slurm_request(shape);
  job_desc_msg_t d;
  slurm_init_job_desc_msg(&d);
  std::string output = array_spec.empty() ? r.output : (shape.run_dir.parent_path() / "slurm-%A_%a.out").string();
  std::string work_dir = array_spec.empty() ? r.work_dir : shape.run_dir.parent_path().string();
  d.name = const_cast<char*>(r.name.c_str());
  d.script = const_cast<char*>(script.c_str());
  d.work_dir = const_cast<char*>(work_dir.c_str());
  d.std_out = const_cast<char*>(output.c_str());
  d.min_nodes = d.max_nodes = uint32_t(r.nodes);
  d.ntasks_per_node = uint16_t(r.tasks_per_node);
  d.num_tasks = uint32_t(r.nodes * r.tasks_per_node);
  d.cpus_per_task = uint16_t(r.cpus_per_task);
  d.time_limit = uint32_t(r.time_minutes);
  d.requeue = 0;  // as --no-requeue in the preamble
  d.user_id = getuid();
  d.group_id = getgid();
  if (!r.partition.empty()) d.partition = const_cast<char*>(r.partition.c_str());
  if (!r.account.empty()) d.account = const_cast<char*>(r.account.c_str());
  if (!r.constraint.empty()) d.features = const_cast<char*>(r.constraint.c_str());
  if (r.exclusive) d.shared = JOB_SHARED_NONE;
  if (shape.options.hold) d.priority = 0;
  std::string gres = r.gpus_per_node > 0 ? "gres:gpu:" + std::to_string(r.gpus_per_node) : "";
  if (!gres.empty()) d.tres_per_node = const_cast<char*>(gres.c_str());
  if (r.memory_mb > 0) d.pn_min_memory = uint64_t(r.memory_mb);
  for (auto& [k, v] : r.batch_args) {
    if (k == "qos") d.qos = const_cast<char*>(v.c_str());
    else if (k == "reservation") d.reservation = const_cast<char*>(v.c_str());
    else if (k == "mem") d.pn_min_memory = uint64_t(*parse_int(v));
    else if (k == "gres") gres = "gres:" + v, d.tres_per_node = const_cast<char*>(gres.c_str());
    else if (k == "nodelist") d.req_nodes = const_cast<char*>(v.c_str());
    else if (k == "exclude_nodes") d.exc_nodes = const_cast<char*>(v.c_str());
    else if (k == "comment") d.comment = const_cast<char*>(v.c_str());
  }
  if (!array_spec.empty()) d.array_inx = const_cast<char*>(array_spec.c_str());
  if (!dependency.empty()) d.dependency = const_cast<char*>(dependency.c_str());
  // The job runs with the submitting environment (PATH, FANOUT_PLUGIN_PATH, ...), as sbatch does.
  uint32_t n = 0;
  while (environ[n]) ++n;
  d.environment = environ;
  d.env_size = n;
  submit_response_msg_t* resp = nullptr;
  if (slurm_submit_batch_job(&d, &resp) != SLURM_SUCCESS) {
    const int e = slurm_get_errno();
    const std::string what = array_spec.empty() ? "run " + shape.name : "an array of runs from " + shape.name;
    // The controller holds as many jobs as it takes (MaxJobCount counts every array task): sbatch sleeps and retries;
    // the driver submits these again as earlier jobs end.
    if (e == EAGAIN || e == ESLURM_ERROR_ON_DESC_TO_RECORD_COPY)
      throw ControllerFull("the Slurm controller takes no more jobs now (" + slurm_error() + "; MaxJobCount counts every queued array task)");
    const std::string refusal = "Slurm refused " + what + ": " + slurm_error();  // before another call of libslurm sets errno
    if (e == ESLURM_ACCOUNTING_POLICY && queued_job_limits_apply(shape.options.account)) throw OverQueuedJobLimit(refusal);
    throw UserError(refusal);
  }
  std::string id = std::to_string(resp->job_id);
  slurm_free_submit_response_response_msg(resp);
  return id;
}

// ESLURM_ACCOUNTING_POLICY says the same for a limit on queued jobs (MaxSubmitJobs or GrpSubmitJobs of the user's
// association or an account above it; a QOS's MaxSubmitJobsPerUser, PerAccount or GrpSubmitJobs), which frees as
// jobs end, and for a limit on the job itself (a QOS's DenyOnLimit MaxWall), which no wait cures: whether any of the
// former holds for the account is read from the controller's association manager (scontrol show assoc_mgr), once.
// When the controller does not say (PrivateData hides it), one is assumed.
bool SlurmScheduler::queued_job_limits_apply(const std::string& account) {
  std::lock_guard<std::mutex> lock(limits_mu_);
  if (auto it = queued_job_limits_.find(account); it != queued_job_limits_.end()) return it->second;
  bool apply = true;
  assoc_mgr_info_request_msg_t request{};
  request.flags = ASSOC_MGR_INFO_FLAG_ASSOC | ASSOC_MGR_INFO_FLAG_QOS;
  assoc_mgr_info_msg_t* info = nullptr;
  const std::string user = user_name();
  if (slurm_load_assoc_mgr_info(&request, &info) == SLURM_SUCCESS && info) {
    std::unordered_map<uint32_t, const slurmdb_assoc_rec_t*> by_id;
    std::vector<const slurmdb_assoc_rec_t*> own;
    for_each_in<slurmdb_assoc_rec_t>(info->assoc_list, [&](const slurmdb_assoc_rec_t& a) {
      by_id[a.id] = &a;
      if (a.user && user == a.user && a.acct && (account.empty() ? a.is_def != 0 : account == a.acct)) own.push_back(&a);
    });
    if (!own.empty()) {
      apply = false;
      for (const slurmdb_assoc_rec_t* a : own)
        for (int depth = 0; a && depth < 64 && !apply; ++depth) {
          apply = limit_set(a->max_submit_jobs) || limit_set(a->grp_submit_jobs);
          auto parent = by_id.find(a->parent_id);
          a = parent == by_id.end() || a->parent_id == a->id ? nullptr : parent->second;
        }
      for_each_in<slurmdb_qos_rec_t>(info->qos_list, [&](const slurmdb_qos_rec_t& q) {
        apply |= limit_set(q.max_submit_jobs_pu) || limit_set(q.max_submit_jobs_pa) || limit_set(q.grp_submit_jobs);
      });
    }
    slurm_free_assoc_mgr_info_msg(info);
  }
  queued_job_limits_[account] = apply;
  return apply;
}

std::string SlurmScheduler::submit(const JobSpec& job) {
  Submitted got = submit_each({job}).front();
  if (got.error) std::rethrow_exception(got.error);
  return got.id;
}

std::vector<Scheduler::Submitted> SlurmScheduler::submit_each(const std::vector<JobSpec>& jobs) {
  std::vector<Submitted> out(jobs.size());
  // Checked and rendered here, in order: a job that is not valid is refused before any job after it is submitted.
  std::vector<std::string> scripts;
  size_t n = 0;
  for (; n < jobs.size(); ++n) {
    try {
      jobs[n].validate();
      scripts.push_back(slurm_job_script(jobs[n]));
    } catch (...) {
      out[n].error = std::current_exception();
      break;
    }
  }
  std::atomic<size_t> next{0};
  auto submitter = [&] {
    for (size_t i; (i = next++) < n;) {
      try {
        out[i].id = submit_script(jobs[i], scripts[i], "");
      } catch (...) {
        out[i] = refusal_of(std::current_exception());
      }
    }
  };
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < std::min<size_t>(kSubmitters, n); ++t) helpers.emplace_back(submitter);
  submitter();
  for (auto& t : helpers) t.join();
  for (size_t i = 0; i < n; ++i)
    if (!out[i].id.empty()) tracked_[out[i].id] = {jobs[i].run_dir};
  return out;
}

std::vector<Scheduler::Submitted> SlurmScheduler::submit_array(const std::vector<JobSpec>& jobs, int max_parallel) {
  // One array per resource shape; task i execs the i-th run's job.sh (written by the driver beforehand).
  std::map<std::string, std::vector<size_t>> shapes;
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].validate();
    SlurmRequest r = slurm_request(jobs[i]);
    r.name = r.output = r.work_dir = "";  // the shape: everything but where the run is
    shapes[sbatch_preamble(r)].push_back(i);
  }
  std::vector<Submitted> out(jobs.size());
  Submitted full;  // the controller took no more (later): every array after it waits in the driver too
  for (auto& [shape, all] : shapes) {
    // At most MaxArraySize tasks an array (the controller refuses a larger one; Slurm's default is 1001): a shape
    // with more runs goes as several arrays. Under a throttle each waits for the one before it to end
    // (afterany), so that --max_parallel still bounds the shape's tasks at once; the cost is the tail of each. The
    // chain goes on from an earlier call's last array of the shape while any of its tasks is still followed (a sweep
    // bigger than the controller takes is submitted as its runs end).
    std::string& previous = last_array_[shape];
    if (!previous.empty() && followed_tasks(previous) == 0) previous.clear();
    for (size_t from = 0; from < all.size(); from += max_array_size_) {
      const std::vector<size_t> members(all.begin() + long(from), all.begin() + long(std::min(all.size(), from + max_array_size_)));
      if (full.later) {
        for (size_t m : members) out[m] = full;
        continue;
      }
      const JobSpec& first = jobs[members.front()];
      std::string body = "case \"$SLURM_ARRAY_TASK_ID\" in\n";
      for (size_t k = 0; k < members.size(); ++k)
        body += std::to_string(k) + ") exec /bin/bash " + shell_quote((jobs[members[k]].run_dir / layout::kJobScript).string()) + " ;;\n";
      body += "esac\necho \"fanout: no run for array task $SLURM_ARRAY_TASK_ID\" >&2\nexit 1\n";
      SlurmRequest r = slurm_request(first);
      r.name = "fanout-array";
      r.output = (first.run_dir.parent_path() / "slurm-%A_%a.out").string();
      const std::string spec = "0-" + std::to_string(members.size() - 1) + (max_parallel > 0 ? "%" + std::to_string(max_parallel) : "");
      const std::string dependency = max_parallel > 0 && !previous.empty() ? "afterany:" + previous : "";
      std::string script = sbatch_preamble(r) + "#SBATCH --array=" + spec + "\n" +
                           (dependency.empty() ? "" : "#SBATCH --dependency=" + dependency + "\n") + body;
      const fs::path kept = first.run_dir.parent_path() / ("array-" + std::to_string(array_count_ + 1) + ".sh");
      write_file_atomic(kept, script, 0755);
      std::string array_id;
      try {
        array_id = submit_script(first, script, spec, dependency);
      } catch (const UserError&) {
        // A limit on queued jobs takes this array's runs only: another shape's smaller array may fit under it.
        const Submitted refused = refusal_of(std::current_exception());
        if (refused.later) full = refused;
        for (size_t m : members) out[m] = refused;
      }
      if (array_id.empty()) {  // only what was submitted keeps its script
        std::error_code ec;
        fs::remove(kept, ec);
        continue;
      }
      ++array_count_;
      for (size_t k = 0; k < members.size(); ++k) {
        std::string id = array_id + "_" + std::to_string(k);
        tracked_[id] = {jobs[members[k]].run_dir};
        out[members[k]].id = std::move(id);
      }
      previous = array_id;
    }
  }
  return out;
}

// At most this many slurm_load_job calls per poll (one per job array or plain job); past it, the user's jobs.
constexpr size_t kJobQueriesPerPoll = 8;

std::vector<JobStatus> SlurmScheduler::poll(const std::vector<std::string>& job_ids) {
  // Only this sweep's jobs, never the controller's whole table (on a site: every user's jobs, and the ended ones
  // it remembers for MinJobAge): one query per job array, which answers with all its tasks, or per plain job while
  // there are few; else every job of this user.
  // Every id is looked at once a poll (a 100,000-task array has that many while queued): parsed once, no copies.
  std::vector<std::optional<uint64_t>> keys;
  keys.reserve(job_ids.size());
  std::set<uint32_t> bases;
  for (auto& id : job_ids) {
    keys.push_back(job_key(id));
    if (keys.back() && (bases.empty() || *bases.rbegin() != uint32_t(*keys.back() >> 32))) bases.insert(uint32_t(*keys.back() >> 32));
  }
  std::vector<job_info_msg_t*> answers;
  bool failed = false;
  // One query: its answer kept, or the poll marked failed (a job id the controller no longer knows was purged: gone,
  // not unknown).
  auto ask = [&](const std::function<int(job_info_msg_t**)>& query, bool one_job) {
    ++queries_;
    job_info_msg_t* msg = nullptr;
    if (query(&msg) == SLURM_SUCCESS && msg) answers.push_back(msg);
    else if (!(one_job && slurm_get_errno() == ESLURM_INVALID_JOB_ID)) failed = true;
  };
  if (bases.size() <= kJobQueriesPerPoll) {
    for (uint32_t base : bases) ask([&](job_info_msg_t** m) { return slurm_load_job(m, base, SHOW_ALL); }, true);
  } else {
    ask([](job_info_msg_t** m) { return slurm_load_job_user(m, uint32_t(getuid()), SHOW_ALL); }, false);
  }
  if (failed) {
    for (job_info_msg_t* m : answers) slurm_free_job_info_msg(m);
    // A failed query is tolerated: the jobs keep their last known state until the next cycle.
    std::vector<JobStatus> out;
    for (auto& id : job_ids) {
      JobStatus s;
      s.job_id = id;
      s.state = JobState::Unknown;
      out.push_back(s);
    }
    return out;
  }
  const JobAnswers table(answers);
  std::vector<JobStatus> out;
  for (size_t k = 0; k < job_ids.size(); ++k) {
    const std::string& id = job_ids[k];
    const std::optional<uint64_t> key = keys[k];
    const slurm_job_info_t* found = table.find(key);
    // A task still queued in its array's one record (not split off by the controller yet) is as it was: left out,
    // so that a poll's work on the driver's side is what changed, not every task a big array still queues.
    if (!found && key && (*key & 0xffffffffu) && table.pending_arrays.count(uint32_t(*key >> 32))) continue;
    JobStatus s;
    s.job_id = id;
    auto tr = tracked_.find(id);
    if (tr != tracked_.end()) tr->second.in_answer = found != nullptr;
    if (found) {
      const slurm_job_info_t& j = *found;
      s.state = map_state(j.job_state);
      s.node_list = j.nodes ? j.nodes : "";
      s.start_wall_ns = int64_t(j.start_time) * 1000000000;
      s.end_wall_ns = int64_t(j.end_time) * 1000000000;
      if (WIFSIGNALED(j.exit_code)) s.signal = WTERMSIG(j.exit_code);
      else s.exit_code = WEXITSTATUS(j.exit_code);
      if (s.state == JobState::Pending && j.state_reason != WAIT_NO_REASON) {  // why it waits, as squeue says it
        // Led by the reason's name (what --fatal_pending matches), with Slurm's description when it adds one.
        const std::string code = slurm_job_reason_string(job_state_reason(j.state_reason));
        const std::string desc = j.state_desc ? j.state_desc : "";
        s.reason = desc.empty() || starts_with(desc, code) ? (desc.empty() ? code : desc) : code + " (" + desc + ")";
      }
      if (tr != tracked_.end()) {
        tr->second.seen = true;
        if (job_state_final(s.state)) s.reason = final_reason(tr->second.run_dir, s, (tr->second.run_dir / ("slurm-" + id + ".out")).string());
      }
    } else if (tr != tracked_.end()) {
      // Gone from the controller (MinJobAge): the run folder's exit marker says how it ended.
      s = resolve_missing_job(id, tr->second.run_dir, tr->second.missing_polls, "the Slurm controller");
    } else {
      s.state = JobState::Unknown;
    }
    out.push_back(s);
  }
  if (record_usage_) attach_usage(out);
  return out;
}

size_t SlurmScheduler::followed_tasks(const std::string& array) const {
  const std::string prefix = array + "_";
  size_t n = 0;
  for (auto it = tracked_.lower_bound(prefix); it != tracked_.end() && starts_with(it->first, prefix); ++it) ++n;
  return n;
}

void SlurmScheduler::cancel(const std::vector<std::string>& job_ids) {
  // An array every followed task of which goes is cancelled by its id, one request (an interrupted 100,000-run sweep
  // sent 50,000, which the controller took one by one for minutes); its tasks that ended were forgotten, and those
  // alive are all followed. Any other task goes by its own id.
  std::map<std::string, std::vector<const std::string*>> by_array;
  std::vector<const std::string*> each;
  for (auto& id : job_ids) {
    if (auto tr = tracked_.find(id); tr != tracked_.end()) tr->second.cancelled = true;
    const size_t u = id.find('_');
    if (u == std::string::npos) each.push_back(&id);
    else by_array[id.substr(0, u)].push_back(&id);
  }
  for (auto& [array, tasks] : by_array) {
    if (tasks.size() > 1 && followed_tasks(array) <= tasks.size()) slurm_kill_job2(array.c_str(), SIGKILL, 0, nullptr);
    else each.insert(each.end(), tasks.begin(), tasks.end());
  }
  for (const std::string* id : each) slurm_kill_job2(id->c_str(), SIGKILL, 0, nullptr);
}

// How long an ended job is reported as still running while its record has not reached slurmdbd (slurmctld sends
// it on its own schedule, within a second here); then it ends without its steps' figures, saying so.
constexpr int64_t kAccountingWaitNs = 20'000'000'000;

// Each job seen ending gets its steps' figures from ONE sacct for all of them (MaxRSS, AveRSS, TotalCPU, and
// ConsumedEnergy where an energy plugin measures), read once the job's own record is final in slurmdbd.
void SlurmScheduler::attach_usage(std::vector<JobStatus>& statuses) {
  std::vector<JobStatus*> ended;
  for (JobStatus& s : statuses)
    if (auto tr = tracked_.find(s.job_id); job_state_final(s.state) && tr != tracked_.end() && !tr->second.usage_done) ended.push_back(&s);
  if (ended.empty()) return;
  if (accounting_storage_ != "accounting_storage/slurmdbd") {
    for (JobStatus* s : ended) {
      tracked_[s->job_id].usage_done = true;
      s->usage_note = "Slurm keeps no job accounting here (AccountingStorageType=" + accounting_storage_ +
                      "): the steps' MaxRSS, AveRSS and TotalCPU are not recorded (each rank's own resource.* figures are)";
    }
    return;
  }
  std::vector<std::string> ids;
  for (JobStatus* s : ended) ids.push_back(s->job_id);
  const ProcessResult r = run_process({"sacct", "-j", join(ids, ","), "--noheader", "--parsable2", "--noconvert", "--format=" + std::string(kSacctFormat)}, {}, 60);
  const bool energy = !energy_plugin_.empty() && energy_plugin_ != "acct_gather_energy/none";
  std::map<std::string, SacctJob> answer = r.exit_code == 0 ? parse_sacct(r.out, energy) : std::map<std::string, SacctJob>{};
  const int64_t now = monotonic_ns();
  for (JobStatus* s : ended) {
    Tracked& t = tracked_[s->job_id];
    SacctJob acct = std::move(answer[s->job_id]);
    if (acct.final) {
      s->usage = std::move(acct.steps);
      t.usage_done = true;
      continue;
    }
    if (!t.ended_ns) t.ended_ns = now;
    // A job the controller has forgotten (MinJobAge) ended long ago: a record slurmdbd lacks now will not come. Nor
    // is it waited for when sacct itself failed (slurmdbd down, no permission), nor once a record failed to come in
    // time (a slurmdbd that far behind would add its delay to every run of the sweep).
    const bool recent = t.in_answer;
    if (recent && r.exit_code == 0 && !accounting_late_ && now - t.ended_ns < kAccountingWaitNs && !t.cancelled) {
      s->state = JobState::Running;  // ended, its record not yet in slurmdbd: asked again next cycle
      s->reason.clear();
      continue;
    }
    t.usage_done = true;
    if (t.cancelled) continue;
    // Said once a sweep (the driver prints each distinct note once): no job id in what repeats.
    const std::string lost = "the steps' MaxRSS, AveRSS and TotalCPU are not recorded";
    if (r.exit_code != 0) {
      s->usage_note = "Slurm accounting: sacct failed (" + printable(trim(r.err)) + "): " + lost;
    } else if (recent && !accounting_late_) {
      accounting_late_ = true;
      s->usage_note = "Slurm accounting had no final record of job " + s->job_id + " " + std::to_string(kAccountingWaitNs / 1'000'000'000) +
                      " s after it ended: " + lost + ", and later jobs are not waited for";
    } else {
      s->usage_note = "Slurm accounting had no final record of some jobs when they ended: for those, " + lost;
    }
  }
}

void SlurmScheduler::check(const std::vector<JobSpec>& jobs) {
  if (jobs.empty()) return;
  // Runs and service jobs may ask differently (--node_feature, --db_node_feature): every job's own request.
  for (auto& job : jobs) slurm_request(job);  // unknown --batch_args keys, GRES or memory contradictions
  partition_info_msg_t* raw_parts = nullptr;
  if (slurm_load_partitions(0, &raw_parts, SHOW_ALL) != SLURM_SUCCESS) throw UserError("cannot read Slurm partitions: " + slurm_error());
  std::unique_ptr<partition_info_msg_t, void (*)(partition_info_msg_t*)> parts(raw_parts, slurm_free_partition_info_msg);
  std::map<std::string, int> capacity;
  std::string default_partition;
  for (uint32_t i = 0; i < parts->record_count; ++i) {
    const partition_info_t& p = parts->partition_array[i];
    capacity[p.name] = int(p.total_nodes);
    if (p.flags & PART_FLAG_DEFAULT) default_partition = p.name;
  }
  std::vector<std::string> names;
  for (auto& [name, n] : capacity) names.push_back(name);
  std::optional<std::map<std::string, std::set<std::string>>> features;  // per partition, read once when a job asks some
  for (const JobSpec& job : jobs) {
    const SchedulerOptions& o = job.options;
    const std::string pname = o.partition.empty() ? default_partition : o.partition;
    if (!capacity.count(pname))
      throw UserError(o.partition.empty() ? "Slurm has no default partition; give --partition (partitions: " + join(names, ", ") + ")"
                                          : "--partition: Slurm has no partition '" + o.partition + "' (partitions: " + join(names, ", ") + ")");
    if (job.total_nodes() > capacity[pname])
      throw UserError("run " + job.name + " needs " + std::to_string(job.total_nodes()) + " nodes but partition '" + pname + "' has " +
                      std::to_string(capacity[pname]) + "; nothing was submitted");
    if (o.constraint.empty()) continue;
    if (!features) {
      node_info_msg_t* nodes = nullptr;
      if (slurm_load_node(0, &nodes, SHOW_ALL) != SLURM_SUCCESS) throw UserError("cannot read Slurm nodes: " + slurm_error());
      slurm_populate_node_partitions(nodes, parts.get());  // fills each node's `partitions`, as sinfo does
      features.emplace();
      for (uint32_t i = 0; i < nodes->record_count; ++i)
        if (nodes->node_array[i].features && nodes->node_array[i].partitions)
          for (auto& part : split(nodes->node_array[i].partitions, ','))
            for (auto& f : split(nodes->node_array[i].features, ',')) (*features)[trim(part)].insert(trim(f));
      slurm_free_node_info_msg(nodes);
    }
    const std::set<std::string>& here = (*features)[pname];
    for (auto& f : feature_words(o.constraint))
      if (!here.count(f))
        throw UserError("--constraint: no node of Slurm partition '" + pname + "' has feature '" + f + "' (features there: " +
                        join(std::vector<std::string>(here.begin(), here.end()), ", ") + ")");
  }
}

}  // namespace fanout
