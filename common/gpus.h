// The GPUs a process may use and a task's share of them, for launchers that do not hand GPUs to tasks themselves
// (local processes, mpirun under PBS): Slurm's srun sets CUDA_VISIBLE_DEVICES per task, these do not.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace fanout {

// CUDA_VISIBLE_DEVICES when set, even empty (what the scheduler or the user left visible), else the /dev/nvidia<N>
// devices.
std::vector<std::string> visible_gpus();
// The `per_task` GPUs of local task `local_rank` (GPUs local_rank*per_task onward) as a CUDA_VISIBLE_DEVICES
// value; nullopt when `gpus` holds too few.
std::optional<std::string> task_gpus(const std::vector<std::string>& gpus, int local_rank, int per_task);

}  // namespace fanout
