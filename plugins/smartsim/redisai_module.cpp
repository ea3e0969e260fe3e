// A Redis module speaking RedisAI's tensor commands, so SmartRedis-style clients (ours, or SmartRedis) work
// against a plain redis-server:
//   AI.TENSORSET key FLOAT|DOUBLE|INT8|INT16|INT32|INT64|UINT8|UINT16 dim [dim ...] [BLOB data | VALUES v ...]
//   AI.TENSORGET key [META] [BLOB|VALUES]
// Tensors are a module data type (RDB/AOF supported, so SAVE, DUMP-less operation and replicas work).
// A BLOB is kept as the retained argument string: no copy of tensor bytes on the way in.
// Errors use RedisAI's wording. Arguments are parsed by redisai_args.cpp (no Redis calls, so tests/fuzz fuzzes it);
// this file does the keys, the data type and the replies. Model and script commands (libtorch) come with the
// inference plugin, their argument parsing beside the tensor commands' in redisai_args.
#include <cstring>
#include <string>
#include <vector>

#include "redisai_args.h"
#include "redismodule.h"

namespace {

RedisModuleType* g_tensor_type = nullptr;

using redisai::kTypes;
using redisai::DType;
constexpr int kNumTypes = redisai::kNumTypes;

struct Tensor {
  int dtype = 0;
  std::vector<long long> dims;
  RedisModuleString* blob = nullptr;  // retained argument (BLOB), or
  std::string owned;                  // bytes we made (VALUES, zeros, RDB load)
  const char* data(size_t* len) const {
    if (blob) return RedisModule_StringPtrLen(blob, len);
    *len = owned.size();
    return owned.data();
  }
  ~Tensor() {
    if (blob) RedisModule_FreeString(nullptr, blob);
  }
};

// The arguments as views for the pure parser (redisai_args.h); they live as long as the command's argv.
redisai::Argv views(RedisModuleString** argv, int argc) {
  redisai::Argv v(static_cast<size_t>(argc));
  for (int i = 0; i < argc; ++i) {
    size_t len;
    const char* p = RedisModule_StringPtrLen(argv[i], &len);
    v[size_t(i)] = std::string_view(p, len);
  }
  return v;
}

int TensorSet(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  const redisai::Argv args = views(argv, argc);
  redisai::TensorSetArgs a;
  const char* err = redisai::parse_tensorset(args, a);
  if (err == redisai::kWrongArity) return RedisModule_WrongArity(ctx);
  RedisModuleKey* key = static_cast<RedisModuleKey*>(RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE));
  int kt = RedisModule_KeyType(key);
  if (kt != REDISMODULE_KEYTYPE_EMPTY && !(kt == REDISMODULE_KEYTYPE_MODULE && RedisModule_ModuleTypeGetType(key) == g_tensor_type)) {
    RedisModule_CloseKey(key);
    return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
  }
  auto tensor = new Tensor();
  tensor->dtype = a.dtype;
  tensor->dims = std::move(a.dims);
  if (!err && a.data == redisai::TensorSetArgs::Data::Values) err = redisai::parse_tensor_values(args, a, tensor->owned);
  if (err) {
    delete tensor;
    RedisModule_CloseKey(key);
    return RedisModule_ReplyWithError(ctx, err);
  }
  if (a.data == redisai::TensorSetArgs::Data::Blob) {
    RedisModule_RetainString(nullptr, argv[a.data_arg]);
    tensor->blob = argv[a.data_arg];
  } else if (a.data == redisai::TensorSetArgs::Data::Zeros) {
    tensor->owned.assign(size_t(a.bytes), '\0');
  }
  RedisModule_ModuleTypeSetValue(key, g_tensor_type, tensor);
  RedisModule_CloseKey(key);
  RedisModule_ReplicateVerbatim(ctx);
  return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

void reply_values(RedisModuleCtx* ctx, const Tensor& tensor) {
  const DType& t = kTypes[tensor.dtype];
  size_t len;
  const char* p = tensor.data(&len);
  size_t n = len / t.size;
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
  redisai::TensorGetArgs a;
  const char* err = redisai::parse_tensorget(views(argv, argc), a);
  if (err == redisai::kWrongArity) return RedisModule_WrongArity(ctx);
  if (err) return RedisModule_ReplyWithError(ctx, err);
  const bool meta = a.meta, blob = a.blob, values = a.values;
  RedisModuleKey* key = static_cast<RedisModuleKey*>(RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ));
  int kt = RedisModule_KeyType(key);
  if (kt == REDISMODULE_KEYTYPE_EMPTY) {
    RedisModule_CloseKey(key);
    return RedisModule_ReplyWithError(ctx, "ERR tensor key is empty");
  }
  if (kt != REDISMODULE_KEYTYPE_MODULE || RedisModule_ModuleTypeGetType(key) != g_tensor_type) {
    RedisModule_CloseKey(key);
    return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
  }
  const Tensor& tensor = *static_cast<Tensor*>(RedisModule_ModuleTypeGetValue(key));
  if (meta) {
    RedisModule_ReplyWithArray(ctx, (blob || values) ? 6 : 4);
    RedisModule_ReplyWithSimpleString(ctx, "dtype");
    RedisModule_ReplyWithSimpleString(ctx, kTypes[tensor.dtype].name);
    RedisModule_ReplyWithSimpleString(ctx, "shape");
    RedisModule_ReplyWithArray(ctx, long(tensor.dims.size()));
    for (long long d : tensor.dims) RedisModule_ReplyWithLongLong(ctx, d);
    if (blob || values) RedisModule_ReplyWithSimpleString(ctx, blob ? "blob" : "values");
  }
  if (blob) {
    size_t len;
    const char* p = tensor.data(&len);
    RedisModule_ReplyWithStringBuffer(ctx, p, len);
  } else if (values) {
    reply_values(ctx, tensor);
  }
  RedisModule_CloseKey(key);
  return REDISMODULE_OK;
}

// --- data type methods ---
void* TensorRdbLoad(RedisModuleIO* rdb, int encver) {
  if (encver != 0) return nullptr;
  auto t = new Tensor();
  t->dtype = int(RedisModule_LoadUnsigned(rdb));
  uint64_t n = RedisModule_LoadUnsigned(rdb);
  for (uint64_t i = 0; i < n; ++i) t->dims.push_back((long long)RedisModule_LoadSigned(rdb));
  size_t len = 0;
  char* buf = RedisModule_LoadStringBuffer(rdb, &len);
  t->owned.assign(buf, len);
  RedisModule_Free(buf);
  if (t->dtype < 0 || t->dtype >= kNumTypes) {
    delete t;
    return nullptr;
  }
  return t;
}

void TensorRdbSave(RedisModuleIO* rdb, void* value) {
  const Tensor& t = *static_cast<Tensor*>(value);
  RedisModule_SaveUnsigned(rdb, uint64_t(t.dtype));
  RedisModule_SaveUnsigned(rdb, t.dims.size());
  for (long long d : t.dims) RedisModule_SaveSigned(rdb, d);
  size_t len;
  const char* p = t.data(&len);
  RedisModule_SaveStringBuffer(rdb, p, len);
}

void TensorAofRewrite(RedisModuleIO* aof, RedisModuleString* key, void* value) {
  const Tensor& t = *static_cast<Tensor*>(value);
  size_t len;
  const char* p = t.data(&len);
  // AI.TENSORSET key TYPE d0 [d1 [d2 [d3]]] BLOB data (tensors of more than 4 dimensions are flattened)
  long long d[4] = {1, 1, 1, 1};
  size_t n = std::min<size_t>(t.dims.size(), 4);
  for (size_t i = 0; i < t.dims.size(); ++i) {
    if (i < 3) d[i] = t.dims[i];
    else d[3] *= t.dims[i];
  }
  switch (n) {
    case 1: RedisModule_EmitAOF(aof, "AI.TENSORSET", "sclb", key, kTypes[t.dtype].name, d[0], p, len); break;
    case 2: RedisModule_EmitAOF(aof, "AI.TENSORSET", "scllb", key, kTypes[t.dtype].name, d[0], d[1], p, len); break;
    case 3: RedisModule_EmitAOF(aof, "AI.TENSORSET", "sclllb", key, kTypes[t.dtype].name, d[0], d[1], d[2], p, len); break;
    default: RedisModule_EmitAOF(aof, "AI.TENSORSET", "scllllb", key, kTypes[t.dtype].name, d[0], d[1], d[2], d[3], p, len);
  }
}

void TensorFree(void* value) { delete static_cast<Tensor*>(value); }

size_t TensorMemUsage(const void* value) {
  const Tensor& t = *static_cast<const Tensor*>(value);
  size_t len;
  t.data(&len);
  return sizeof t + len + t.dims.size() * sizeof(long long);
}

}  // namespace

extern "C" int RedisModule_OnLoad(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (RedisModule_Init(ctx, "ai", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR) return REDISMODULE_ERR;
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
