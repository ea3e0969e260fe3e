// A Redis module speaking RedisAI's commands on libtorch, so SmartRedis-style clients (ours, or SmartRedis)
// work against a plain redis-server:  redis-server --loadmodule redisai.so [THREADS_PER_QUEUE n]
// [INTRA_OP_PARALLELISM n] [INTER_OP_PARALLELISM n] [MEMORY_CAP MiB] [SANDBOX_PROCESSES n] [EXECUTION_TIMEOUT s]
#include <dlfcn.h>
#include <sys/types.h>
#include <unistd.h>

#include <string>

#include "redisai_module.h"
#include "sandbox_check.h"

namespace {

// Debian's redis-server allocates with jemalloc, so torch's tensors do too; jemalloc hands freed pages back to
// the kernel after a decay time, and every ResNet-50 forward then faults its ~100 MB of activations in again
// (measured: 160-180 ms instead of 100-120 ms per batch-1 forward). Keeping freed pages makes the database's
// forward as fast as a direct call. Returns the number of arenas changed (0 without jemalloc).
int keep_freed_pages() {
  using mallctl_fn = int (*)(const char*, void*, size_t*, void*, size_t);
  auto mallctl = reinterpret_cast<mallctl_fn>(dlsym(RTLD_DEFAULT, "mallctl"));
  if (!mallctl) return 0;
  ssize_t never = -1;
  mallctl("arenas.dirty_decay_ms", nullptr, nullptr, &never, sizeof never);  // arenas made later
  mallctl("arenas.muzzy_decay_ms", nullptr, nullptr, &never, sizeof never);
  unsigned arenas = 0;
  size_t len = sizeof arenas;
  mallctl("arenas.narenas", &arenas, &len, nullptr, 0);
  int changed = 0;
  for (unsigned i = 0; i < arenas; ++i) {  // arenas already in use (uninitialised ones refuse: they get the default)
    const std::string arena = "arena." + std::to_string(i);
    changed += mallctl((arena + ".dirty_decay_ms").c_str(), nullptr, nullptr, &never, sizeof never) == 0;
    mallctl((arena + ".muzzy_decay_ms").c_str(), nullptr, nullptr, &never, sizeof never);
  }
  return changed;
}

// INFO's "ai" section: what bounds the module's child processes, and the most that ran at once.
void add_info(RedisModuleInfoCtx* ctx, int for_crash_report) {
  RedisModule_InfoAddSection(ctx, "");
  RedisModule_InfoAddFieldLongLong(ctx, "sandbox_processes", redisai::sandbox_limit());
  RedisModule_InfoAddFieldLongLong(ctx, "sandbox_processes_peak", redisai::sandbox_peak());
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int RedisModule_OnLoad(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (RedisModule_Init(ctx, "ai", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR) return REDISMODULE_ERR;
  redisai::ModuleOptions options;
  const redisai::Argv args = redisai::views(argv, argc);
  options.memory_cap = size_t(sysconf(_SC_PHYS_PAGES)) * size_t(sysconf(_SC_PAGESIZE)) / 2;
  for (size_t i = 0; i < args.size(); i += 2) {
    long long v = 0;
    if (redisai::keyword(args[i], "MEMORY_CAP")) {
      if (i + 1 >= args.size() || !redisai::to_long_long(args[i + 1], v) || v < 64 || v > (1LL << 30)) {
        RedisModule_Log(ctx, "warning", "RedisAI module: MEMORY_CAP needs MiB from 64 to 2^30");
        return REDISMODULE_ERR;
      }
      options.memory_cap = size_t(v) << 20;
      continue;
    }
    if (i + 1 >= args.size() || !redisai::to_long_long(args[i + 1], v) || v < 1 || v > 1024) {
      RedisModule_Log(ctx, "warning", "RedisAI module: option %.*s needs a value from 1 to 1024", int(args[i].size()), args[i].data());
      return REDISMODULE_ERR;
    }
    if (redisai::keyword(args[i], "THREADS_PER_QUEUE")) options.threads_per_queue = int(v);
    else if (redisai::keyword(args[i], "SANDBOX_PROCESSES")) redisai::set_sandbox_limit(int(v));
    else if (redisai::keyword(args[i], "EXECUTION_TIMEOUT")) options.execution_timeout_s = int(v);
    else if (redisai::keyword(args[i], "INTRA_OP_PARALLELISM")) options.intra_op = int(v);
    else if (redisai::keyword(args[i], "INTER_OP_PARALLELISM")) options.inter_op = int(v);
    else {
      RedisModule_Log(ctx, "warning", "RedisAI module: unknown option %.*s", int(args[i].size()), args[i].data());
      return REDISMODULE_ERR;
    }
  }
  if (keep_freed_pages() > 0) RedisModule_Log(ctx, "notice", "RedisAI module: jemalloc keeps freed pages (no decay) for torch's tensors");
  if (redisai::register_tensor_commands(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
  if (RedisModule_RegisterInfoFunc(ctx, add_info) == REDISMODULE_ERR) return REDISMODULE_ERR;
  return redisai::register_model_commands(ctx, options);
}
