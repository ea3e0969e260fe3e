#include "common/subprocess.h"

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string_view>

#include "common/files.h"
#include "plugins/sdk/fanout_process.hpp"

extern char** environ;

namespace fanout {

Environment environment_with(const EnvVars& add) {
  // Ours in its order, less the names `add` sets, then `add` (the last of a name wins).
  auto set_by_add = [&](std::string_view name) {
    for (auto& kv : add)
      if (kv.first == name) return true;
    return false;
  };
  Environment out;
  for (char** e = environ; *e; ++e) {
    const std::string_view kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string_view::npos && !set_by_add(kv.substr(0, eq))) out.entries.push_back(*e);
  }
  out.added.reserve(add.size());  // entries point into it: no reallocation
  for (size_t i = 0; i < add.size(); ++i) {
    bool later = false;
    for (size_t j = i + 1; j < add.size() && !later; ++j) later = add[j].first == add[i].first;
    if (!later) out.entries.push_back(out.added.emplace_back(add[i].first + "=" + add[i].second).data());
  }
  out.entries.push_back(nullptr);
  return out;
}

ProcessResult run_process(const std::vector<std::string>& argv, const std::filesystem::path& cwd, double timeout_s,
                          const EnvVars& env) {
  ProcessResult r;
  char out_tmpl[] = "/tmp/fanout-proc-out-XXXXXX", err_tmpl[] = "/tmp/fanout-proc-err-XXXXXX";
  // Close-on-exec: a process spawned meanwhile by another thread must not inherit these (dup2 clears it on 1 and 2).
  int out_fd = mkostemp(out_tmpl, O_CLOEXEC), err_fd = mkostemp(err_tmpl, O_CLOEXEC);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
  std::vector<std::string> args = argv;
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  Environment envs = environment_with(env);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, cargs[0], &fa, nullptr, cargs.data(), envs.entries.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc == 0) {
    const auto exit = fanout_sdk::wait_exit_within(pid, int64_t(timeout_s * 1000));
    if (exit.killed) r.err = argv[0] + ": killed after " + std::to_string(int(timeout_s)) + " s\n";
    r.exit_code = exit.status;
  } else {
    r.err = "cannot run " + argv[0] + ": " + std::strerror(rc) + "\n";
  }
  close(out_fd);
  close(err_fd);
  r.out = read_file(out_tmpl);
  r.err += read_file(err_tmpl);
  unlink(out_tmpl);
  unlink(err_tmpl);
  return r;
}

}  // namespace fanout
