// Argument parsing of the RedisAI commands that redisai_module.cpp serves, with no Redis call in it, so that it
// can be unit-tested and fuzzed (tests/fuzz/redisai_fuzz.cpp). argv is the whole command as the module gets it,
// argv[0] being the command name. Each parse_* returns nullptr when the arguments are valid, else RedisAI's
// exact error text for RedisModule_ReplyWithError, or kWrongArity, which the module answers with
// RedisModule_WrongArity (Redis' own message, naming the command as the client spelled it).
// Each command has its own <Command>Args struct and parse_<command> function, built from the same helpers
// (keyword, to_long_long, to_double, names).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace redisai {

using Argv = std::vector<std::string_view>;

// Not a reply text: a marker for "answer with RedisModule_WrongArity".
inline constexpr char kWrongArity[] = "ERR wrong number of arguments";

struct DType {
  const char* name;
  size_t size;
  bool is_float, is_signed;
  bool is_bool = false;    // one byte, 0 or 1
  bool is_string = false;  // C strings one after the other, each ending in '\0' (RedisAI 1.2.7's blob): `size` is
                           // that of an empty one, the bytes vary
};
// An RDB file stores the index: new types go at the end.
inline constexpr DType kTypes[] = {{"FLOAT", 4, true, true},   {"DOUBLE", 8, true, true}, {"INT8", 1, false, true},
                                   {"INT16", 2, false, true},  {"INT32", 4, false, true}, {"INT64", 8, false, true},
                                   {"UINT8", 1, false, false}, {"UINT16", 2, false, false}, {"BOOL", 1, false, false, true},
                                   {"STRING", 1, false, false, false, true}};
// A BOOL tensor's bytes are each 0 or 1 (RedisAI 1.2.7 refuses others: "ERR BOOL tensor elements must be 0 or 1").
bool valid_bools(std::string_view bytes);
// A STRING tensor's blob holds exactly `count` strings, the last one terminated (1.2.7's
// "ERR Number of string elements in data blob does not match tensor length" otherwise).
bool valid_strings(std::string_view blob, long long count);
// Whether the blob of a tensor of this type and element count is what it must be.
bool valid_blob(int dtype, long long count, std::string_view blob);
inline constexpr int kNumTypes = sizeof kTypes / sizeof kTypes[0];
inline constexpr long long kMaxTensorBytes = 512LL << 20;  // Redis' default proto-max-bulk-len
// What one stored value may hold, the same when it is stored and when an RDB file is loaded: a value stored
// beyond what loading takes would make the saved RDB unloadable, and the server refuse to start with every key.
inline constexpr size_t kMaxTensorDims = 64;
inline constexpr size_t kMaxNames = 4096;  // a model's inputs or outputs, a script's entry points

// A keyword, compared without regard to ASCII case (as Redis compares command words).
bool keyword(std::string_view arg, std::string_view word);
// Index into kTypes, or -1.
int dtype_of(std::string_view name);
// Numbers in Redis' own syntax: exactly what RedisModule_StringToLongLong / RedisModule_StringToDouble accept
// (no blanks, no '+', no leading zeros for integers; strtod's forms but not NaN for doubles).
bool to_long_long(std::string_view s, long long& v);
bool to_double(std::string_view s, double& v);

// AI.TENSORSET key type dim [dim ...] [BLOB data | VALUES v ...]
struct TensorSetArgs {
  std::string_view key;
  int dtype = -1;                // index into kTypes
  std::vector<long long> dims;   // each > 0
  long long count = 0;           // elements: the product of dims
  long long bytes = 0;           // count * element size, at most kMaxTensorBytes
  enum class Data { Zeros, Blob, Values } data = Data::Zeros;
  size_t data_arg = 0;           // argv index of the blob (bytes long) or of the first of `count` values
};
const char* parse_tensorset(const Argv& argv, TensorSetArgs& out);
// Converts the VALUES of a parsed AI.TENSORSET into `bytes` (resized to args.bytes), little-endian elements of
// the tensor's type. An integer out of the type's range is an invalid value; a float beyond FLOAT's range
// becomes +-inf, as a C conversion makes it.
const char* parse_tensor_values(const Argv& argv, const TensorSetArgs& args, std::string& bytes);

// AI.TENSORGET key [META] [BLOB | VALUES]   (neither: META and VALUES, RedisAI's default)
struct TensorGetArgs {
  std::string_view key;
  bool meta = false, blob = false, values = false;
};
const char* parse_tensorget(const Argv& argv, TensorGetArgs& out);

// A device: CPU, GPU or GPU:<n> (any case), normalised to upper case; false when it is none of them.
bool parse_device(std::string_view arg, std::string& device);

// AI.MODELSTORE key backend device [TAG tag] [BATCHSIZE n [MINBATCHSIZE m [MINBATCHTIMEOUT ms]]]
//               [INPUTS n name ...] [OUTPUTS n name ...] BLOB chunk [chunk ...]
// Only the TORCH backend is served; the model is the concatenation of the chunks.
struct ModelStoreArgs {
  std::string_view key, backend, tag;
  std::string device;
  long long batchsize = 0, minbatchsize = 0, minbatchtimeout = 0;
  std::vector<std::string_view> inputs, outputs;
  size_t blob_first = 0;  // argv index of the first chunk; the chunks run to the end of argv
};
const char* parse_modelstore(const Argv& argv, ModelStoreArgs& out);

// AI.MODELEXECUTE key INPUTS n in ... OUTPUTS n out ... [TIMEOUT ms]
// AI.SCRIPTEXECUTE key function [KEYS n k ...] [INPUTS n in ...] [ARGS n a ...] [OUTPUTS n out ...] [TIMEOUT ms]
// AI.SCRIPTRUN key function [INPUTS in ...] OUTPUTS out ...       (RedisAI's deprecated form: no counts)
struct ExecuteArgs {
  std::string_view key, function;  // function: scripts only
  std::vector<std::string_view> keys, inputs, args, outputs;
  long long timeout_ms = 0;        // 0: none
};
const char* parse_modelexecute(const Argv& argv, ExecuteArgs& out);
const char* parse_scriptexecute(const Argv& argv, ExecuteArgs& out);
const char* parse_scriptrun(const Argv& argv, ExecuteArgs& out);

// AI.SCRIPTSTORE key device [TAG tag] ENTRY_POINTS n fn ... SOURCE text
// AI.SCRIPTSET key device [TAG tag] SOURCE text                    (deprecated: no entry points)
struct ScriptStoreArgs {
  std::string_view key, tag, source;
  std::string device;
  std::vector<std::string_view> entry_points;
};
const char* parse_scriptstore(const Argv& argv, ScriptStoreArgs& out);
const char* parse_scriptset(const Argv& argv, ScriptStoreArgs& out);

// AI.MODELGET key [META] [BLOB]   /   AI.SCRIPTGET key [META] [SOURCE]   (neither: both)
struct ValueGetArgs {
  std::string_view key;
  bool meta = false, payload = false;
};
const char* parse_modelget(const Argv& argv, ValueGetArgs& out);
const char* parse_scriptget(const Argv& argv, ValueGetArgs& out);

// AI.INFO key [RESETSTAT]
struct InfoArgs {
  std::string_view key;
  bool reset = false;
  bool batches = false;  // WITHBATCHES (ours, not RedisAI's): add the `batches` pair
};
const char* parse_info(const Argv& argv, InfoArgs& out);

}  // namespace redisai
