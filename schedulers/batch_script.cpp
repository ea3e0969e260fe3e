#include "schedulers/batch_script.h"

#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "common/error.h"
#include "common/subprocess.h"
#include "common/text.h"
#include "launchers/step_launcher.h"

namespace fanout {

namespace {
std::string quoted(const std::vector<std::string>& argv) {
  std::string s;
  for (auto& a : argv) s += (s.empty() ? "" : " ") + shell_quote(a);
  return s;
}
}  // namespace

std::string batch_script_body(const JobSpec& job, const std::vector<std::vector<std::string>>& step_prefixes,
                              const std::string& setup) {
  std::ostringstream s;
  s << "set -u\ncd " << shell_quote(job.run_dir.string()) << " || exit 1\n"
    << "rm -f " << kJobExitMarker << " " << kStepExitMarker << " kv.addr\n"
    << "export FANOUT_JOB_RANKS=" << job.total_ranks() << "\n";
  for (auto& [k, v] : job.env) s << "export " << k << "=" << shell_quote(v) << "\n";
  s << setup;
  if (!job.site_lines.empty()) s << "# the site profile\n" << job.site_lines;
  if (job.needs_rendezvous_service()) {
    // The ranks of different steps, or of an MPI program's step, meet through fanout's rendezvous service.
    s << "# rendezvous service for the " << job.total_ranks() << " ranks of all steps\n"
      << shell_quote(job.rank_exe.string()) << " --kv-server --ranks " << job.total_ranks()
      << " --address-file kv.addr >kv.log 2>&1 &\n"
      << "kv_pid=$!\n"
      << "for _ in $(seq 300); do [ -s kv.addr ] && break; kill -0 $kv_pid 2>/dev/null || break; sleep 0.1; done\n"
      << "if [ ! -s kv.addr ]; then echo 'fanout: the rendezvous service did not start; see kv.log' >&2; echo 1 > "
      << kJobExitMarker << "; exit 1; fi\n"
      << "read -r FANOUT_KV FANOUT_KV_TOKEN < kv.addr\nexport FANOUT_KV FANOUT_KV_TOKEN\n";
  }
  s << "declare -A role\n";
  for (size_t i = 0; i < job.steps.size(); ++i) {
    std::vector<std::string> argv = step_prefixes[i];
    auto r = rank_argv(job, i);
    argv.insert(argv.end(), r.begin(), r.end());
    const std::string& name = job.steps[i].role;
    auto lines = job.role_lines.find(name);
    // A role's site lines run in a subshell of its own, which then becomes the step (exec): $! stays the step.
    if (lines != job.role_lines.end() && !lines->second.empty()) s << "(\n" << lines->second << "exec " << quoted(argv) << "\n)";
    else s << quoted(argv);
    s << " >>" << shell_quote(name + ".out") << " 2>>" << shell_quote(name + ".err") << " &\n"
      << "role[$!]=" << shell_quote(name) << "\n";
  }
  s << "rc=0\n"
    << "# which step ended: the background jobs no longer running (bash 4.2+; wait -n -p needs 5.1), reaped by pid\n"
    << "while [ ${#role[@]} -gt 0 ]; do\n"
    << "  jobs -rp > .running\n"
    << "  done_pid=\n"
    << "  for p in \"${!role[@]}\"; do grep -qx \"$p\" .running || { done_pid=$p; break; }; done\n"
    << "  if [ -z \"$done_pid\" ]; then sleep 0.2; continue; fi\n"
    << "  wait \"$done_pid\"; st=$?\n"
    << "  echo \"${role[$done_pid]} $st\" >> " << kStepExitMarker << "\n"
    << "  unset \"role[$done_pid]\"\n"
    << "  # the first failing step ends the job: its peers would only wait for it\n"
    << "  if [ $st -ne 0 ] && [ $rc -eq 0 ]; then rc=$st; [ ${#role[@]} -gt 0 ] && kill \"${!role[@]}\" 2>/dev/null; fi\n"
    << "done\n";
  if (job.needs_rendezvous_service()) s << "kill $kv_pid 2>/dev/null\n";
  s << "echo $rc > " << kJobExitMarker << "\nexit $rc\n";
  return s.str();
}

std::string mpirun_host_files(const JobSpec& job, const std::string& hosts_file) {
  std::string s;
  for (size_t i = 0; i < job.steps.size(); ++i) {
    auto nodes = job.step_nodes(i);
    // Each MPI's host-file form: Open MPI counts one slot per line unless told (host slots=N), Hydra reads host:N,
    // PALS plain host names (its --ppn places the ranks).
    const std::string n = std::to_string(job.steps[i].tasks_per_node);
    const std::string suffix = job.options.mpi == "mpich" ? "s/$/:" + n + "/;" : job.options.mpi == "pals" ? "" : "s/$/ slots=" + n + "/;";
    s += "sed -n '" + std::to_string(nodes.front() + 1) + "," + std::to_string(nodes.back() + 1) + "{" + suffix + "p}' " + hosts_file +
         " > " + shell_quote(mpirun_hostfile(job.steps[i].role)) + "\n";
  }
  return s;
}

const char* const kArrayJobName = "fanout-array";

bool program_on_path(const std::string& prog) {
  const char* path = std::getenv("PATH");
  for (auto& dir : split(path ? path : "/usr/bin:/bin", ':'))
    if (!dir.empty() && ::access((std::filesystem::path(dir) / prog).c_str(), X_OK) == 0) return true;
  return false;
}

std::string walltime_hhmmss(int64_t s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld", (long long)(s / 3600), (long long)(s / 60 % 60), (long long)(s % 60));
  return buf;
}

void refuse_unsplittable(const std::string& flag, const std::string& value, const std::string& what) {
  for (unsigned char c : value)
    if (c <= ' ' || c == '"' || c == '\'' || c == '\\' || c == '#' || c == 0x7f)
      throw UserError(flag + ": '" + printable(value) + "' " + what);
  // A value that begins with '-' is read as qsub's next option (#$ -q -l h_rt=0), not as the value.
  if (!value.empty() && value.front() == '-')
    throw UserError(flag + ": '" + printable(value) + "' begins with '-', which qsub would read as another option, not as this value");
}

std::map<std::string, std::vector<size_t>> array_shapes(const std::vector<JobSpec>& jobs,
                                                        const std::function<std::string(const JobSpec&)>& render) {
  std::map<std::string, std::vector<size_t>> shapes;
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].validate();
    JobSpec shape = jobs[i];
    shape.name = kArrayJobName;
    shape.run_dir = jobs[i].run_dir.parent_path();
    const std::string script = render(shape);
    shapes[script.substr(0, script.find("# fanout job"))].push_back(i);
  }
  return shapes;
}

std::string run_qsub(const std::vector<std::string>& args, const std::filesystem::path& cwd, const std::string& what) {
  std::vector<std::string> argv = {"qsub"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = run_process(argv, cwd, 120);
  std::string last;
  for (auto& l : split(r.out, '\n'))
    if (!trim(l).empty()) last = trim(l);
  if (r.exit_code != 0 || last.empty()) throw UserError("qsub refused " + what + ": " + trim(r.out + " " + r.err));
  return last;
}

std::optional<std::string> submit_array_script(const std::function<std::string()>& qsub, const std::filesystem::path& script,
                                               const std::vector<size_t>& members, std::vector<Scheduler::Submitted>& out) {
  try {
    return qsub();
  } catch (const UserError&) {
    for (size_t m : members) out[m].error = std::current_exception();
    std::error_code ec;
    std::filesystem::remove(script, ec);  // nothing runs it; the refusal is in each run's record
    return std::nullopt;
  }
}

std::string describe_step_failure(const std::filesystem::path& run_dir) {
  std::ifstream in(run_dir / kStepExitMarker);
  std::string role;
  int status = 0;
  while (in >> role >> status)
    if (status != 0) {
      // bash reports a step killed by signal N as 128+N (srun passes its task's signal on the same way), and a rank
      // passes on its program's own 128+N (a shell's child killed): the number alone cannot say which, so say both.
      std::string how = "exited with status " + std::to_string(status);
      if (status > 128 && status < 128 + NSIG)
        how += " (128 + " + signal_name(status - 128) + ": it, or a process it started, died of " + signal_name(status - 128) + ")";
      return "step '" + role + "' " + how + "; logs: " + (run_dir / (role + ".err")).string();
    }
  return "";
}

JobStatus resolve_missing_job(const std::string& job_id, const std::filesystem::path& run_dir, int& missing_polls, const std::string& scheduler) {
  JobStatus s;
  s.job_id = job_id;
  if (auto rc = read_job_exit_marker(run_dir)) {
    s.state = *rc == 0 ? JobState::Completed : JobState::Failed;
    s.exit_code = *rc;
    if (*rc != 0) {
      std::string step = describe_step_failure(run_dir);
      s.reason = (step.empty() ? "job script exited with status " + std::to_string(*rc) + "; logs: " + run_dir.string() : step) +
                 " (from the run's exit marker)";
    }
  } else if (++missing_polls > 3) {
    s.state = JobState::Failed;
    s.reason = "the job vanished from " + scheduler + " without leaving an exit marker in " + run_dir.string();
  } else {
    s.state = JobState::Unknown;
  }
  return s;
}

std::optional<int> read_job_exit_marker(const std::filesystem::path& run_dir) {
  std::ifstream in(run_dir / kJobExitMarker);
  int rc = 0;
  if (in >> rc) return rc;
  return std::nullopt;
}

}  // namespace fanout
