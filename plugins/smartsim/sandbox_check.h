// Untrusted models and scripts are loaded in a child process first (fanout-redisai-check, next to the module):
// libtorch's unpickler and TorchScript compiler are not robust against hostile bytes (a 366-byte zip with a
// crafted data.pkl segfaults torch::jit::load), and a crash there must end the child, never the database.
// Only what the child loaded cleanly is then loaded by the server, off Redis' main thread.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace redisai {

enum class PayloadKind : char { Model = 'M', Script = 'S' };

// Loads (model) or compiles (script) `payload` for `device` in a child process capped at memory_cap bytes of
// torch allocations, killed after timeout_s. Returns "" when it loaded, else the reason as a Redis error
// ("ERR could not load the TORCH model: ...", "ERR the model loader died of SIGSEGV: the blob is rejected").
// At most sandbox_limit() checkers run at once (each loads libtorch and the payload: 24 concurrent stores had
// 24 children and 3.7 GB); later stores wait their turn, their own timeout counting from when they start.
// A script's entry_points must all be functions of it.
std::string check_in_sandbox(PayloadKind kind, std::string_view payload, const std::string& device, size_t memory_cap,
                             const std::vector<std::string>& entry_points = {}, int timeout_s = 120);
void set_sandbox_limit(int processes);  // SANDBOX_PROCESSES, default 2
int sandbox_limit();
int sandbox_peak();  // the most checkers that ran at once since the module loaded (INFO's ai_sandbox_processes_peak)

// The checker (fanout-redisai-check, sandbox_check_main.cpp) sits beside the module's .so, or where
// FANOUT_REDISAI_CHECK points (a harness outside the build's plugins/ folder).

}  // namespace redisai
