// RedisAI's tensor commands:
//   AI.TENSORSET key FLOAT|DOUBLE|INT8|INT16|INT32|INT64|UINT8|UINT16|BOOL|STRING dim [dim ...] [BLOB data | VALUES v ...]
//   AI.TENSORGET key [META] [BLOB|VALUES]
// Tensors are a module data type (RDB/AOF supported, so SAVE, DUMP-less operation and replicas work).
// A BLOB is kept as the retained argument string: no copy of tensor bytes on the way in.
// Errors use RedisAI's wording. Arguments are parsed by redisai_args.cpp (no Redis calls, so tests/fuzz fuzzes it);
// this file does the keys, the data type and the replies.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "redisai_module.h"

namespace redisai {

Argv views(RedisModuleString** argv, int argc) {
  Argv v(static_cast<size_t>(argc));
  for (int i = 0; i < argc; ++i) {
    size_t len;
    const char* p = RedisModule_StringPtrLen(argv[i], &len);
    v[size_t(i)] = std::string_view(p, len);
  }
  return v;
}

namespace {

RedisModuleType* g_tensor_type = nullptr;
using Tensor = TensorValue;

// A value whose bytes are a retained argument string. Released on the main thread: a TensorValue copy given
// to a worker is dropped by the command's free callback, which Redis runs on the main thread.
Tensor retained(RedisModuleString* arg) {
  RedisModule_RetainString(nullptr, arg);
  Tensor t;
  t.data = RedisModule_StringPtrLen(arg, &t.bytes);
  t.keep = std::shared_ptr<const void>(arg, [](const void* s) { RedisModule_FreeString(nullptr, (RedisModuleString*)s); });
  return t;
}

Tensor owned(std::string bytes) {
  auto holder = std::make_shared<std::string>(std::move(bytes));
  Tensor t;
  t.data = holder->data();
  t.bytes = holder->size();
  t.keep = holder;
  return t;
}

// The key's type check shared by every tensor command: empty, a tensor, or the wrong type.
int tensor_key_state(RedisModuleKey* key) {
  int kt = RedisModule_KeyType(key);
  if (kt == REDISMODULE_KEYTYPE_EMPTY) return 0;
  return kt == REDISMODULE_KEYTYPE_MODULE && RedisModule_ModuleTypeGetType(key) == g_tensor_type ? 1 : -1;
}

int TensorSet(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  const Argv args = views(argv, argc);
  TensorSetArgs a;
  const char* err = parse_tensorset(args, a);
  if (err == kWrongArity) return RedisModule_WrongArity(ctx);
  if (!err && a.data == TensorSetArgs::Data::Values) {
    std::string bytes;
    err = parse_tensor_values(args, a, bytes);
    if (!err) {
      Tensor t = owned(std::move(bytes));
      t.dtype = a.dtype;
      t.dims = std::move(a.dims);
      err = write_tensor(ctx, argv[1], std::move(t));
    }
  } else if (!err) {
    Tensor t = a.data == TensorSetArgs::Data::Blob ? retained(argv[a.data_arg]) : owned(std::string(size_t(a.bytes), '\0'));
    t.dtype = a.dtype;
    t.dims = std::move(a.dims);
    err = write_tensor(ctx, argv[1], std::move(t));
  }
  if (err) return RedisModule_ReplyWithError(ctx, err);
  RedisModule_ReplicateVerbatim(ctx);
  return RedisModule_ReplyWithSimpleString(ctx, "OK");
}
void reply_values(RedisModuleCtx* ctx, const Tensor& tensor) {
  const DType& t = kTypes[tensor.dtype];
  if (t.is_string) {  // each element as a bulk string (RedisAI's ReplyWithCString)
    long long n = 1;
    for (long long d : tensor.dims) n *= d;
    RedisModule_ReplyWithArray(ctx, long(n));
    for (const char *p = tensor.data, *end = tensor.data + tensor.bytes; p < end; p += std::strlen(p) + 1) RedisModule_ReplyWithCString(ctx, p);
    return;
  }
  const char* p = tensor.data;
  size_t n = tensor.bytes / t.size;
  RedisModule_ReplyWithArray(ctx, long(n));
  for (size_t k = 0; k < n; ++k) {
    const char* e = p + k * t.size;
    if (t.is_float) {
      double d;
      if (t.size == 4) {
        float f;
        std::memcpy(&f, e, 4);
        d = f;
      } else {
        std::memcpy(&d, e, 8);
      }
      RedisModule_ReplyWithDouble(ctx, d);
    } else {
      long long v = 0;
      if (t.is_signed) {
        switch (t.size) {
          case 1: { int8_t x; std::memcpy(&x, e, 1); v = x; break; }
          case 2: { int16_t x; std::memcpy(&x, e, 2); v = x; break; }
          case 4: { int32_t x; std::memcpy(&x, e, 4); v = x; break; }
          default: std::memcpy(&v, e, 8);
        }
      } else {
        uint64_t x = 0;
        std::memcpy(&x, e, t.size);
        v = (long long)x;
      }
      RedisModule_ReplyWithLongLong(ctx, v);
    }
  }
}

int TensorGet(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  TensorGetArgs a;
  const char* err = parse_tensorget(views(argv, argc), a);
  if (err == kWrongArity) return RedisModule_WrongArity(ctx);
  if (err) return RedisModule_ReplyWithError(ctx, err);
  Tensor tensor;
  if ((err = read_tensor(ctx, argv[1], tensor))) return RedisModule_ReplyWithError(ctx, err);
  if (a.meta) {
    RedisModule_ReplyWithArray(ctx, (a.blob || a.values) ? 6 : 4);
    // RedisAI's RAI_TensorReply: names and the dtype as bulk strings (RedisModule_ReplyWithCString); SmartRedis
    // reads them with a call that accepts only bulk strings.
    RedisModule_ReplyWithCString(ctx, "dtype");
    RedisModule_ReplyWithCString(ctx, kTypes[tensor.dtype].name);
    RedisModule_ReplyWithCString(ctx, "shape");
    RedisModule_ReplyWithArray(ctx, long(tensor.dims.size()));
    for (long long d : tensor.dims) RedisModule_ReplyWithLongLong(ctx, d);
    if (a.blob || a.values) RedisModule_ReplyWithCString(ctx, a.blob ? "blob" : "values");
  }
  if (a.blob) RedisModule_ReplyWithStringBuffer(ctx, tensor.data, tensor.bytes);
  else if (a.values) reply_values(ctx, tensor);
  return REDISMODULE_OK;
}

// --- data type methods ---
void* TensorRdbLoad(RedisModuleIO* rdb, int encver) {
  if (encver != 0) return nullptr;
  // RESTORE hands us client bytes: check everything before trusting the shape (a worker reads dims x size bytes).
  // Every read may run past the payload's end (REDISMODULE_OPTIONS_HANDLE_IO_ERRORS): then it gives 0 or NULL and
  // IsIOError says so.
  const uint64_t dtype = RedisModule_LoadUnsigned(rdb), ndims = RedisModule_LoadUnsigned(rdb);
  if (RedisModule_IsIOError(rdb) || dtype >= uint64_t(kNumTypes) || ndims == 0 || ndims > kMaxTensorDims) return nullptr;
  std::vector<long long> dims(ndims);
  long long count = 1;
  for (auto& d : dims) {
    d = (long long)RedisModule_LoadSigned(rdb);
    if (RedisModule_IsIOError(rdb) || d <= 0 || count > kMaxTensorBytes / d) return nullptr;
    count *= d;
  }
  size_t len = 0;
  char* buf = RedisModule_LoadStringBuffer(rdb, &len);
  if (!buf || RedisModule_IsIOError(rdb)) {
    if (buf) RedisModule_Free(buf);
    return nullptr;
  }
  const bool fits = valid_blob(int(dtype), count, std::string_view(buf, len));
  auto t = fits ? new Tensor(owned(std::string(buf, len))) : nullptr;
  RedisModule_Free(buf);
  if (!t) return nullptr;
  t->dtype = int(dtype);
  t->dims = std::move(dims);
  return t;
}

void TensorRdbSave(RedisModuleIO* rdb, void* value) {
  const Tensor& t = *static_cast<Tensor*>(value);
  RedisModule_SaveUnsigned(rdb, uint64_t(t.dtype));
  RedisModule_SaveUnsigned(rdb, t.dims.size());
  for (long long d : t.dims) RedisModule_SaveSigned(rdb, d);
  RedisModule_SaveStringBuffer(rdb, t.data, t.bytes);
}

// The command that stores the tensor again, as AI.TENSORSET takes it: key TYPE d0 d1 ... BLOB data, every dimension
// kept (an append-only file replayed after a restart must give back the same shape and bytes).
void TensorAofRewrite(RedisModuleIO* aof, RedisModuleString* key, void* value) {
  const Tensor& t = *static_cast<Tensor*>(value);
  RedisModuleCtx* ctx = RedisModule_GetContextFromIO(aof);
  std::vector<RedisModuleString*> args;
  args.push_back(RedisModule_CreateString(ctx, kTypes[t.dtype].name, std::strlen(kTypes[t.dtype].name)));
  for (long long d : t.dims) args.push_back(RedisModule_CreateStringFromLongLong(ctx, d));
  args.push_back(RedisModule_CreateString(ctx, "BLOB", 4));
  args.push_back(RedisModule_CreateString(ctx, t.data, t.bytes));
  RedisModule_EmitAOF(aof, "AI.TENSORSET", "sv", key, args.data(), args.size());
  for (auto* a : args) RedisModule_FreeString(ctx, a);
}

void TensorFree(void* value) { delete static_cast<Tensor*>(value); }

size_t TensorMemUsage(const void* value) {
  const Tensor& t = *static_cast<const Tensor*>(value);
  return sizeof t + t.bytes + t.dims.size() * sizeof(long long);
}

}  // namespace

const char* read_tensor(RedisModuleCtx* ctx, RedisModuleString* name, TensorValue& out) {
  RedisModuleKey* key = static_cast<RedisModuleKey*>(RedisModule_OpenKey(ctx, name, REDISMODULE_READ));
  const int state = tensor_key_state(key);
  if (state == 1) out = *static_cast<Tensor*>(RedisModule_ModuleTypeGetValue(key));
  RedisModule_CloseKey(key);
  return state == 1 ? nullptr : state == 0 ? "ERR tensor key is empty or in a different shard" : REDISMODULE_ERRORMSG_WRONGTYPE;
}

const char* write_tensor(RedisModuleCtx* ctx, RedisModuleString* name, TensorValue value) {
  RedisModuleKey* key = static_cast<RedisModuleKey*>(RedisModule_OpenKey(ctx, name, REDISMODULE_READ | REDISMODULE_WRITE));
  const int state = tensor_key_state(key);
  if (state >= 0) RedisModule_ModuleTypeSetValue(key, g_tensor_type, new Tensor(std::move(value)));
  RedisModule_CloseKey(key);
  return state >= 0 ? nullptr : REDISMODULE_ERRORMSG_WRONGTYPE;
}

int register_tensor_commands(RedisModuleCtx* ctx) {
  RedisModuleTypeMethods tm = {};
  tm.version = REDISMODULE_TYPE_METHOD_VERSION;
  tm.rdb_load = TensorRdbLoad;
  tm.rdb_save = TensorRdbSave;
  tm.aof_rewrite = TensorAofRewrite;
  tm.free = TensorFree;
  tm.mem_usage = TensorMemUsage;
  g_tensor_type = RedisModule_CreateDataType(ctx, "AI_TENSOR", 0, &tm);
  if (!g_tensor_type) return REDISMODULE_ERR;
  if (RedisModule_CreateCommand(ctx, "AI.TENSORSET", TensorSet, "write deny-oom", 1, 1, 1) == REDISMODULE_ERR ||
      RedisModule_CreateCommand(ctx, "AI.TENSORGET", TensorGet, "readonly", 1, 1, 1) == REDISMODULE_ERR)
    return REDISMODULE_ERR;
  return REDISMODULE_OK;
}

}  // namespace redisai
