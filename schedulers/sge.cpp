#include "schedulers/sge.h"

#include <algorithm>
#include <optional>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "common/clock.h"
#include "common/error.h"
#include "common/files.h"
#include "common/subprocess.h"
#include "common/text.h"
#include "launchers/step_launcher.h"
#include "results/layout.h"
#include "schedulers/batch_script.h"

namespace fanout {

namespace fs = std::filesystem;

namespace {

// How long a job that has left qstat may go without an accounting record before it counts as vanished: qmaster
// writes the accounting file on its own schedule (reporting_params flush_time, 15 s by default).
constexpr int64_t kAccountingGraceNs = 120'000'000'000;
// How long a completed job waits for that record when its usage is wanted (a site's default flush_time is 15 s).
constexpr int64_t kUsageWaitNs = 30'000'000'000;

const std::string* batch_arg(const JobSpec& job, const std::string& key) {
  for (auto& [k, v] : job.options.batch_args)
    if (k == key) return &v;
  return nullptr;
}

// Slots a job asks: its nodes, each its busiest node's CPUs (SGE counts slots; a PE's allocation rule decides
// how they spread over hosts).
int64_t slots_of(const JobSpec& job) { return int64_t(job.total_nodes()) * job.busiest_node().cpus; }

// The host of each node of the job, one line per node in hosts.all: a node is the next `cpus` slots of
// $PE_HOSTFILE ("host slots queue processors" lines); a job of one slot has no PE and runs on this host.
std::string hostfile_setup(const JobSpec& job) {
  const std::string per_node = std::to_string(job.busiest_node().cpus), nodes = std::to_string(job.total_nodes());
  return "if [ -n \"${PE_HOSTFILE:-}\" ] && [ -s \"$PE_HOSTFILE\" ]; then\n"
         "  awk '{for (i = 0; i < $2; i++) print $1}' \"$PE_HOSTFILE\" | awk -v n=" + per_node + " '(NR - 1) % n == 0' > hosts.all\n"
         "else\n"
         "  for _ in $(seq " + nodes + "); do hostname; done > hosts.all\n"
         "fi\n" +
         mpirun_host_files(job, "hosts.all");
}

void refuse_unsafe_directives(const JobSpec& job) {
  const std::string why = "line (blanks, quotes, '#' and backslashes would start other qsub options)";
  refuse_unsplittable("--partition", job.options.partition, "cannot go on a #$ -q " + why);
  refuse_unsplittable("--account", job.options.account, "cannot go on a #$ -P " + why);
  if (const std::string* pe = batch_arg(job, "pe")) refuse_unsplittable("--batch_args pe", *pe, "cannot go on a #$ -pe " + why);
  // -o takes [[host]:]path: a colon would name a host.
  if (job.run_dir.string().find(':') != std::string::npos)
    throw UserError("--results_dir: '" + printable(job.run_dir.string()) + "' has a ':', which qsub -o reads as host:path; use one without");
  refuse_unsplittable("--results_dir", job.run_dir.string(),
                      "is the run folder, which #$ -o names: qsub would split it at blanks or quotes; use a --results_dir without them with SGE");
  // qsub -N refuses these (sge_job.c job_check_name); they would fail at submission, after a sweep started.
  if (job.name.find_first_of("\n\t\r/:@\\*?") != std::string::npos)
    throw UserError("run " + printable(job.name) + ": Grid Engine job names may not hold / : @ \\ * ? or blanks");
  for (auto& [k, v] : job.options.batch_args)
    if (k != "pe")
      throw UserError("--batch_args " + k + "=" + printable(v) + ": the sge launcher takes pe=NAME (the parallel environment) only; " +
                      "queue and project are --partition and --account");
}

int to_int(const std::string& s) {
  auto v = parse_int(trim(s.substr(0, s.find_first_of(" \t("))));
  return v ? int(*v) : 0;
}

// The shepherd's failure codes (SSTATE_* in SGE's execution_states.h) that say more than "failed".
struct FailedCode {
  int code;
  JobState state;
};
constexpr FailedCode kFailedCodes[] = {
    {22, JobState::NodeFail},  // ESSTATE_EXECD_LOST_RUNNING: the execd of a running job was lost
    {37, JobState::Timeout},   // SSTATE_QMASTER_ENFORCED_LIMIT: h_rt (or h_cpu, h_vmem) enforced by qmaster
};

}  // namespace

std::string sge_job_script(const JobSpec& job, const std::string& pe_found) {
  refuse_unsafe_directives(job);
  const SchedulerOptions& o = job.options;
  std::string s = "#!/bin/bash\n";
  auto line = [&](const std::string& l) { s += "#$ " + l + "\n"; };
  line("-N " + job.name);
  line("-S /bin/bash");
  line("-wd " + job.run_dir.string());
  line("-o " + (job.run_dir / "sge.out").string());
  line("-j y");
  line("-l h_rt=" + walltime_hhmmss(job.walltime_s));
  if (const int64_t slots = slots_of(job); slots > 1) {
    const std::string* asked = batch_arg(job, "pe");
    line("-pe " + (asked ? *asked : pe_found.empty() ? std::string("<pe: --batch_args pe=NAME>") : pe_found) + " " + std::to_string(slots));
  }
  if (!o.partition.empty()) line("-q " + o.partition);
  if (!o.account.empty()) line("-P " + o.account);
  if (o.hold) line("-h");
  s += "# fanout job " + job.name + "\n";
  const StepLauncher* launcher = o.step_launcher.empty() ? &mpirun_launcher() : find_step_launcher(o.step_launcher);
  if (!launcher) throw UserError("--step_launcher: unknown step launcher '" + o.step_launcher + "' (known: " + join(step_launcher_names(), ", ") + ")");
  std::vector<std::vector<std::string>> prefixes;
  for (size_t i = 0; i < job.steps.size(); ++i) prefixes.push_back(launcher->prefix(job, i));
  return s + batch_script_body(job, prefixes, launcher == &mpirun_launcher() ? hostfile_setup(job) : "");
}

std::map<std::string, std::string> parse_qstat_xml(const std::string& xml) {
  if (xml.find("<job_info") == std::string::npos) throw UserError("qstat -xml: not qstat's XML: " + printable(xml.substr(0, 200)));
  std::map<std::string, std::string> out;
  auto tag = [](const std::string& block, const std::string& name) {
    const std::string open = "<" + name + ">", close = "</" + name + ">";
    const size_t a = block.find(open);
    if (a == std::string::npos) return std::string();
    const size_t b = block.find(close, a);
    return b == std::string::npos ? std::string() : trim(block.substr(a + open.size(), b - a - open.size()));
  };
  for (size_t at = xml.find("<job_list"); at != std::string::npos; at = xml.find("<job_list", at + 1)) {
    const size_t end = xml.find("</job_list>", at);
    if (end == std::string::npos) throw UserError("qstat -xml: a <job_list> is not closed");
    const std::string block = xml.substr(at, end - at);
    const std::string job = tag(block, "JB_job_number"), state = tag(block, "state"), tasks = tag(block, "tasks");
    if (job.empty()) continue;
    if (tasks.empty()) {
      out[job] = state;
      continue;
    }
    // A running task is listed alone ("3"); pending ones together: "2,3", "4-10:2" or both, comma-separated.
    for (auto& part : split(tasks, ',')) {
      const auto dash = part.find('-');
      const auto colon = part.find(':');
      auto first = parse_int(part.substr(0, dash));
      auto last = dash == std::string::npos ? first : parse_int(part.substr(dash + 1, colon == std::string::npos ? std::string::npos : colon - dash - 1));
      auto step = colon == std::string::npos ? std::optional<int64_t>(1) : parse_int(part.substr(colon + 1));
      if (!first || !last || !step || *step < 1 || *last < *first || *last - *first > 10'000'000)
        throw UserError("qstat -xml: job " + job + " lists tasks '" + printable(tasks) + "'");
      for (int64_t t = *first; t <= *last; t += *step) out[job + "." + std::to_string(t)] = state;
    }
  }
  return out;
}

namespace {

// qacct's sizes (sge_ulong.c double_print_memory_to_dstring): "%.3f" and K, M, G or T for powers of 1024, then 'B'.
std::optional<double> qacct_bytes(const std::string& text) {
  const char* p = text.c_str();
  char* end = nullptr;
  const double v = std::strtod(p, &end);
  if (end == p) return std::nullopt;
  static const char kUnits[] = "KMGT";
  double scale = 1;
  if (const char* u = *end ? std::strchr(kUnits, *end) : nullptr) scale = std::pow(1024.0, double(u - kUnits + 1)), ++end;
  if (*end != 'B') return std::nullopt;
  return v * scale;
}

// qacct's seconds: "0.181s" (8.1.9), "0.181" (older).
std::optional<double> qacct_seconds(const std::string& text) {
  const char* p = text.c_str();
  char* end = nullptr;
  const double v = std::strtod(p, &end);
  if (end == p || (*end && *end != 's')) return std::nullopt;
  return v;
}

// What a record measured: CPU from the shepherd's rusage of the job script and all it waited for; maxvmem, io and
// iow from the execd's data collector, which leaves them 0 where it measured nothing (this test cell): then not
// figures. ru_maxrss is Linux's KiB, which qacct prints as if bytes ("20.094KB" is 20.094 MiB).
void add_qacct_usage(QacctRecord& r, const std::string& key, const std::string& value) {
  auto add = [&](const char* name, const char* unit, std::optional<double> v, double scale = 1) {
    if (v) r.usage.push_back({name, unit, *v * scale});
  };
  if (key == "cpu") add("cpu", "s", qacct_seconds(value));
  else if (key == "ru_utime") add("user_cpu", "s", qacct_seconds(value));
  else if (key == "ru_stime") add("system_cpu", "s", qacct_seconds(value));
  else if (key == "ru_maxrss") add("max_rss", "B", qacct_bytes(value), 1024);
  else if (key == "maxvmem" || key == "io" || key == "iow") {
    std::optional<double> v = key == "iow" ? qacct_seconds(value) : qacct_bytes(value);
    if (v && *v > 0) add(key == "maxvmem" ? "max_vmem" : key == "io" ? "io" : "io_wait", key == "iow" ? "s" : "B", v);
  }
}

// A record's usage as the seam reports it: the whole job's, on the host qacct names.
std::vector<StepUsage> usage_of(const QacctRecord& r) {
  if (r.usage.empty()) return {};
  return {{"", r.hostname, r.usage}};
}

}  // namespace

std::vector<QacctRecord> parse_qacct(const std::string& text) {
  std::vector<QacctRecord> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (starts_with(line, "=====")) {
      out.emplace_back();
      continue;
    }
    if (out.empty()) continue;
    const auto sp = line.find_first_of(" \t");
    if (sp == std::string::npos) continue;
    const std::string key = line.substr(0, sp), value = trim(line.substr(sp));
    QacctRecord& r = out.back();
    if (key == "jobnumber") r.job = value;
    else if (key == "taskid") r.task = value == "undefined" ? 0 : to_int(value);
    else if (key == "hostname") r.hostname = value;
    else if (key == "exit_status") r.exit_status = to_int(value);
    else if (key == "ru_wallclock") r.wallclock_s = to_int(value);  // "5s" in 8.1.9, "5" in older
    else if (key == "failed") {
      r.failed = to_int(value);
      const auto colon = value.find(':');
      r.failed_text = colon == std::string::npos ? "" : trim(value.substr(colon + 1));
    } else {
      add_qacct_usage(r, key, value);
    }
  }
  return out;
}

JobStatus sge_status(const std::string& id, const QacctRecord& acct, const JobSpec& job) {
  JobStatus s;
  s.job_id = id;
  s.node_list = acct.hostname;
  s.exit_code = acct.exit_status;
  s.usage = usage_of(acct);
  if (acct.exit_status > 128 && acct.exit_status < 128 + 65) s.signal = acct.exit_status - 128, s.exit_code = 0;
  const auto known = std::find_if(std::begin(kFailedCodes), std::end(kFailedCodes), [&](const FailedCode& c) { return c.code == acct.failed; });
  if (known != std::end(kFailedCodes)) s.state = known->state;
  // The execd's own h_rt kill: SIGKILL once the wall clock reached the limit (the shepherd says only "failed 100").
  else if (s.signal == 9 && acct.wallclock_s >= job.walltime_s) s.state = JobState::Timeout;
  else if (acct.failed == 0 && acct.exit_status == 0) s.state = JobState::Completed;
  else s.state = JobState::Failed;
  if (s.state == JobState::Completed) return s;
  const std::string step = describe_step_failure(job.run_dir);
  std::string how = "qacct: failed " + std::to_string(acct.failed) + (acct.failed_text.empty() ? "" : " (" + acct.failed_text + ")") +
                    ", exit status " + std::to_string(acct.exit_status) + (s.signal ? " (signal " + std::to_string(s.signal) + ", " + signal_name(s.signal) + ")" : "");
  if (s.state == JobState::Timeout) how = "killed at its wall time of " + walltime_hhmmss(job.walltime_s) + " (h_rt; " + how + ")";
  s.reason = (step.empty() ? how + "; logs: " + (job.run_dir / "sge.out").string() : step + " (" + how + ")");
  return s;
}

bool grid_engine_banner(const std::string& qstat_version_output, std::string* version) {
  const std::string text = trim(qstat_version_output);  // SGE prints it all on stderr: the first line that is not blank
  const std::string first = trim(text.substr(0, text.find('\n')));
  for (const char* name : {"SGE ", "GE ", "OGS/GE ", "UGE ", "Univa Grid Engine", "Altair Grid Engine"})
    if (starts_with(first, name)) {
      if (version) *version = first;
      return true;
    }
  return false;
}

bool qstat_is_grid_engine(std::string* version) {
  if (!program_on_path("qstat")) return false;
  auto r = run_process({"qstat", "--version"}, {}, 30);  // Grid Engine's answers with its usage, under its version
  return grid_engine_banner(r.out + "\n" + r.err, version);
}

bool sge_available() {
  const char* root = std::getenv("SGE_ROOT");
  return root && *root && qstat_is_grid_engine();
}

SgeScheduler::SgeScheduler() {
  if (!program_on_path("qsub") || !program_on_path("qstat")) throw UserError("--launcher=sge: qsub/qstat are not on PATH");
  if (!qstat_is_grid_engine())
    throw UserError("--launcher=sge: the qstat on PATH is not Grid Engine's (`qstat --version` names no Grid Engine version): PBS's tools take --launcher=pbs");
}

void SgeScheduler::check(const std::vector<JobSpec>& jobs) {
  bool needs_pe = false;
  for (auto& j : jobs) {
    refuse_unsafe_directives(j);
    needs_pe = needs_pe || (slots_of(j) > 1 && !batch_arg(j, "pe"));
  }
  if (!needs_pe || !pe_.empty()) return;
  auto r = run_process({"qconf", "-spl"}, {}, 60);
  std::vector<std::string> pes;
  for (auto& l : split(r.out, '\n'))
    if (!trim(l).empty()) pes.push_back(trim(l));
  if (r.exit_code == 0 && pes.size() == 1) {
    pe_ = pes.front();
    return;
  }
  const auto big = std::find_if(jobs.begin(), jobs.end(), [](const JobSpec& j) { return slots_of(j) > 1 && !batch_arg(j, "pe"); });
  throw UserError("run " + big->name + " asks " + std::to_string(slots_of(*big)) + " slots, which Grid Engine gives through a parallel environment: " +
                  (pes.empty() ? "this cell has none (qconf -spl lists none); an administrator adds one (qconf -ap)"
                               : "name one with --batch_args pe=NAME (this cell has: " + join(pes, ", ") + ")") +
                  "; nothing was submitted");
}

std::string SgeScheduler::qsub(const std::vector<std::string>& args, const fs::path& cwd, const std::string& what) {
  std::vector<std::string> terse = {"-terse"};
  terse.insert(terse.end(), args.begin(), args.end());
  const std::string printed = run_qsub(terse, cwd, what);
  // -terse prints the job number, or for an array "<job>.<first>-<last>:<step>".
  const std::string id = printed.substr(0, printed.find('.'));
  if (!parse_int(id)) throw UserError("qsub refused " + what + ": " + printed);
  return id;
}

std::string SgeScheduler::submit(const JobSpec& job) {
  job.validate();
  fs::path script = job.run_dir / layout::kJobScript;
  write_file_atomic(script, render_script(job), 0755);
  std::string id = qsub({script.string()}, job.run_dir, "run " + job.name);
  tracked_[id] = {job};
  return id;
}

std::vector<Scheduler::Submitted> SgeScheduler::submit_array(const std::vector<JobSpec>& jobs, int max_parallel) {
  std::vector<Submitted> out(jobs.size());
  for (auto& [head, members] : array_shapes(jobs, [this](const JobSpec& j) { return render_script(j); })) {
    const fs::path root = jobs[members.front()].run_dir.parent_path();
    const std::string range = "1-" + std::to_string(members.size());
    std::string body = head + "#$ -t " + range + "\n";
    if (max_parallel > 0) body += "#$ -tc " + std::to_string(max_parallel) + "\n";
    body += "case \"${SGE_TASK_ID:-}\" in\n";
    for (size_t k = 0; k < members.size(); ++k) {
      const JobSpec& j = jobs[members[k]];
      write_file_atomic(j.run_dir / layout::kJobScript, render_script(j), 0755);
      // The task's output goes to its run's folder, as a job of its own would.
      body += std::to_string(k + 1) + ") exec /bin/bash " + shell_quote((j.run_dir / layout::kJobScript).string()) + " >" +
              shell_quote((j.run_dir / "sge.out").string()) + " 2>&1 ;;\n";
    }
    body += "esac\necho \"fanout: no run for array task '${SGE_TASK_ID:-}'\" >&2\nexit 1\n";
    fs::path script = root / ("sge-array-" + std::to_string(++array_count_) + ".sh");
    write_file_atomic(script, body, 0755);
    // The lambda names a copy, not the structured binding (clang before 16 cannot capture one).
    const std::string what = "an array of " + std::to_string(members.size()) + " runs";
    const auto array_id = submit_array_script([&] { return qsub({script.string()}, root, what); }, script, members, out);
    if (!array_id) continue;
    for (size_t k = 0; k < members.size(); ++k) {
      out[members[k]].id = *array_id + "." + std::to_string(k + 1);
      tracked_[out[members[k]].id] = {jobs[members[k]]};
    }
  }
  return out;
}

bool SgeScheduler::adopt(const std::string& job_id, const JobSpec& job) {
  tracked_[job_id] = {job};
  return true;
}

JobStatus SgeScheduler::finished(const std::string& id, Tracked& t, std::map<std::string, std::vector<QacctRecord>>& acct) {
  // The job script's own markers say how its steps ended; the accounting record says what ended the script.
  const auto marker = read_job_exit_marker(t.job.run_dir);
  const std::string job = id.substr(0, id.find('.'));
  const int task = id.find('.') == std::string::npos ? 0 : to_int(id.substr(id.find('.') + 1));
  auto record = [&]() -> const QacctRecord* {
    if (!acct.count(job)) acct[job] = parse_qacct(run_process({"qacct", "-j", job}, {}, 120).out);
    for (const QacctRecord& r : acct[job])
      if (r.task == task) return &r;
    return nullptr;
  };
  if (marker && *marker == 0) {
    int polls = 0;
    JobStatus s = resolve_missing_job(id, t.job.run_dir, polls, "SGE");
    if (!record_usage_ || t.cancelled) return s;
    // Its usage is in the accounting record, which qmaster writes on its own schedule (flush_time): reported as
    // running until it is there, for a bounded time, then completed without it, saying so.
    if (const QacctRecord* r = record()) {
      s.usage = usage_of(*r);
      return s;
    }
    const int64_t now = monotonic_ns();
    if (!t.completed_ns) t.completed_ns = now;
    if (!accounting_late_ && now - t.completed_ns < kUsageWaitNs) {
      s.state = JobState::Running;
      return s;
    }
    // A cell that far behind (or writing no accounting) would add its delay to every run: said once, not waited again.
    s.usage_note = accounting_late_ ? std::string("Grid Engine had no accounting record of some jobs when they completed: for those, cpu, ru_maxrss "
                                                  "and maxvmem are not recorded")
                                    : "Grid Engine had no accounting record of job " + id + " " + std::to_string(kUsageWaitNs / 1'000'000'000) +
                                          " s after it completed (qacct -j " + job + "; the cell writes it every reporting_params flush_time): its " +
                                          "cpu, ru_maxrss and maxvmem are not recorded, and later jobs are not waited for";
    accounting_late_ = true;
    return s;
  }
  if (const QacctRecord* r = record()) {
    JobStatus s = sge_status(id, *r, t.job);
    if (t.cancelled && s.state != JobState::Completed) s.state = JobState::Cancelled;
    return s;
  }
  if (marker) {  // failed, and no record yet: the marker's status
    int polls = 0;
    return resolve_missing_job(id, t.job.run_dir, polls, "SGE");
  }
  const int64_t now = monotonic_ns();
  if (!t.gone_since_ns) t.gone_since_ns = now;
  JobStatus s;
  s.job_id = id;
  s.state = JobState::Unknown;
  if (now - t.gone_since_ns > kAccountingGraceNs) {
    s.state = JobState::Failed;
    s.reason = "the job left qstat and qacct has no record of it after " + std::to_string(kAccountingGraceNs / 1'000'000'000) +
               " s, and it left no exit marker in " + t.job.run_dir.string();
  }
  return s;
}

std::vector<JobStatus> SgeScheduler::poll(const std::vector<std::string>& job_ids) {
  ++queries_;
  auto r = run_process({"qstat", "-xml"}, {}, 120);
  std::map<std::string, std::string> listed;
  bool ok = r.exit_code == 0;
  if (ok) {
    try {
      listed = parse_qstat_xml(r.out);
    } catch (const UserError&) {
      ok = false;
    }
  }
  std::map<std::string, std::vector<QacctRecord>> acct;  // qacct once per job number this cycle
  std::vector<std::string> in_error;
  std::vector<JobStatus> out;
  for (auto& id : job_ids) {
    JobStatus s;
    s.job_id = id;
    s.state = JobState::Unknown;  // a failed query, or a job not ours: keep waiting
    auto tr = tracked_.find(id);
    if (tr == tracked_.end() || !ok) {
    } else if (auto it = listed.find(id); it != listed.end()) {
      const std::string& st = it->second;
      tr->second.gone_since_ns = 0;
      if (st.find('E') != std::string::npos) {
        // Eqw: the job could not start and waits for an administrator; it would wait forever.
        s.state = JobState::Failed;
        s.reason = "Grid Engine holds the job in error state (" + st + "; `qstat -j " + id.substr(0, id.find('.')) +
                   "` says why); it was deleted; logs: " + (tr->second.job.run_dir / "sge.out").string();
        in_error.push_back(id);
      } else if (st.find('r') != std::string::npos || st.find('t') != std::string::npos || st.find('s') != std::string::npos ||
                 st.find('S') != std::string::npos || st.find('T') != std::string::npos || st.find('d') != std::string::npos) {
        s.state = JobState::Running;
      } else {
        s.state = JobState::Pending;  // qw, hqw, Rq
      }
    } else {
      s = finished(id, tr->second, acct);
    }
    out.push_back(s);
  }
  if (!in_error.empty()) cancel(in_error);
  return out;
}

void SgeScheduler::cancel(const std::vector<std::string>& job_ids) {
  if (job_ids.empty()) return;
  std::vector<std::string> argv = {"qdel"};
  for (auto& id : job_ids) {
    if (auto tr = tracked_.find(id); tr != tracked_.end()) tr->second.cancelled = true;
    argv.push_back(id);  // "<job>.<task>" deletes that task of an array
  }
  run_process(argv, {}, 120);
}

}  // namespace fanout
