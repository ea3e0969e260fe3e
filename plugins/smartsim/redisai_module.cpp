// A Redis module speaking RedisAI's commands on libtorch, so SmartRedis-style clients (ours, or SmartRedis)
// work against a plain redis-server:  redis-server --loadmodule redisai.so [THREADS_PER_QUEUE n]
// [INTRA_OP_PARALLELISM n] [INTER_OP_PARALLELISM n] [MEMORY_CAP MiB] [SANDBOX_PROCESSES n] [EXECUTION_TIMEOUT s]
#include <sys/types.h>
#include <unistd.h>

#include <string>

#include "redisai_module.h"
#include "sandbox_check.h"

namespace {

// INFO's "ai" section: what bounds the module's child processes, and the most that ran at once.
void add_info(RedisModuleInfoCtx* ctx, int for_crash_report) {
  RedisModule_InfoAddSection(ctx, "");
  RedisModule_InfoAddFieldLongLong(ctx, "sandbox_processes", redisai::sandbox_limit());
  RedisModule_InfoAddFieldLongLong(ctx, "sandbox_processes_peak", redisai::sandbox_peak());
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int RedisModule_OnLoad(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (RedisModule_Init(ctx, "ai", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR) return REDISMODULE_ERR;
  // A RESTORE payload is client bytes: a read past its end must come back to the type's load as an error it
  // refuses (RedisModule_IsIOError), not abort the server with every key in it.
  RedisModule_SetModuleOptions(ctx, REDISMODULE_OPTIONS_HANDLE_IO_ERRORS);
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
  if (redisai::register_tensor_commands(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
  if (RedisModule_RegisterInfoFunc(ctx, add_info) == REDISMODULE_ERR) return REDISMODULE_ERR;
  return redisai::register_model_commands(ctx, options);
}
