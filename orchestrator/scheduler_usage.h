// A scheduler's accounting of an ended job (JobStatus::usage: sacct per step, qacct or resources_used per job) into
// the run folder as samples, so that it is ingested, compared and modelled like every figure: resource.scheduler.*
// (max_rss, ave_rss, max_vmem and io in B; cpu, user_cpu, system_cpu and io_wait in s; energy in J), costs
// declared lower is better, rank -1 (the step as a whole), role the step's (a whole job's: "job").
#pragma once
#include <filesystem>

#include "launchers/job_spec.h"

namespace fanout {

inline constexpr const char* kSchedulerUsageRole = "job";  // the role of figures a scheduler gives a whole job

// Writes samples/<role>.scheduler.samples for each step the status accounts; returns the figures written. Throws
// UserError when the folder cannot be written (the run's samples would be incomplete without saying so).
size_t write_scheduler_usage(const std::filesystem::path& run_dir, const JobStatus& status);

}  // namespace fanout
