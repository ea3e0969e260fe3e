// Runs a program without a shell (argv as given, nothing interpreted) and captures its output.
#pragma once
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace fanout {

struct ProcessResult {
  int exit_code = -1;  // 128 + signal when killed by one; -1 when it could not start
  std::string out, err;
};

using EnvVars = std::vector<std::pair<std::string, std::string>>;

// This process's environment with `add` set (overriding ours), as "NAME=value" strings for exec: ours point into
// environ (valid until it changes: take it right before the exec), `add`'s into `added`. Ours are not copied: a
// copy a variable was 2 % of the driver's CPU a local run (every rank a sweep starts pays for it).
// Not copyable: a copy's entries would point into the original's `added`. Ours stay valid as long as nothing calls
// setenv/unsetenv meanwhile (glibc never frees a replaced string; other C libraries may).
struct Environment {
  Environment() = default;
  Environment(Environment&&) = default;
  Environment& operator=(Environment&&) = default;
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;
  std::vector<std::string> added;
  std::vector<char*> entries;  // ends with nullptr
};
Environment environment_with(const EnvVars& add);

// Looks argv[0] up on PATH when it has no '/'. Runs with our environment plus `env`; kills the program
// after timeout_s.
ProcessResult run_process(const std::vector<std::string>& argv, const std::filesystem::path& cwd = {}, double timeout_s = 60,
                          const EnvVars& env = {});

}  // namespace fanout
