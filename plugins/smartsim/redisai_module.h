// What the RedisAI module's command files share: the tensor data type, reading and writing tensor keys, and
// the arguments as views for the pure parsers of redisai_args.h. redisai_tensors.cpp serves AI.TENSOR*,
// redisai_models.cpp the model and script commands, redisai_module.cpp loads it all.
#pragma once
#include "redisai_args.h"
#include "redismodule.h"
#include "torch_backend.h"

namespace redisai {

// The arguments as views; they live as long as the command's argv.
Argv views(RedisModuleString** argv, int argc);

// Creates the AI_TENSOR data type and the AI.TENSORSET / AI.TENSORGET commands.
int register_tensor_commands(RedisModuleCtx* ctx);
// The tensor stored at `name` (a copy sharing its bytes), or the error to reply with.
const char* read_tensor(RedisModuleCtx* ctx, RedisModuleString* name, TensorValue& out);
// Stores `value` at `name`, replacing a tensor there; an error when the key holds another type.
const char* write_tensor(RedisModuleCtx* ctx, RedisModuleString* name, TensorValue value);

// Load-time options (RedisAI's names): THREADS_PER_QUEUE n, INTRA_OP_PARALLELISM n, INTER_OP_PARALLELISM n;
// and ours: MEMORY_CAP MiB, the most torch tensors may hold at once (default: half the machine's memory).
struct ModuleOptions {
  int threads_per_queue = 1, intra_op = 0, inter_op = 0;
  size_t memory_cap = 0;  // bytes; 0 until set from the option or the default
  int execution_timeout_s = 300;  // EXECUTION_TIMEOUT: a run longer than this is stopped (its executor replaced)
};
// Creates the AI_MODEL and AI_SCRIPT types and their commands.
int register_model_commands(RedisModuleCtx* ctx, const ModuleOptions& options);

}  // namespace redisai
