// Runs a program without a shell (argv as given, nothing interpreted) and captures its output.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace fanout {

struct ProcessResult {
  int exit_code = -1;  // 128 + signal when killed by one; -1 when it could not start
  std::string out, err;
};

// Looks argv[0] up on PATH when it has no '/'. Kills the program after timeout_s.
ProcessResult run_process(const std::vector<std::string>& argv, const std::filesystem::path& cwd = {}, double timeout_s = 60);

}  // namespace fanout
