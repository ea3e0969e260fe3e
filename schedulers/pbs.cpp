#include "schedulers/pbs.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/files.h"
#include "common/subprocess.h"
#include "common/text.h"
#include "schedulers/batch_script.h"
#include "schedulers/sge.h"
#include "launchers/step_launcher.h"
#include "results/layout.h"

namespace fanout {

namespace fs = std::filesystem;

namespace {

// Per-step host files cut from $PBS_NODEFILE (one line per MPI process there; unique hosts in order here).
std::string hostfile_setup(const JobSpec& job) {
  return "awk '!seen[$0]++' \"${PBS_NODEFILE:?PBS_NODEFILE is not set: use --step_launcher=srun on a Slurm-backed PBS}\" > hosts.all\n" +
         mpirun_host_files(job, "hosts.all");
}

bool file_contains(const fs::path& file, const std::string& text) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    if (line.find(text) != std::string::npos) return true;
  return false;
}

// qstat's stderr when it failed only because some ids are gone from the server (finished and out of its
// history, or never known): "qstat: Unknown Job Id 12.srv" (also "Job has finished, use -x ..."). Those jobs
// are resolved from their exit markers; any other error makes the poll a failed one.
bool names_a_gone_job(const std::string& line) {
  return line.find("Unknown Job Id") != std::string::npos || line.find("Job has finished") != std::string::npos;
}

bool only_unknown_job_errors(const std::string& err) {
  std::istringstream in(err);
  bool any = false;
  for (std::string line; std::getline(in, line);) {
    if (trim(line).empty()) continue;
    any = true;
    if (!names_a_gone_job(line)) return false;
  }
  return any;
}

// The job ids qstat's errors name as unknown or finished, as whole words: a substring test took 102.srv for
// reported when the server named 1102.srv.
std::set<std::string> ids_named_in_errors(const std::string& err) {
  std::set<std::string> ids;
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);) {
    if (!names_a_gone_job(line)) continue;
    std::istringstream words(line);
    for (std::string w; words >> w;) ids.insert(w);
  }
  return ids;
}

}  // namespace

bool pbs_available() { return program_on_path("qsub") && program_on_path("qstat") && !qstat_is_grid_engine(); }

void refuse_unsafe_directives(const JobSpec& job) {
  // qsub splits a #PBS line into words as a shell would (and PBS Pro reads quotes): a blank or a quote in a
  // value starts another option (-q "a -v LD_PRELOAD=x"). Slurm gets these fields through libslurm, PBS only
  // through these lines, so such values are refused, naming the flag, before anything is written.
  const auto refuse = refuse_unsplittable;
  refuse("--partition", job.options.partition, "cannot go on a #PBS -q line (blanks, quotes, '#' and backslashes would start other qsub options)");
  refuse("--account", job.options.account, "cannot go on a #PBS -A line (blanks, quotes, '#' and backslashes would start other qsub options)");
  refuse("--results_dir", job.run_dir.string(),
         "is the run folder, which #PBS -o names: qsub would split it at blanks or quotes; use a --results_dir without them with PBS");
}

void PbsScheduler::check(const std::vector<JobSpec>& jobs) {
  for (auto& j : jobs) refuse_unsafe_directives(j);
}

std::string pbs_job_script(const JobSpec& job, PbsFlavor flavor) {
  refuse_unsafe_directives(job);
  const SchedulerOptions& o = job.options;
  const JobSpec::NodeLoad most = job.busiest_node();
  const std::string nodes = std::to_string(job.total_nodes()), cpus = std::to_string(most.cpus);
  std::string s = "#!/bin/bash\n";
  auto line = [&](const std::string& l) { s += "#PBS " + l + "\n"; };
  line("-N " + job.name);
  if (flavor == PbsFlavor::Pro) {
    // One chunk per node with what its steps ask together: CPUs, MPI processes, GPUs, memory.
    line("-l select=" + nodes + ":ncpus=" + cpus + ":mpiprocs=" + std::to_string(most.tasks) +
         (most.gpus ? ":ngpus=" + std::to_string(most.gpus) : "") + (most.memory_mb ? ":mem=" + std::to_string(most.memory_mb) + "mb" : ""));
    line(std::string("-l place=scatter") + (o.exclusive ? ":excl" : ""));
  } else {
    line("-l nodes=" + nodes + ":ppn=" + cpus + (most.gpus ? ":gpus=" + std::to_string(most.gpus) : ""));
    if (most.memory_mb) line("-l mem=" + std::to_string(int64_t(most.memory_mb) * job.total_nodes()) + "mb");
  }
  line("-l walltime=" + walltime_hhmmss(job.walltime_s));
  if (!o.partition.empty()) line("-q " + o.partition);
  if (!o.account.empty()) line("-A " + o.account);
  line("-j oe");
  line("-o " + (job.run_dir / "pbs.out").string());
  s += "# fanout job " + job.name + "\n";
  // mpirun on the nodes of $PBS_NODEFILE by default; srun on a PBS front end to Slurm.
  const StepLauncher* launcher = o.step_launcher.empty() ? &mpirun_launcher() : find_step_launcher(o.step_launcher);
  if (!launcher) throw UserError("--step_launcher: unknown step launcher '" + o.step_launcher + "' (known: " + join(step_launcher_names(), ", ") + ")");
  std::vector<std::vector<std::string>> prefixes;
  for (size_t i = 0; i < job.steps.size(); ++i) prefixes.push_back(launcher->prefix(job, i));
  return s + batch_script_body(job, prefixes, launcher == &mpirun_launcher() ? hostfile_setup(job) : "");
}

QstatJobs parse_qstat_text(const std::string& text) {
  QstatJobs jobs;
  std::map<std::string, std::string>* cur = nullptr;
  std::string* last = nullptr;  // the value a continuation line extends
  std::string indent;           // how this block's attribute lines are indented
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string t = trim(line);
    if (starts_with(t, "Job Id:")) {
      cur = &jobs[trim(t.substr(7))];
      last = nullptr;
      indent.clear();
      continue;
    }
    if (!cur || t.empty()) {
      last = nullptr;
      continue;
    }
    // qstat -f wraps long values (Variable_List, comment): PBS and Torque indent attributes by 4 spaces and
    // the rest of a wrapped value by a tab. The block's first line tells how its attributes are indented.
    const std::string lead = line.substr(0, line.find_first_not_of(" \t"));
    if (indent.empty()) indent = lead;
    const auto eq = t.find(" = ");
    if (lead == indent && eq != std::string::npos)
      last = &((*cur)[trim(t.substr(0, eq))] = trim(t.substr(eq + 3)));
    else if (last)
      *last += t;
  }
  return jobs;
}

QstatJobs parse_qstat_json(const std::string& text) {
  QstatJobs jobs;
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw UserError(std::string("qstat -F json: malformed output: ") + e.what());
  }
  if (!doc.is_object() || !doc.contains("Jobs")) return jobs;
  if (!doc["Jobs"].is_object()) throw UserError("qstat -F json: \"Jobs\" is not an object");
  for (auto& [id, attrs] : doc["Jobs"].items()) {
    if (!attrs.is_object()) continue;
    for (auto& [k, v] : attrs.items()) jobs[id][k] = v.is_string() ? v.get<std::string>() : v.dump();
  }
  return jobs;
}

namespace {

// The servers' own negative exit statuses (JOB_EXEC_*): OpenPBS src/include/job.h, and Torque's, which differ
// from -8 on (Torque 6 admin guide, "Job exit status").
struct ExecCode {
  long code;
  const char* name;
  JobState state;
};
constexpr ExecCode kSharedCodes[] = {  // -1 to -7 mean the same on both
    {-1, "JOB_EXEC_FAIL1: the job could not start", JobState::Failed},
    {-2, "JOB_EXEC_FAIL2: the job failed after its files were staged", JobState::Failed},
    {-3, "JOB_EXEC_RETRY: the job could not start, to be retried", JobState::Failed},
    {-4, "JOB_EXEC_INITABT: aborted on MoM initialisation", JobState::Failed},
    {-5, "JOB_EXEC_INITRST: aborted on MoM initialisation, checkpointed", JobState::Failed},
    {-6, "JOB_EXEC_INITRMG: aborted on MoM initialisation, to be rerun", JobState::Failed},
    {-7, "JOB_EXEC_BADRESRT: the restart failed", JobState::Failed},
};
constexpr ExecCode kOpenPbsCodes[] = {
    {-10, "JOB_EXEC_FAILUID: invalid user or group", JobState::Failed},
    {-11, "JOB_EXEC_RERUN: the job was rerun", JobState::Failed},
    {-12, "JOB_EXEC_CHKP: checkpointed and held", JobState::Failed},
    {-13, "JOB_EXEC_FAIL_PASSWORD: a bad password", JobState::Failed},
    {-14, "JOB_EXEC_RERUN_ON_SIS_FAIL: a sister MoM failed", JobState::NodeFail},
    {-15, "JOB_EXEC_QUERST: requeue requested", JobState::Failed},
    {-16, "JOB_EXEC_FAILHOOK_RERUN: a hook failed, to be rerun", JobState::Failed},
    {-17, "JOB_EXEC_FAILHOOK_DELETE: a hook failed, deleted", JobState::Failed},
    {-18, "JOB_EXEC_HOOK_RERUN: a hook asked for a rerun", JobState::Failed},
    {-19, "JOB_EXEC_HOOK_DELETE: a hook deleted the job", JobState::Failed},
    {-20, "JOB_EXEC_RERUN_MS_FAIL: the mother superior failed", JobState::NodeFail},
    {-21, "JOB_EXEC_FAIL_SECURITY: a security check failed", JobState::Failed},
    {-22, "JOB_EXEC_HOOKERROR: a hook errored", JobState::Failed},
    {-23, "JOB_EXEC_FAIL_KRB5: Kerberos credentials failed", JobState::Failed},
    {-24, "JOB_EXEC_KILL_NCPUS_BURST: killed for a burst of ncpus use", JobState::Failed},
    {-25, "JOB_EXEC_KILL_NCPUS_SUM: killed for exceeding ncpus", JobState::Failed},
    {-26, "JOB_EXEC_KILL_VMEM: killed for exceeding vmem", JobState::OutOfMemory},
    {-27, "JOB_EXEC_KILL_MEM: killed for exceeding mem", JobState::OutOfMemory},
    {-28, "JOB_EXEC_KILL_CPUT: killed for exceeding cput", JobState::Failed},
    {-29, "JOB_EXEC_KILL_WALLTIME: killed for exceeding walltime", JobState::Timeout},
    {-30, "JOB_EXEC_JOINJOB: could not join its sister MoMs", JobState::NodeFail},
};
constexpr ExecCode kTorqueCodes[] = {
    {-8, "JOB_EXEC_CMDFAIL: the user's command could not run", JobState::Failed},
    {-9, "JOB_EXEC_STDOUTFAIL: the output files could not be created", JobState::Failed},
    {-10, "JOB_EXEC_OVERLIMIT_MEM: exceeded a memory limit", JobState::OutOfMemory},
    {-11, "JOB_EXEC_OVERLIMIT_WT: exceeded a walltime limit", JobState::Timeout},
    {-12, "JOB_EXEC_OVERLIMIT_CPUT: exceeded a CPU time limit", JobState::Failed},
    {-13, "JOB_EXEC_RETRY_CGROUP: could not create its cgroups, to be retried", JobState::Failed},
    {-14, "JOB_EXEC_RETRY_PROLOGUE: the prologue failed, to be retried", JobState::Failed},
};

const ExecCode* find_exec_code(long code, PbsFlavor flavor) {
  auto in = [code](const ExecCode* first, const ExecCode* last) {
    const ExecCode* it = std::find_if(first, last, [&](const ExecCode& c) { return c.code == code; });
    return it == last ? nullptr : it;
  };
  if (const ExecCode* c = in(std::begin(kSharedCodes), std::end(kSharedCodes))) return c;
  return flavor == PbsFlavor::Pro ? in(std::begin(kOpenPbsCodes), std::end(kOpenPbsCodes)) : in(std::begin(kTorqueCodes), std::end(kTorqueCodes));
}

// PBS sizes (Libattr from_size, OpenPBS and Torque alike): an integer, then k, m, g, t or p for powers of 1024,
// then b (bytes) or w (8-byte words); read in any case.
std::optional<double> pbs_bytes(const std::string& text) {
  std::string t = trim(text);
  for (char& c : t) c = char(std::tolower(static_cast<unsigned char>(c)));
  size_t digits = 0;
  while (digits < t.size() && std::isdigit(static_cast<unsigned char>(t[digits]))) ++digits;
  if (digits == 0) return std::nullopt;
  double v = std::strtod(t.substr(0, digits).c_str(), nullptr);
  std::string unit = t.substr(digits);
  static const std::string kShifts = "kmgtp";
  if (!unit.empty() && kShifts.find(unit[0]) != std::string::npos) v *= std::pow(1024.0, double(kShifts.find(unit[0]) + 1)), unit.erase(0, 1);
  if (unit == "w") return v * 8;
  if (unit == "b" || unit.empty()) return v;
  return std::nullopt;
}

// PBS times (encode_time): HH:MM:SS, hours past 24; plain seconds in some accounting records.
std::optional<double> pbs_seconds(const std::string& text) {
  double total = 0;
  const std::vector<std::string> parts = split(trim(text), ':');
  if (parts.empty() || parts.size() > 3) return std::nullopt;
  for (auto& p : parts) {
    auto n = parse_int(p);
    if (!n || *n < 0) return std::nullopt;
    total = total * 60 + double(*n);
  }
  return total;
}

// resources_used of a finished job: `resources_used.cput = ...` lines in qstat -f's text, one nested object
// "resources_used":{...} in -F json (its numbers bare). mem and vmem are MoM's sampled sum over the job's processes
// (its peak), cput their CPU time; energy where a site's hook measures it (OpenPBS: kWh, Torque energy_used: J).
std::vector<UsageFigure> pbs_usage(const std::map<std::string, std::string>& attrs) {
  std::map<std::string, std::string> used;
  for (auto& [k, v] : attrs)
    if (starts_with(k, "resources_used.")) used[k.substr(15)] = v;
  if (auto it = attrs.find("resources_used"); it != attrs.end()) {
    try {
      const nlohmann::json doc = nlohmann::json::parse(it->second);
      if (doc.is_object())
        for (auto& [k, v] : doc.items()) used[k] = v.is_string() ? v.get<std::string>() : v.dump();
    } catch (const std::exception&) {
    }
  }
  std::vector<UsageFigure> out;
  auto add = [&](const char* name, const char* unit, std::optional<double> v, double scale = 1) {
    if (v) out.push_back({name, unit, *v * scale});
  };
  if (used.count("cput")) add("cpu", "s", pbs_seconds(used["cput"]));
  if (used.count("mem")) add("max_rss", "B", pbs_bytes(used["mem"]));
  if (used.count("vmem")) add("max_vmem", "B", pbs_bytes(used["vmem"]));
  auto positive = [](const std::string& v) -> std::optional<double> {
    char* end = nullptr;
    const double d = std::strtod(v.c_str(), &end);
    return end != v.c_str() && d > 0 ? std::optional<double>(d) : std::nullopt;
  };
  if (used.count("energy")) add("energy", "J", positive(used["energy"]), 3.6e6);
  else if (used.count("energy_used")) add("energy", "J", positive(used["energy_used"]));
  return out;
}

}  // namespace

JobStatus pbs_status(const std::string& id, const std::map<std::string, std::string>& attrs, const JobSpec& job, PbsFlavor flavor) {
  JobStatus s;
  s.job_id = id;
  auto get = [&](const char* k) {
    auto it = attrs.find(k);
    return it == attrs.end() ? std::string() : it->second;
  };
  const std::string st = get("job_state"), host = get("exec_host");
  for (auto& part : split(host, '+'))
    if (!part.empty()) s.node_list += (s.node_list.empty() ? "" : ",") + part.substr(0, part.find('/'));
  if (st == "Q" || st == "H" || st == "W" || st == "T" || st == "M") {
    s.state = JobState::Pending;
    return s;
  }
  if (st == "R" || st == "E" || st == "S" || st == "B" || st == "U") {
    s.state = JobState::Running;
    return s;
  }
  // Finished (F on PBS Pro with -x, C on Torque): the exit status, where the server gives one, else markers.
  if (auto used = pbs_usage(attrs); !used.empty()) s.usage.push_back({"", s.node_list, std::move(used)});
  std::string exit = get("Exit_status");
  if (exit.empty()) exit = get("exit_status");
  auto code = parse_int(exit);
  if (!code) {
    int polls = 0;
    JobStatus m = resolve_missing_job(id, job.run_dir, polls, "PBS");
    m.node_list = s.node_list;
    m.usage = s.usage;
    if (m.state == JobState::Unknown || m.state == JobState::Failed) {
      // Listed as finished but no marker: the job script never ran to its end.
      m.state = JobState::Failed;
      if (m.reason.empty() || m.reason.find("vanished") != std::string::npos)
        m.reason = "PBS lists the job as finished but it left no exit marker; logs: " + (job.run_dir / "pbs.out").string();
    }
    return m;
  }
  s.exit_code = int(*code);
  // PBS Pro reports a job killed by a signal as 256 + signal, and the server's own kills as negative JOB_EXEC_*
  // codes (OpenPBS -29, Torque -11 for walltime); older servers said it only in the comment.
  if (*code > 256) s.signal = int(*code - 256), s.exit_code = 0;
  const std::string comment = get("comment");
  // Before OpenPBS 22.05 a walltime kill reads as the shell's status (271: SIGTERM) and says so only in the
  // job's output, where MoM writes "=>> PBS: job killed: walltime N exceeded limit M".
  const bool walltime_kill_logged = *code > 256 && file_contains(job.run_dir / "pbs.out", "PBS: job killed: walltime");
  const ExecCode* exec = *code < 0 ? find_exec_code(*code, flavor) : nullptr;
  if (exec) s.state = exec->state;
  else if (walltime_kill_logged || (comment.find("walltime") != std::string::npos && comment.find("exceed") != std::string::npos))
    s.state = JobState::Timeout;
  else
    s.state = *code == 0 ? JobState::Completed : JobState::Failed;
  if (s.state != JobState::Completed) {
    std::string step = describe_step_failure(job.run_dir);
    s.reason = step.empty() ? "PBS exit status " + exit + (exec ? std::string(" (") + exec->name + ")" : "") +
                                  (comment.empty() ? "" : " (" + comment + ")") + "; logs: " + (job.run_dir / "pbs.out").string()
                            : step;
  }
  return s;
}

PbsScheduler::PbsScheduler() {
  if (!program_on_path("qsub") || !program_on_path("qstat")) throw UserError("--launcher=pbs: qsub/qstat are not on PATH");
  auto v = run_process({"qstat", "--version"}, {}, 30);
  // Grid Engine's tools share PBS's names, not its dialect (#$, -t, qstat -xml): never drive one as the other.
  if (std::string ge; grid_engine_banner(v.out + "\n" + v.err, &ge))
    throw UserError("--launcher=pbs: the qstat on PATH is Grid Engine's (" + ge + "): use --launcher=sge");
  flavor_ = (v.out + v.err).find("pbs_version") != std::string::npos ? PbsFlavor::Pro : PbsFlavor::Torque;
}

std::string PbsScheduler::qsub(const std::vector<std::string>& args, const fs::path& cwd, const std::string& what) {
  std::string id = run_qsub(args, cwd, what);
  if (id.find(' ') != std::string::npos) throw UserError("qsub refused " + what + ": " + id);
  return id;
}

std::string PbsScheduler::submit(const JobSpec& job) {
  job.validate();
  fs::path script = job.run_dir / layout::kJobScript;
  write_file_atomic(script, render_script(job), 0755);
  std::string id = qsub({script.string()}, job.run_dir, "run " + job.name);
  tracked_[id] = {job, 0, ""};
  return id;
}

std::vector<Scheduler::Submitted> PbsScheduler::submit_array(const std::vector<JobSpec>& jobs, int /*max_parallel*/) {
  std::vector<Submitted> out(jobs.size());
  for (auto& [head, members] : array_shapes(jobs, [this](const JobSpec& j) { return render_script(j); })) {
    const fs::path root = jobs[members.front()].run_dir.parent_path();
    std::string body = head;
    body += flavor_ == PbsFlavor::Pro ? "#PBS -J 0-" : "#PBS -t 0-";
    body += std::to_string(members.size() - 1) + "\n";
    body += "idx=${PBS_ARRAY_INDEX:-${PBS_ARRAYID:-${SLURM_ARRAY_TASK_ID:-}}}\ncase \"$idx\" in\n";
    for (size_t k = 0; k < members.size(); ++k) {
      write_file_atomic(jobs[members[k]].run_dir / layout::kJobScript, render_script(jobs[members[k]]), 0755);
      body += std::to_string(k) + ") exec /bin/bash " + shell_quote((jobs[members[k]].run_dir / layout::kJobScript).string()) + " ;;\n";
    }
    body += "esac\necho \"fanout: no run for array index '$idx'\" >&2\nexit 1\n";
    fs::path script = root / ("pbs-array-" + std::to_string(++array_count_) + ".sh");
    write_file_atomic(script, body, 0755);
    std::string range = "0-" + std::to_string(members.size() - 1);
    // The lambda takes a copy of what it names, not the structured binding (clang before 16 cannot capture one).
    const std::string what = "an array of " + std::to_string(members.size()) + " runs";
    const auto array_id = submit_array_script(
        [&] { return qsub({flavor_ == PbsFlavor::Pro ? "-J" : "-t", range, script.string()}, root, what); }, script, members, out);
    if (!array_id) continue;
    for (size_t k = 0; k < members.size(); ++k) {
      out[members[k]].id = *array_id + "#" + std::to_string(k);
      tracked_[out[members[k]].id] = {jobs[members[k]], 0, *array_id};
    }
  }
  return out;
}

// Asks qstat about our jobs only, by id (an array by its array id): another user's record can be malformed and
// must not fail our sweep. Ids go in chunks so the command line stays bounded. On PBS Pro the JSON form is read;
// where it is invalid (released OpenPBS prints numbers like 005 and backslashes unescaped: openpbs#1255, #2541)
// or leaves out ids it did not report as unknown (openpbs#2672: only the first id's job), the text form is
// asked for those. Returns false when a query failed for another reason than ids the server no longer knows.
bool PbsScheduler::query(const std::vector<std::string>& job_ids, QstatJobs& listed) {
  std::vector<std::string> ids;
  for (auto& id : job_ids) {
    auto tr = tracked_.find(id);
    const std::string& q = tr != tracked_.end() && !tr->second.array_id.empty() ? tr->second.array_id : id;
    if (std::find(ids.begin(), ids.end(), q) == ids.end()) ids.push_back(q);
  }
  bool ok = true;
  auto merge = [&](const QstatJobs& got) { listed.insert(got.begin(), got.end()); };
  auto ask = [&](std::vector<std::string> argv, const std::vector<std::string>& which) {
    argv.insert(argv.end(), which.begin(), which.end());
    auto r = run_process(argv, {}, 120);
    if (r.exit_code != 0 && !only_unknown_job_errors(r.err)) ok = false;
    return r;
  };
  constexpr size_t kIdsPerQuery = 500;
  for (size_t from = 0; from < ids.size(); from += kIdsPerQuery) {
    const std::vector<std::string> chunk(ids.begin() + long(from), ids.begin() + long(std::min(ids.size(), from + kIdsPerQuery)));
    if (flavor_ != PbsFlavor::Pro) {
      merge(parse_qstat_text(ask({"qstat", "-f"}, chunk).out));
      continue;
    }
    const auto r = ask({"qstat", "-x", "-f", "-F", "json"}, chunk);
    std::vector<std::string> again = chunk;  // all of them when the JSON is invalid
    try {
      const QstatJobs got = parse_qstat_json(r.out);
      merge(got);
      again.clear();
      const std::set<std::string> reported = ids_named_in_errors(r.err);
      for (auto& id : chunk)
        if (!got.count(id) && !reported.count(id)) again.push_back(id);
    } catch (const UserError&) {
    }
    if (!again.empty()) merge(parse_qstat_text(ask({"qstat", "-x", "-f"}, again).out));
  }
  return ok;
}

std::vector<JobStatus> PbsScheduler::poll(const std::vector<std::string>& job_ids) {
  ++queries_;
  QstatJobs listed;
  const bool ok = query(job_ids, listed);
  std::vector<JobStatus> out;
  for (auto& id : job_ids) {
    auto tr = tracked_.find(id);
    JobStatus s;
    s.job_id = id;
    s.state = JobState::Unknown;  // a failed query: keep waiting
    if (tr == tracked_.end()) {
    } else if (!tr->second.array_id.empty()) {
      // An array task: servers name tasks differently (12[3].srv, or a job id of its own behind Slurm's
      // wrapper), so its run's exit marker decides; it is alive while an array of ours is listed unfinished.
      bool arrays_alive = std::any_of(listed.begin(), listed.end(), [](auto& kv) {
        auto name = kv.second.find("Job_Name"), state = kv.second.find("job_state");
        return name != kv.second.end() && name->second == kArrayJobName && state != kv.second.end() &&
               state->second != "F" && state->second != "C" && state->second != "X";
      });
      if (read_job_exit_marker(tr->second.job.run_dir) || (ok && !arrays_alive))
        s = resolve_missing_job(id, tr->second.job.run_dir, tr->second.missing_polls, "PBS");
      else
        s.state = JobState::Running;
    } else if (auto it = listed.find(id); it != listed.end()) {
      s = pbs_status(id, it->second, tr->second.job, flavor_);
    } else if (ok) {
      s = resolve_missing_job(id, tr->second.job.run_dir, tr->second.missing_polls, "PBS");
    }
    out.push_back(s);
  }
  return out;
}

void PbsScheduler::cancel(const std::vector<std::string>& job_ids) {
  if (job_ids.empty()) return;
  std::vector<std::string> argv = {"qdel"};
  for (auto& id : job_ids) {
    auto tr = tracked_.find(id);
    std::string target = tr != tracked_.end() && !tr->second.array_id.empty() ? tr->second.array_id : id;
    if (std::find(argv.begin(), argv.end(), target) == argv.end()) argv.push_back(target);
  }
  run_process(argv, {}, 120);
}

}  // namespace fanout
