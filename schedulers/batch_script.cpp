#include "schedulers/batch_script.h"

#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/text.h"

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

std::string describe_step_failure(const JobSpec& job) {
  std::ifstream in(job.run_dir / kStepExitMarker);
  std::string role;
  int status = 0;
  while (in >> role >> status)
    if (status != 0) {
      // bash reports a step killed by signal N as 128+N (srun passes its task's signal on the same way).
      std::string how = "exited with status " + std::to_string(status);
      if (status > 128 && status < 128 + NSIG) how += " (signal " + std::to_string(status - 128) + ", " + signal_name(status - 128) + ")";
      return "step '" + role + "' " + how + "; logs: " + (job.run_dir / (role + ".err")).string();
    }
  return "";
}

JobStatus resolve_missing_job(const std::string& job_id, const JobSpec& job, int& missing_polls, const std::string& scheduler) {
  JobStatus s;
  s.job_id = job_id;
  if (auto rc = read_job_exit_marker(job.run_dir)) {
    s.state = *rc == 0 ? JobState::Completed : JobState::Failed;
    s.exit_code = *rc;
    if (*rc != 0) {
      std::string step = describe_step_failure(job);
      s.reason = (step.empty() ? "job script exited with status " + std::to_string(*rc) + "; logs: " + job.run_dir.string() : step) +
                 " (from the run's exit marker)";
    }
  } else if (++missing_polls > 3) {
    s.state = JobState::Failed;
    s.reason = "the job vanished from " + scheduler + " without leaving an exit marker in " + job.run_dir.string();
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
