// The body shared by every batch job script (Slurm, PBS, and fanout running inside an allocation): start
// the rendezvous service when the job has several steps, start each step in the background with its
// launcher, stop the others as soon as one fails, and leave exit markers in the run folder so that a job's
// end is known even after the scheduler has forgotten it:
//   steps.exit : "<role> <exit status>" per step;  job.exit : the job's exit status.
#pragma once
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launchers/job_spec.h"
#include "results/layout.h"
#include "schedulers/scheduler.h"

namespace fanout {

// setup: shell lines run in the run folder before the steps start (e.g. host files for mpirun).
std::string batch_script_body(const JobSpec& job, const std::vector<std::vector<std::string>>& step_prefixes,
                              const std::string& setup = "");

using layout::kJobExitMarker;
using layout::kStepExitMarker;

// Shell lines that write each step's mpirun host file (mpirun_hostfile(role)) from `hosts_file`, which holds one
// line per node of the job in node order, in the host-file words of the job's --mpi (PBS and SGE jobs).
std::string mpirun_host_files(const JobSpec& job, const std::string& hosts_file);

// What batch schedulers driven by their command-line tools share: whether a program is on PATH, a wall time as
// HH:MM:SS, and the refusal of a value that cannot go on a directive line as one word (qsub splits such lines as
// a shell would: a blank or quote in a value starts another option; a leading '-' is one). `what` says where it would go.
bool program_on_path(const std::string& prog);
extern const char* const kArrayJobName;  // the job name of the arrays fanout submits (PBS -N, SGE -N)
std::string walltime_hhmmss(int64_t seconds);
void refuse_unsplittable(const std::string& flag, const std::string& value, const std::string& what);
// Runs that can share one array job, grouped by the preamble of their script (up to "# fanout job") rendered
// with the array's name and output folder (the runs' parent): same preamble, same resource request. Validates each
// job. Indices into jobs, in order within each group.
std::map<std::string, std::vector<size_t>> array_shapes(const std::vector<JobSpec>& jobs,
                                                        const std::function<std::string(const JobSpec&)>& render);
// Runs `qsub args...` in cwd and returns the last line it printed (the job id, in PBS's and Grid Engine's -terse
// form alike); UserError "qsub refused <what>: <its words>" when it failed or printed nothing.
std::string run_qsub(const std::vector<std::string>& args, const std::filesystem::path& cwd, const std::string& what);
// One array's qsub (PBS and Grid Engine): its id; or, when the scheduler refused it, nothing, the refusal set on
// that array's runs alone (`members` of `out`: arrays submitted before it keep their ids) and its script removed.
std::optional<std::string> submit_array_script(const std::function<std::string()>& qsub, const std::filesystem::path& script,
                                               const std::vector<size_t>& members, std::vector<Scheduler::Submitted>& out);

// Reads the markers: "step 'client' exited with status 3; logs: <dir>/client.err" for the first failed step,
// or an empty string when no step failed (or no markers exist).
std::string describe_step_failure(const std::filesystem::path& run_dir);
// The job's exit status from job.exit, if the job got that far.
std::optional<int> read_job_exit_marker(const std::filesystem::path& run_dir);

// The status of a job the scheduler no longer (or never) lists: from its exit markers; else UNKNOWN for a
// few polls (a scheduler may lag), then FAILED "vanished". missing_polls counts calls for this job.
JobStatus resolve_missing_job(const std::string& job_id, const std::filesystem::path& run_dir, int& missing_polls, const std::string& scheduler);

}  // namespace fanout
