// RedisAI's model and script commands on the TorchScript backend:
//   AI.MODELSTORE / AI.MODELGET / AI.MODELDEL / AI.MODELEXECUTE
//   AI.SCRIPTSTORE / AI.SCRIPTSET / AI.SCRIPTGET / AI.SCRIPTDEL / AI.SCRIPTEXECUTE / AI.SCRIPTRUN
//   AI.INFO key [RESETSTAT]
// Execution never runs on Redis' main thread: the command reads its input tensors (sharing their bytes),
// blocks the client and queues a job on the device's RunQueue; a worker runs it (batched with other requests
// to the same model up to BATCHSIZE) and unblocks the client; the reply callback, on the main thread again,
// stores the outputs. Jobs are created and destroyed on the main thread only, so the Redis strings whose bytes
// the inputs share are never released by a worker.
#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "executor.h"
#include "redisai_module.h"
#include "run_queue.h"
#include "sandbox_check.h"

namespace redisai {
namespace {

using Clock = std::chrono::steady_clock;

// Run statistics of a model or script (AI.INFO): updated by workers, read on the main thread.
struct RunStats {
  std::atomic<long long> duration_us{0}, samples{0}, calls{0}, errors{0}, batches{0};
  void reset() { duration_us = samples = calls = errors = batches = 0; }
};

// The server keeps a model's blob and a script's source; its executors (executor.h) load and run them.
struct StoredModel {
  uint64_t id = next_executable_id();
  std::string device, tag, blob;
  long long batchsize = 0, minbatchsize = 0, minbatchtimeout = 0;
  std::vector<std::string> inputs, outputs;
  RunStats stats;
};

struct StoredScript {
  uint64_t id = next_executable_id();
  std::string device, tag, source;
  std::vector<std::string> entry_points;
  RunStats stats;
};

// Key values hold shared pointers: a job keeps its model alive when the key is deleted or replaced.
using ModelValue = std::shared_ptr<StoredModel>;
using ScriptValue = std::shared_ptr<StoredScript>;

RedisModuleType* g_model_type = nullptr;
RedisModuleType* g_script_type = nullptr;
ModuleOptions g_options;
RedisModuleCtx* g_timer_ctx = nullptr;  // a detached context: timers are stopped where no command's context is at hand
std::map<std::string, std::unique_ptr<RunQueue>>* g_queues = nullptr;  // by device; created on the main thread

// One AI.MODELEXECUTE / AI.SCRIPTEXECUTE / AI.SCRIPTRUN in flight.
struct ExecutionJob : QueuedJob {
  RedisModuleBlockedClient* client = nullptr;
  ModelValue model;
  ScriptValue script;
  std::string function;
  std::vector<TensorValue> inputs;
  std::vector<std::string> keys, args;
  std::vector<RedisModuleString*> output_names;
  Clock::time_point deadline = Clock::time_point::max();
  RunQueue* queue = nullptr;               // its device's queue, which a passed TIMEOUT takes it out of
  RedisModuleTimerID deadline_timer = 0;   // fires at TIMEOUT; 0 once fired or when there is none
  // Filled by the worker:
  std::vector<TensorValue> outputs;
  std::string error;
  bool timed_out = false;
  ~ExecutionJob() override {
    for (auto* s : output_names) RedisModule_FreeString(nullptr, s);
  }
};

void record(RunStats& stats, Clock::time_point t0, long long samples, long long calls, bool failed) {
  stats.duration_us += std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
  stats.samples += samples;
  stats.calls += calls;
  stats.batches += 1;
  if (failed) stats.errors += calls;
}

Executable executable_of(const ModelValue& m) {
  return {m->id, true, m->device, &m->blob, nullptr, std::weak_ptr<const void>(m)};
}
Executable executable_of(const ScriptValue& s) {
  return {s->id, false, s->device, &s->source, &s->entry_points, std::weak_ptr<const void>(s)};
}

// This worker's executor for a device: a worker runs one group at a time, so each has a process of its own.
Executor& executor_for(const std::string& device) {
  thread_local std::map<std::string, std::unique_ptr<Executor>> executors;
  auto& e = executors[device];
  if (!e) e = std::make_unique<Executor>(ExecutorOptions{device, g_options.memory_cap, g_options.intra_op, g_options.inter_op, g_options.execution_timeout_s});
  return *e;
}

// The worker side: run a group (one job, or a batch of jobs for one model), then unblock every client.
void run_group(std::vector<QueuedJob*>& group) {
  std::vector<ExecutionJob*> live;
  for (QueuedJob* q : group) {
    auto* job = static_cast<ExecutionJob*>(q);
    if (Clock::now() > job->deadline) job->timed_out = true;  // RedisAI answers TIMEDOUT without running
    else live.push_back(job);
  }
  if (!live.empty()) {
    const auto t0 = Clock::now();
    long long samples = 0;
    for (auto* job : live) samples += job->samples;
    RunStats& stats = live[0]->model ? live[0]->model->stats : live[0]->script->stats;
    try {
      if (live[0]->model) {
        std::vector<const std::vector<TensorValue>*> requests;
        for (auto* job : live) requests.push_back(&job->inputs);
        auto results = executor_for(live[0]->model->device).run_model(executable_of(live[0]->model), requests);
        for (size_t i = 0; i < live.size(); ++i) live[i]->outputs = std::move(results[i]);
      } else {
        const ExecutionJob& j = *live[0];
        live[0]->outputs = executor_for(j.script->device).run_script(executable_of(j.script), j.function, j.inputs, j.keys, j.args);
      }
      record(stats, t0, samples, long(live.size()), false);
    } catch (const std::exception& e) {
      for (auto* job : live) job->error = e.what();
      record(stats, t0, samples, long(live.size()), true);
    }
  }
  for (QueuedJob* q : group) {
    auto* job = static_cast<ExecutionJob*>(q);
    RedisModule_UnblockClient(job->client, job);
  }
}

RunQueue& queue_for(const std::string& device) {
  auto& q = (*g_queues)[device];
  if (!q) q = std::make_unique<RunQueue>(g_options.threads_per_queue, run_group);
  return *q;
}

// The reply, on the main thread: store the outputs, then OK (or the error).
int ExecutionReply(RedisModuleCtx* ctx, RedisModuleString**, int) {
  auto* job = static_cast<ExecutionJob*>(RedisModule_GetBlockedClientPrivateData(ctx));
  if (job->timed_out) return RedisModule_ReplyWithSimpleString(ctx, "TIMEDOUT");
  if (!job->error.empty()) return RedisModule_ReplyWithError(ctx, job->error.c_str());
  if (job->outputs.size() < job->output_names.size())
    return RedisModule_ReplyWithError(ctx, "ERR the run produced fewer outputs than OUTPUTS names");
  for (size_t i = 0; i < job->output_names.size(); ++i)
    if (const char* err = write_tensor(ctx, job->output_names[i], std::move(job->outputs[i]))) return RedisModule_ReplyWithError(ctx, err);
  return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

void ExecutionFree(RedisModuleCtx*, void* privdata) {
  auto* job = static_cast<ExecutionJob*>(privdata);
  if (job->deadline_timer) RedisModule_StopTimer(g_timer_ctx, job->deadline_timer, nullptr);  // it must not fire on a freed job
  delete job;
}

// A request's TIMEOUT passed while it still waits in its device's queue (behind an endless script, say): it is taken
// out and answered TIMEDOUT now, as RedisAI documents TIMEOUT ("the time after which the client is unblocked and a
// TIMEDOUT string is returned"); it had waited for EXECUTION_TIMEOUT. One a worker has already taken answers when its
// run ends (TIMEDOUT when its deadline had passed before it started). Timers run on the main thread, as
// ExecutionFree does, which stops this one first: the job is alive here. (Not Redis' own blocked-client timeout: when
// it fires just after a worker's UnblockClient, Redis 7.0 sends the client no reply at all.)
void ExecutionDeadline(RedisModuleCtx*, void* data) {
  auto* job = static_cast<ExecutionJob*>(data);
  job->deadline_timer = 0;
  if (!job->queue->remove(job)) return;
  job->timed_out = true;
  RedisModule_UnblockClient(job->client, job);
}

// A model or script key's value; state: 1 found, 0 empty, -1 another type.
template <typename V>
int open_value(RedisModuleCtx* ctx, RedisModuleString* name, RedisModuleType* type, V& out, int mode = REDISMODULE_READ,
               RedisModuleKey** keep_open = nullptr) {
  auto* key = static_cast<RedisModuleKey*>(RedisModule_OpenKey(ctx, name, mode));
  int kt = RedisModule_KeyType(key);
  int state = kt == REDISMODULE_KEYTYPE_EMPTY ? 0 : (kt == REDISMODULE_KEYTYPE_MODULE && RedisModule_ModuleTypeGetType(key) == type) ? 1 : -1;
  if (state == 1) out = *static_cast<V*>(RedisModule_ModuleTypeGetValue(key));
  if (keep_open) *keep_open = key;
  else RedisModule_CloseKey(key);
  return state;
}

// RedisAI's reply when open_value did not find a value of `type`.
const char* missing(int state, RedisModuleType* type) {
  if (state < 0) return REDISMODULE_ERRORMSG_WRONGTYPE;
  return type == g_model_type ? "ERR model key is empty" : "ERR script key is empty";
}

// Stores a model or script at `name` (replacing one of its type, never another type), readies its device's
// queue, and answers OK.
template <typename V>
int store_value(RedisModuleCtx* ctx, RedisModuleString* name, RedisModuleType* type, V value, const std::string& device) {
  V old;
  RedisModuleKey* key;
  const int state = open_value(ctx, name, type, old, REDISMODULE_READ | REDISMODULE_WRITE, &key);
  if (state >= 0) RedisModule_ModuleTypeSetValue(key, type, new V(std::move(value)));
  RedisModule_CloseKey(key);
  if (state < 0) return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
  queue_for(device);
  RedisModule_ReplicateVerbatim(ctx);
  return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

RedisModuleString* arg_string(RedisModuleCtx* ctx, std::string_view s) { return RedisModule_CreateString(nullptr, s.data(), s.size()); }

std::vector<std::string> strings(const std::vector<std::string_view>& v) { return {v.begin(), v.end()}; }

// Reads the inputs, blocks the client and queues the job (or replies an error).
int submit(RedisModuleCtx* ctx, std::unique_ptr<ExecutionJob> job, const ExecuteArgs& a, const std::string& device) {
  for (auto name : a.inputs) {
    TensorValue v;
    RedisModuleString* s = arg_string(ctx, name);
    const char* err = read_tensor(ctx, s, v);
    RedisModule_FreeString(nullptr, s);
    if (err) return RedisModule_ReplyWithError(ctx, err);
    job->inputs.push_back(std::move(v));
  }
  for (auto name : a.outputs) job->output_names.push_back(arg_string(ctx, name));
  if (a.timeout_ms > 0) job->deadline = Clock::now() + std::chrono::milliseconds(a.timeout_ms);
  if (!job->inputs.empty()) job->samples = job->inputs[0].dims.empty() ? 1 : job->inputs[0].dims[0];
  // Only requests whose inputs concatenate along dimension 0 batch together; inputs that disagree on their first
  // dimension cannot be split back, so such a request runs alone.
  for (const auto& v : job->inputs) {
    job->shape += std::to_string(v.dtype) + ":";
    for (size_t d = 1; d < v.dims.size(); ++d) job->shape += std::to_string(v.dims[d]) + ",";
    job->shape += ";";
    if (v.dims.empty() || v.dims[0] != job->samples) job->batch_max = 0;
  }
  job->client = RedisModule_BlockClient(ctx, ExecutionReply, nullptr, ExecutionFree, 0);
  RunQueue& queue = queue_for(device);
  job->queue = &queue;
  ExecutionJob* queued = job.release();
  // The timer before the push: nothing a worker does is answered (or freed) before this command returns.
  if (a.timeout_ms > 0) queued->deadline_timer = RedisModule_CreateTimer(ctx, a.timeout_ms, ExecutionDeadline, queued);
  queue.push(queued);
  return REDISMODULE_OK;
}

// AI.MODELSTORE / AI.SCRIPTSTORE / AI.SCRIPTSET in flight: checked in the sandbox and loaded on a thread of its
// own (never on Redis' main thread), then stored by the reply callback on the main thread.
struct StoreJob {
  RedisModuleBlockedClient* client = nullptr;
  RedisModuleString* key = nullptr;  // retained: the reply callback's argv is not the command's
  std::shared_ptr<StoredModel> model;
  std::shared_ptr<StoredScript> script;
  std::string error;
  ~StoreJob() {
    if (key) RedisModule_FreeString(nullptr, key);
  }
};

// The sandbox's word on the job's model or script (its error stays empty when it loads).
void check(StoreJob& job) {
  try {
    if (job.model) {
      StoredModel& m = *job.model;
      job.error = check_in_sandbox(PayloadKind::Model, m.blob, m.device, g_options.memory_cap);
    } else {
      StoredScript& sc = *job.script;
      job.error = check_in_sandbox(PayloadKind::Script, sc.source, sc.device, g_options.memory_cap, sc.entry_points);
    }
  } catch (const std::exception& e) {
    job.error = e.what();
  }
}

void load_off_main_thread(StoreJob* job) {
  check(*job);
  RedisModule_UnblockClient(job->client, job);
}

// Stores what the sandbox passed (or replies its error), on the main thread.
int store_checked(RedisModuleCtx* ctx, StoreJob& job) {
  if (!job.error.empty()) return RedisModule_ReplyWithError(ctx, job.error.c_str());
  if (job.model) return store_value<ModelValue>(ctx, job.key, g_model_type, job.model, job.model->device);
  return store_value<ScriptValue>(ctx, job.key, g_script_type, job.script, job.script->device);
}

int StoreReply(RedisModuleCtx* ctx, RedisModuleString**, int) {
  return store_checked(ctx, *static_cast<StoreJob*>(RedisModule_GetBlockedClientPrivateData(ctx)));
}

void StoreFree(RedisModuleCtx*, void* privdata) { delete static_cast<StoreJob*>(privdata); }

int load_and_store(RedisModuleCtx* ctx, RedisModuleString* key, std::shared_ptr<StoredModel> model, std::shared_ptr<StoredScript> script) {
  auto* job = new StoreJob;
  job->key = RedisModule_CreateStringFromString(nullptr, key);
  job->model = std::move(model);
  job->script = std::move(script);
  // Replaying an append-only file (what the rewrite below emits) there is no client to block, and the data set
  // must be whole before the server serves: checked in the sandbox and stored here, as an RDB load does.
  if (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_LOADING) {
    std::unique_ptr<StoreJob> owned(job);
    check(*owned);
    return store_checked(ctx, *owned);
  }
  job->client = RedisModule_BlockClient(ctx, StoreReply, nullptr, StoreFree, 0);
  std::thread(load_off_main_thread, job).detach();
  return REDISMODULE_OK;
}

int ModelStore(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  const Argv args = views(argv, argc);
  ModelStoreArgs a;
  const char* err = parse_modelstore(args, a);
  if (err == kWrongArity) return RedisModule_WrongArity(ctx);
  if (err) return RedisModule_ReplyWithError(ctx, err);
  if (std::string why = device_refusal(a.device); !why.empty()) return RedisModule_ReplyWithError(ctx, why.c_str());
  auto stored = std::make_shared<StoredModel>();
  for (size_t i = a.blob_first; i < args.size(); ++i) stored->blob.append(args[i]);
  stored->device = a.device;
  stored->tag = std::string(a.tag);
  stored->batchsize = a.batchsize;
  stored->minbatchsize = a.minbatchsize;
  stored->minbatchtimeout = a.minbatchtimeout;
  stored->inputs = strings(a.inputs);
  stored->outputs = strings(a.outputs);
  return load_and_store(ctx, argv[1], std::move(stored), nullptr);
}

int ModelExecute(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  ExecuteArgs a;
  const char* err = parse_modelexecute(views(argv, argc), a);
  if (err == kWrongArity) return RedisModule_WrongArity(ctx);
  if (err) return RedisModule_ReplyWithError(ctx, err);
  auto job = std::make_unique<ExecutionJob>();
  const int state = open_value(ctx, argv[1], g_model_type, job->model);
  if (state <= 0) return RedisModule_ReplyWithError(ctx, missing(state, g_model_type));
  const StoredModel& m = *job->model;
  if (!m.inputs.empty() && m.inputs.size() != a.inputs.size())
    return RedisModule_ReplyWithError(ctx, "ERR Number of keys given as INPUTS here does not match model definition");
  if (m.batchsize > 0) {
    job->group = job->model.get();
    job->batch_max = m.batchsize;
    job->batch_min = m.minbatchsize;
    job->batch_timeout_ms = m.minbatchtimeout;
  }
  const std::string device = m.device;
  return submit(ctx, std::move(job), a, device);
}

int script_execute(RedisModuleCtx* ctx, RedisModuleString** argv, int argc, bool old_form) {
  ExecuteArgs a;
  const char* err = old_form ? parse_scriptrun(views(argv, argc), a) : parse_scriptexecute(views(argv, argc), a);
  if (err == kWrongArity) return RedisModule_WrongArity(ctx);
  if (err) return RedisModule_ReplyWithError(ctx, err);
  auto job = std::make_unique<ExecutionJob>();
  const int state = open_value(ctx, argv[1], g_script_type, job->script);
  if (state <= 0) return RedisModule_ReplyWithError(ctx, missing(state, g_script_type));
  job->function = std::string(a.function);  // its executor says when the script has no such function
  job->keys = strings(a.keys);
  job->args = strings(a.args);
  const std::string device = job->script->device;
  return submit(ctx, std::move(job), a, device);
}

int ScriptExecute(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) { return script_execute(ctx, argv, argc, false); }
int ScriptRun(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) { return script_execute(ctx, argv, argc, true); }

int script_store(RedisModuleCtx* ctx, RedisModuleString** argv, int argc, bool old_form) {
  ScriptStoreArgs a;
  const Argv args = views(argv, argc);
  const char* err = old_form ? parse_scriptset(args, a) : parse_scriptstore(args, a);
  if (err == kWrongArity) return RedisModule_WrongArity(ctx);
  if (err) return RedisModule_ReplyWithError(ctx, err);
  if (std::string why = device_refusal(a.device); !why.empty()) return RedisModule_ReplyWithError(ctx, why.c_str());
  auto stored = std::make_shared<StoredScript>();
  stored->entry_points = strings(a.entry_points);
  stored->device = a.device;
  stored->tag = std::string(a.tag);
  stored->source = std::string(a.source);
  return load_and_store(ctx, argv[1], nullptr, std::move(stored));
}

int ScriptStore(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) { return script_store(ctx, argv, argc, false); }
int ScriptSet(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) { return script_store(ctx, argv, argc, true); }

// RedisAI replies every field name and text value as a bulk string (RedisModule_ReplyWithCString /
// ReplyWithString), never as a simple string: clients such as SmartRedis check the reply type.
void reply_names(RedisModuleCtx* ctx, const std::vector<std::string>& names) {
  RedisModule_ReplyWithArray(ctx, long(names.size()));
  for (const auto& n : names) RedisModule_ReplyWithStringBuffer(ctx, n.data(), n.size());
}

void reply_pair(RedisModuleCtx* ctx, const char* name, const std::string& value) {
  RedisModule_ReplyWithCString(ctx, name);
  RedisModule_ReplyWithStringBuffer(ctx, value.data(), value.size());
}

void reply_pair(RedisModuleCtx* ctx, const char* name, long long value) {
  RedisModule_ReplyWithCString(ctx, name);
  RedisModule_ReplyWithLongLong(ctx, value);
}

// AI.CONFIG MODEL_CHUNK_SIZE: model blobs are replied in chunks of at most this many bytes (RedisAI's default:
// 511 MiB), as RAI_ReplyWithChunks does: one bulk string, or an array of them when the blob is larger.
std::atomic<long long> g_model_chunk_size{511LL * 1024 * 1024};

void reply_with_chunks(RedisModuleCtx* ctx, const std::string& blob) {
  const long long chunk = g_model_chunk_size.load();
  const size_t n_chunks = size_t(blob.size() / size_t(chunk)) + 1;
  if (n_chunks == 1) {
    RedisModule_ReplyWithStringBuffer(ctx, blob.data(), blob.size());
    return;
  }
  RedisModule_ReplyWithArray(ctx, long(n_chunks));
  for (size_t i = 0; i < n_chunks; ++i) {
    const size_t at = i * size_t(chunk);
    RedisModule_ReplyWithStringBuffer(ctx, blob.data() + at, std::min(size_t(chunk), blob.size() - at));
  }
}

std::string backends_path;  // AI.CONFIG BACKENDSPATH: kept and reported; the TORCH backend is built in

// AI.CONFIG BACKENDSPATH path | LOADBACKEND backend path | MODEL_CHUNK_SIZE n | GET BACKENDSPATH | GET MODEL_CHUNK_SIZE
int Config(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc < 2) return RedisModule_WrongArity(ctx);
  const Argv args = views(argv, argc);
  if (keyword(args[1], "LOADBACKEND")) {
    if (argc != 4) return RedisModule_WrongArity(ctx);
    if (keyword(args[2], "TORCH")) return RedisModule_ReplyWithSimpleString(ctx, "OK");  // built in: always loaded
    return RedisModule_ReplyWithError(ctx, "ERR unsupported backend");
  }
  if (keyword(args[1], "BACKENDSPATH")) {
    if (argc < 3) return RedisModule_ReplyWithError(ctx, "ERR BACKENDSPATH: missing path argument");
    backends_path = std::string(args[2]);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
  }
  if (keyword(args[1], "MODEL_CHUNK_SIZE")) {
    if (argc < 3) return RedisModule_ReplyWithError(ctx, "ERR MODEL_CHUNK_SIZE: missing chunk size");
    long long n = 0;
    if (!to_long_long(args[2], n) || n <= 0) return RedisModule_ReplyWithError(ctx, "ERR MODEL_CHUNK_SIZE: invalid chunk size");
    g_model_chunk_size = n;
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
  }
  if (keyword(args[1], "GET")) {
    if (argc < 3) return RedisModule_WrongArity(ctx);
    if (keyword(args[2], "BACKENDSPATH")) return RedisModule_ReplyWithCString(ctx, backends_path.c_str());
    if (keyword(args[2], "MODEL_CHUNK_SIZE")) return RedisModule_ReplyWithLongLong(ctx, g_model_chunk_size.load());
    return RedisModule_ReplyWithNull(ctx);
  }
  return RedisModule_ReplyWithError(ctx, "ERR unsupported subcommand");
}

// Commands RedisAI 1.2.7 registers that this module does not implement: an error naming the command.
int Unsupported(RedisModuleCtx* ctx, RedisModuleString** argv, int) {
  size_t len = 0;
  const char* name = RedisModule_StringPtrLen(argv[0], &len);
  std::string upper(name, len);
  for (char& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
  return RedisModule_ReplyWithError(ctx, ("ERR " + upper + " is not supported by fanout's RedisAI module (see its README)").c_str());
}

int ModelGet(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  ValueGetArgs a;
  const char* err = parse_modelget(views(argv, argc), a);
  if (err == kWrongArity) return RedisModule_WrongArity(ctx);
  if (err) return RedisModule_ReplyWithError(ctx, err);
  ModelValue m;
  const int state = open_value(ctx, argv[1], g_model_type, m);
  if (state <= 0) return RedisModule_ReplyWithError(ctx, missing(state, g_model_type));
  if (!a.meta) {
    reply_with_chunks(ctx, m->blob);
    return REDISMODULE_OK;
  }
  RedisModule_ReplyWithArray(ctx, a.payload ? 18 : 16);
  reply_pair(ctx, "backend", std::string("TORCH"));
  reply_pair(ctx, "device", m->device);
  reply_pair(ctx, "tag", m->tag);
  reply_pair(ctx, "batchsize", m->batchsize);
  reply_pair(ctx, "minbatchsize", m->minbatchsize);
  RedisModule_ReplyWithCString(ctx, "inputs");
  reply_names(ctx, m->inputs);
  RedisModule_ReplyWithCString(ctx, "outputs");
  reply_names(ctx, m->outputs);
  reply_pair(ctx, "minbatchtimeout", m->minbatchtimeout);
  if (a.payload) {
    RedisModule_ReplyWithCString(ctx, "blob");
    reply_with_chunks(ctx, m->blob);
  }
  return REDISMODULE_OK;
}

int ScriptGet(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  ValueGetArgs a;
  const char* err = parse_scriptget(views(argv, argc), a);
  if (err == kWrongArity) return RedisModule_WrongArity(ctx);
  if (err) return RedisModule_ReplyWithError(ctx, err);
  ScriptValue s;
  const int state = open_value(ctx, argv[1], g_script_type, s);
  if (state <= 0) return RedisModule_ReplyWithError(ctx, missing(state, g_script_type));
  if (!a.meta) return RedisModule_ReplyWithStringBuffer(ctx, s->source.data(), s->source.size());
  RedisModule_ReplyWithArray(ctx, a.payload ? 8 : 6);
  reply_pair(ctx, "device", s->device);
  reply_pair(ctx, "tag", s->tag);
  RedisModule_ReplyWithCString(ctx, "Entry Points");
  reply_names(ctx, s->entry_points);
  if (a.payload) reply_pair(ctx, "source", s->source);
  return REDISMODULE_OK;
}

template <typename V>
int delete_value(RedisModuleCtx* ctx, RedisModuleString** argv, int argc, RedisModuleType* type) {
  if (argc != 2) return RedisModule_WrongArity(ctx);
  V v;
  RedisModuleKey* key;
  const int state = open_value(ctx, argv[1], type, v, REDISMODULE_READ | REDISMODULE_WRITE, &key);
  if (state == 1) RedisModule_DeleteKey(key);
  RedisModule_CloseKey(key);
  if (state <= 0) return RedisModule_ReplyWithError(ctx, missing(state, type));
  RedisModule_ReplicateVerbatim(ctx);
  return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

int ModelDel(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) { return delete_value<ModelValue>(ctx, argv, argc, g_model_type); }
int ScriptDel(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) { return delete_value<ScriptValue>(ctx, argv, argc, g_script_type); }

// AI.INFO: RedisAI's fields, then `batches` (backend runs; fewer than calls when requests were batched).
int Info(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  InfoArgs a;
  const char* err = parse_info(views(argv, argc), a);
  if (err == kWrongArity) return RedisModule_WrongArity(ctx);
  if (err) return RedisModule_ReplyWithError(ctx, err);
  ModelValue m;
  ScriptValue s;
  const bool is_model = open_value(ctx, argv[1], g_model_type, m) == 1;
  if (!is_model && open_value(ctx, argv[1], g_script_type, s) != 1) return RedisModule_ReplyWithError(ctx, "ERR cannot find run info for key");
  RunStats& stats = is_model ? m->stats : s->stats;
  if (a.reset) {
    stats.reset();
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
  }
  // RedisAI's 9 pairs (samples is -1 for scripts); `batches` (backend runs: fewer than calls when requests were
  // batched) only when asked with our WITHBATCHES, so that the reply is RedisAI's byte for byte.
  RedisModule_ReplyWithArray(ctx, a.batches ? 20 : 18);
  reply_pair(ctx, "key", std::string(a.key));
  reply_pair(ctx, "type", std::string(is_model ? "MODEL" : "SCRIPT"));
  reply_pair(ctx, "backend", std::string("TORCH"));
  reply_pair(ctx, "device", is_model ? m->device : s->device);
  reply_pair(ctx, "tag", is_model ? m->tag : s->tag);
  reply_pair(ctx, "duration", stats.duration_us.load());
  reply_pair(ctx, "samples", is_model ? stats.samples.load() : -1LL);
  reply_pair(ctx, "calls", stats.calls.load());
  reply_pair(ctx, "errors", stats.errors.load());
  if (a.batches) reply_pair(ctx, "batches", stats.batches.load());
  return REDISMODULE_OK;
}

// --- data types: RDB keeps the blob or source and the settings; a load compiles them again. ---
void save_strings(RedisModuleIO* rdb, const std::vector<std::string>& v) {
  RedisModule_SaveUnsigned(rdb, v.size());
  for (const auto& s : v) RedisModule_SaveStringBuffer(rdb, s.data(), s.size());
}

// A read past the payload's end (a crafted RESTORE) is an error the load refuses (REDISMODULE_OPTIONS_HANDLE_IO_ERRORS).
void require_read(RedisModuleIO* rdb) {
  if (RedisModule_IsIOError(rdb)) throw std::runtime_error("the stored value ends early");
}

std::string load_string(RedisModuleIO* rdb) {
  size_t len = 0;
  char* buf = RedisModule_LoadStringBuffer(rdb, &len);
  if (!buf) throw std::runtime_error("the stored value ends early");
  std::string s(buf, len);
  RedisModule_Free(buf);
  require_read(rdb);
  return s;
}

long long load_signed(RedisModuleIO* rdb) {
  const long long v = RedisModule_LoadSigned(rdb);
  require_read(rdb);
  return v;
}

std::vector<std::string> load_strings(RedisModuleIO* rdb) {
  // A RESTORE payload is client bytes: a count beyond any model's inputs is refused, not allocated.
  const uint64_t n = RedisModule_LoadUnsigned(rdb);
  require_read(rdb);
  if (n > kMaxNames) throw std::runtime_error("more than " + std::to_string(kMaxNames) + " names");
  std::vector<std::string> v(n);
  for (auto& s : v) s = load_string(rdb);
  return v;
}

void ModelRdbSave(RedisModuleIO* rdb, void* value) {
  const StoredModel& m = **static_cast<ModelValue*>(value);
  for (const std::string* s : {&m.device, &m.tag, &m.blob}) RedisModule_SaveStringBuffer(rdb, s->data(), s->size());
  for (long long v : {m.batchsize, m.minbatchsize, m.minbatchtimeout}) RedisModule_SaveSigned(rdb, v);
  save_strings(rdb, m.inputs);
  save_strings(rdb, m.outputs);
}

void* ModelRdbLoad(RedisModuleIO* rdb, int encver) {
  if (encver != 0) return nullptr;
  auto m = std::make_shared<StoredModel>();
  try {
    m->device = load_string(rdb);
    m->tag = load_string(rdb);
    m->blob = load_string(rdb);
    m->batchsize = load_signed(rdb);
    m->minbatchsize = load_signed(rdb);
    m->minbatchtimeout = load_signed(rdb);
    m->inputs = load_strings(rdb);
    m->outputs = load_strings(rdb);
    // A RESTORE payload is client bytes too: its blob goes through the sandbox before the server loads it.
    if (std::string why = check_in_sandbox(PayloadKind::Model, m->blob, m->device, g_options.memory_cap); !why.empty())
      throw std::runtime_error(why);
  } catch (const std::exception& e) {
    RedisModule_LogIOError(rdb, "warning", "cannot load a stored model: %s", e.what());
    return nullptr;
  }
  return new ModelValue(std::move(m));
}

void ScriptRdbSave(RedisModuleIO* rdb, void* value) {
  const StoredScript& s = **static_cast<ScriptValue*>(value);
  for (const std::string* x : {&s.device, &s.tag, &s.source}) RedisModule_SaveStringBuffer(rdb, x->data(), x->size());
  save_strings(rdb, s.entry_points);
}

void* ScriptRdbLoad(RedisModuleIO* rdb, int encver) {
  if (encver != 0) return nullptr;
  auto s = std::make_shared<StoredScript>();
  try {
    s->device = load_string(rdb);
    s->tag = load_string(rdb);
    s->source = load_string(rdb);
    s->entry_points = load_strings(rdb);
    if (std::string why = check_in_sandbox(PayloadKind::Script, s->source, s->device, g_options.memory_cap, s->entry_points); !why.empty())
      throw std::runtime_error(why);
  } catch (const std::exception& e) {
    RedisModule_LogIOError(rdb, "warning", "cannot compile a stored script: %s", e.what());
    return nullptr;
  }
  return new ScriptValue(std::move(s));
}

// An append-only file's rewrite: the command that stores the value again, as AI.MODELSTORE / AI.SCRIPTSTORE take it
// (without these, a rewrite with aof-use-rdb-preamble no dropped every model and script).
void emit(RedisModuleIO* aof, const char* command, RedisModuleString* key, const std::vector<std::string>& words) {
  RedisModuleCtx* ctx = RedisModule_GetContextFromIO(aof);
  std::vector<RedisModuleString*> args;
  for (const auto& w : words) args.push_back(RedisModule_CreateString(ctx, w.data(), w.size()));
  RedisModule_EmitAOF(aof, command, "sv", key, args.data(), args.size());
  for (auto* a : args) RedisModule_FreeString(ctx, a);
}

void ModelAofRewrite(RedisModuleIO* aof, RedisModuleString* key, void* value) {
  const StoredModel& m = **static_cast<ModelValue*>(value);
  std::vector<std::string> words = {"TORCH", m.device};
  if (!m.tag.empty()) words.insert(words.end(), {"TAG", m.tag});
  if (m.batchsize > 0) {
    words.insert(words.end(), {"BATCHSIZE", std::to_string(m.batchsize)});
    if (m.minbatchsize > 0) {
      words.insert(words.end(), {"MINBATCHSIZE", std::to_string(m.minbatchsize)});
      if (m.minbatchtimeout > 0) words.insert(words.end(), {"MINBATCHTIMEOUT", std::to_string(m.minbatchtimeout)});
    }
  }
  words.insert(words.end(), {"BLOB", m.blob});
  emit(aof, "AI.MODELSTORE", key, words);
}

void ScriptAofRewrite(RedisModuleIO* aof, RedisModuleString* key, void* value) {
  const StoredScript& s = **static_cast<ScriptValue*>(value);
  std::vector<std::string> words = {s.device};
  if (!s.tag.empty()) words.insert(words.end(), {"TAG", s.tag});
  if (!s.entry_points.empty()) {  // AI.SCRIPTSTORE's; a script AI.SCRIPTSET stored has none
    words.insert(words.end(), {"ENTRY_POINTS", std::to_string(s.entry_points.size())});
    words.insert(words.end(), s.entry_points.begin(), s.entry_points.end());
  }
  words.insert(words.end(), {"SOURCE", s.source});
  emit(aof, s.entry_points.empty() ? "AI.SCRIPTSET" : "AI.SCRIPTSTORE", key, words);
}

void ModelFree(void* value) { delete static_cast<ModelValue*>(value); }
void ScriptFree(void* value) { delete static_cast<ScriptValue*>(value); }
size_t ModelMemUsage(const void* value) { return (*static_cast<const ModelValue*>(value))->blob.size() * 2; }
size_t ScriptMemUsage(const void* value) { return (*static_cast<const ScriptValue*>(value))->source.size(); }

RedisModuleType* create_type(RedisModuleCtx* ctx, const char* name, RedisModuleTypeLoadFunc load, RedisModuleTypeSaveFunc save,
                             RedisModuleTypeRewriteFunc aof, RedisModuleTypeFreeFunc free, RedisModuleTypeMemUsageFunc mem) {
  RedisModuleTypeMethods tm = {};
  tm.version = REDISMODULE_TYPE_METHOD_VERSION;
  tm.rdb_load = load;
  tm.rdb_save = save;
  tm.aof_rewrite = aof;
  tm.free = free;
  tm.mem_usage = mem;
  return RedisModule_CreateDataType(ctx, name, 0, &tm);
}

}  // namespace

int register_model_commands(RedisModuleCtx* ctx, const ModuleOptions& options) {
  g_options = options;
  g_timer_ctx = RedisModule_GetDetachedThreadSafeContext(ctx);
  install_memory_cap(options.memory_cap);
  set_torch_threads(options.intra_op, options.inter_op);
  g_queues = new std::map<std::string, std::unique_ptr<RunQueue>>();  // lives as long as the process: workers never stop
  g_model_type = create_type(ctx, "AI__MODEL", ModelRdbLoad, ModelRdbSave, ModelAofRewrite, ModelFree, ModelMemUsage);
  g_script_type = create_type(ctx, "AI_SCRIPT", ScriptRdbLoad, ScriptRdbSave, ScriptAofRewrite, ScriptFree, ScriptMemUsage);
  if (!g_model_type || !g_script_type) return REDISMODULE_ERR;
  struct Command {
    const char* name;
    RedisModuleCmdFunc fn;
    const char* flags;
  };
  const Command commands[] = {
      {"AI.MODELSTORE", ModelStore, "write deny-oom"}, {"AI.MODELGET", ModelGet, "readonly"},
      {"AI.MODELDEL", ModelDel, "write"},               {"AI.MODELEXECUTE", ModelExecute, "write deny-oom"},
      {"AI.SCRIPTSTORE", ScriptStore, "write deny-oom"}, {"AI.SCRIPTSET", ScriptSet, "write deny-oom"},
      {"AI.SCRIPTGET", ScriptGet, "readonly"},         {"AI.SCRIPTDEL", ScriptDel, "write"},
      {"AI.SCRIPTEXECUTE", ScriptExecute, "write deny-oom"}, {"AI.SCRIPTRUN", ScriptRun, "write deny-oom"},
      {"AI.INFO", Info, "readonly"}, {"AI.CONFIG", Config, "write"},
  };
  for (const auto& c : commands) {
    const int first_key = std::string(c.name) == "AI.CONFIG" ? 0 : 1;  // AI.CONFIG names no key
    if (RedisModule_CreateCommand(ctx, c.name, c.fn, c.flags, first_key, first_key, first_key) == REDISMODULE_ERR) return REDISMODULE_ERR;
  }
  // Registered by RedisAI 1.2.7, not implemented here: an error that names the command, not "unknown command".
  for (const char* name : {"AI.MODELSET", "AI.MODELRUN", "AI.DAGEXECUTE", "AI.DAGEXECUTE_RO", "AI.DAGRUN", "AI.DAGRUN_RO",
                           "AI._MODELSCAN", "AI._SCRIPTSCAN"})
    if (RedisModule_CreateCommand(ctx, name, Unsupported, "readonly", 0, 0, 0) == REDISMODULE_ERR) return REDISMODULE_ERR;
  return REDISMODULE_OK;
}

}  // namespace redisai
