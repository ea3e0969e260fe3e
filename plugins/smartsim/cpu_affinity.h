// Keeping a process off CPUs another one is pinned to (a database's): the plugin's pin_app_cpus and tensor_bench's
// clients. One concept: the CPUs left over, and holding the calling thread to them.
#pragma once

#include <vector>

namespace smartsim {

// Holds the calling thread to the CPUs it may use less `avoid`; every thread and process it starts afterwards
// inherits that. Returns those CPUs, or none (and changes nothing) when `avoid` covers every one it may use.
// Throws std::runtime_error when a system call fails.
std::vector<int> hold_off_cpus(const std::vector<int>& avoid);

}  // namespace smartsim
