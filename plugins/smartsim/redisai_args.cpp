#include "redisai_args.h"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace redisai {

bool keyword(std::string_view arg, std::string_view word) {
  if (arg.size() != word.size()) return false;
  for (size_t i = 0; i < arg.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(arg[i])) != std::tolower(static_cast<unsigned char>(word[i]))) return false;
  return true;
}

int dtype_of(std::string_view name) {
  for (int i = 0; i < kNumTypes; ++i)
    if (keyword(name, kTypes[i].name)) return i;
  return -1;
}

bool to_long_long(std::string_view s, long long& v) {
  // Redis' string2ll: at most 20 characters, an optional '-', then a digit 1-9 (or the lone "0").
  if (s.empty() || s.size() > 20) return false;
  if (s == "0") return v = 0, true;
  size_t first = s[0] == '-' ? 1 : 0;
  if (first >= s.size() || s[first] < '1' || s[first] > '9') return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size();
}

bool to_double(std::string_view s, double& v) {
  // Redis' string2d: strtod over the whole text, no leading blank, no overflow (or underflow to 0), no NaN.
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return false;
  std::string text(s);  // strtod needs the terminating NUL
  char* end = nullptr;
  errno = 0;
  double d = std::strtod(text.c_str(), &end);
  if (size_t(end - text.c_str()) != text.size()) return false;
  if (errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL || std::fpclassify(d) == FP_ZERO)) return false;
  if (std::isnan(d)) return false;
  v = d;
  return true;
}

const char* parse_tensorset(const Argv& argv, TensorSetArgs& out) {
  static constexpr char kArity[] = "ERR wrong number of arguments for 'AI.TENSORSET' command";
  const size_t argc = argv.size();
  if (argc < 4) return kWrongArity;
  out = TensorSetArgs();
  out.key = argv[1];
  out.dtype = dtype_of(argv[2]);
  if (out.dtype < 0) return "ERR invalid data type";
  size_t i = 3;
  long long count = 1;
  for (; i < argc && !keyword(argv[i], "BLOB") && !keyword(argv[i], "VALUES"); ++i) {
    long long d;
    if (!to_long_long(argv[i], d) || d <= 0) return "ERR invalid or negative value found in tensor shape";
    if (count > kMaxTensorBytes / d) return "ERR tensor is too large";
    if (out.dims.size() == kMaxTensorDims) return "ERR tensor has more than 64 dimensions";
    count *= d;
    out.dims.push_back(d);
  }
  if (out.dims.empty()) return kArity;
  out.count = count;
  out.bytes = count * (long long)kTypes[out.dtype].size;
  if (out.bytes > kMaxTensorBytes) return "ERR tensor is too large";
  if (i < argc && keyword(argv[i], "BLOB")) {
    if (argc != i + 2) return kArity;
    if (kTypes[out.dtype].is_string) {
      if (!valid_strings(argv[i + 1], count)) return "ERR Number of string elements in data blob does not match tensor length";
      out.bytes = (long long)argv[i + 1].size();
    } else if ((long long)argv[i + 1].size() != out.bytes) {
      return "ERR data length does not match tensor shape and type";
    }
    if (kTypes[out.dtype].is_bool && !valid_bools(argv[i + 1])) return "ERR BOOL tensor elements must be 0 or 1";
    out.data = TensorSetArgs::Data::Blob;
    out.data_arg = i + 1;
  } else if (i < argc && keyword(argv[i], "VALUES")) {
    if ((long long)(argc - i - 1) != count) return "ERR wrong number of values provided";
    out.data = TensorSetArgs::Data::Values;
    out.data_arg = i + 1;
  }
  return nullptr;
}

bool valid_bools(std::string_view bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](char c) { return c == 0 || c == 1; });
}

bool valid_strings(std::string_view blob, long long count) {
  return !blob.empty() && blob.back() == '\0' && (long long)std::count(blob.begin(), blob.end(), '\0') == count;
}

bool valid_blob(int dtype, long long count, std::string_view blob) {
  const DType& t = kTypes[dtype];
  if (t.is_string) return valid_strings(blob, count);
  return (unsigned long long)count * t.size == blob.size() && (!t.is_bool || valid_bools(blob));
}

const char* parse_tensor_values(const Argv& argv, const TensorSetArgs& args, std::string& bytes) {
  const DType& t = kTypes[args.dtype];
  if (t.is_string) {  // each value a C string: a '\0' only at its end, added when it is not there
    bytes.clear();
    for (long long k = 0; k < args.count; ++k) {
      std::string_view s = argv[args.data_arg + size_t(k)];
      if (!s.empty() && s.back() == '\0') s.remove_suffix(1);
      if (s.find('\0') != std::string_view::npos) return "ERR C-string value contains null character";
      if (bytes.size() + s.size() + 1 > size_t(kMaxTensorBytes)) return "ERR tensor is too large";
      bytes.append(s).push_back('\0');
    }
    return nullptr;
  }
  bytes.assign(size_t(args.bytes), '\0');
  const long long lo = !t.is_signed ? 0 : t.size == 8 ? LLONG_MIN : -(1LL << (t.size * 8 - 1));
  const long long hi = t.is_bool ? 1 : t.size == 8 ? LLONG_MAX : t.is_signed ? (1LL << (t.size * 8 - 1)) - 1 : (1LL << (t.size * 8)) - 1;
  for (long long k = 0; k < args.count; ++k) {
    std::string_view s = argv[args.data_arg + size_t(k)];
    char* dst = &bytes[size_t(k) * t.size];
    if (t.is_float) {
      double d;
      if (!to_double(s, d)) return "ERR invalid value";
      if (t.size == 4) {
        float f = float(d);
        std::memcpy(dst, &f, 4);
      } else {
        std::memcpy(dst, &d, 8);
      }
    } else {
      long long v;
      if (!to_long_long(s, v) || v < lo || v > hi) return "ERR invalid value";
      std::memcpy(dst, &v, t.size);  // little-endian: the low bytes
    }
  }
  return nullptr;
}

const char* parse_tensorget(const Argv& argv, TensorGetArgs& out) {
  if (argv.size() < 2 || argv.size() > 4) return kWrongArity;
  out = TensorGetArgs();
  out.key = argv[1];
  for (size_t i = 2; i < argv.size(); ++i) {
    if (keyword(argv[i], "META")) out.meta = true;
    else if (keyword(argv[i], "BLOB")) out.blob = true;
    else if (keyword(argv[i], "VALUES")) out.values = true;
    else return "ERR unsupported data format";
  }
  if (out.blob && out.values) return "ERR both BLOB and VALUES specified";
  if (!out.meta && !out.blob && !out.values) out.meta = out.values = true;
  return nullptr;
}

bool parse_device(std::string_view arg, std::string& device) {
  std::string up(arg);
  for (char& c : up) c = char(std::toupper(static_cast<unsigned char>(c)));
  if (up == "CPU" || up == "GPU") return device = up, true;
  if (up.rfind("GPU:", 0) != 0 && up.rfind("CPU:", 0) != 0) return false;
  long long n;
  if (!to_long_long(std::string_view(up).substr(4), n) || n < 0 || n > 1023) return false;
  device = up;
  return true;
}

namespace {

// A counted list at argv[i]: `WORD n name ...`; i moves past it. nullptr, or the error naming the word.
const char* counted(const Argv& argv, size_t& i, std::vector<std::string_view>& names, const char* bad_count) {
  long long n;
  if (i + 1 >= argv.size() || !to_long_long(argv[i + 1], n) || n < 0) return bad_count;
  if (argv.size() - (i + 2) < size_t(n)) return bad_count;
  if (size_t(n) > kMaxNames) return "ERR too many names in one list (at most 4096)";
  names.assign(argv.begin() + long(i + 2), argv.begin() + long(i + 2 + size_t(n)));
  i += 2 + size_t(n);
  return nullptr;
}

// An optional counted list `WORD n name ...` at argv[i]: nullptr when absent or read, else its error.
const char* optional_counted(const Argv& argv, size_t& i, std::string_view word, std::vector<std::string_view>& names,
                             const char* bad_count) {
  return i < argv.size() && keyword(argv[i], word) ? counted(argv, i, names, bad_count) : nullptr;
}

// [TAG tag] at argv[i]
void optional_tag(const Argv& argv, size_t& i, std::string_view& tag) {
  if (i + 1 < argv.size() && keyword(argv[i], "TAG")) {
    tag = argv[i + 1];
    i += 2;
  }
}

const char* optional_timeout(const Argv& argv, size_t& i, long long& timeout_ms) {
  if (i < argv.size() && keyword(argv[i], "TIMEOUT")) {
    if (i + 1 >= argv.size() || !to_long_long(argv[i + 1], timeout_ms) || timeout_ms <= 0) return "ERR Invalid value for TIMEOUT";
    i += 2;
  }
  return i == argv.size() ? nullptr : "ERR Invalid argument";
}

// A positive count that follows `word`.
const char* positive(const Argv& argv, size_t& i, long long& v, const char* error) {
  if (i + 1 >= argv.size() || !to_long_long(argv[i + 1], v) || v <= 0) return error;
  i += 2;
  return nullptr;
}

}  // namespace

const char* parse_modelstore(const Argv& argv, ModelStoreArgs& out) {
  if (argv.size() < 4) return kWrongArity;
  out = ModelStoreArgs();
  out.key = argv[1];
  out.backend = argv[2];
  // TF, TFLITE and ONNX are RedisAI backends too; this module serves TorchScript only.
  if (!keyword(out.backend, "TORCH")) return "ERR unsupported backend";
  if (!parse_device(argv[3], out.device)) return "ERR Invalid DEVICE";
  size_t i = 4;
  optional_tag(argv, i, out.tag);
  if (i < argv.size() && keyword(argv[i], "BATCHSIZE")) {
    if (const char* e = positive(argv, i, out.batchsize, "ERR Invalid argument for BATCHSIZE")) return e;
    if (i < argv.size() && keyword(argv[i], "MINBATCHSIZE")) {
      if (const char* e = positive(argv, i, out.minbatchsize, "ERR Invalid argument for MINBATCHSIZE")) return e;
      if (out.minbatchsize > out.batchsize) return "ERR MINBATCHSIZE cannot be greater than BATCHSIZE";
      if (i < argv.size() && keyword(argv[i], "MINBATCHTIMEOUT"))
        if (const char* e = positive(argv, i, out.minbatchtimeout, "ERR Invalid argument for MINBATCHTIMEOUT")) return e;
    }
  }
  if (i < argv.size() && keyword(argv[i], "MINBATCHSIZE")) return "ERR MINBATCHSIZE specified without BATCHSIZE";
  if (i < argv.size() && keyword(argv[i], "MINBATCHTIMEOUT")) return "ERR MINBATCHTIMEOUT specified without MINBATCHSIZE";
  // INPUTS and OUTPUTS name a TF graph's nodes; RedisAI 1.2.7 refuses them for every other backend.
  if (i >= argv.size()) return "ERR Insufficient arguments, missing model BLOB";
  if (keyword(argv[i], "INPUTS")) return "ERR INPUTS argument should not be specified for this backend";
  if (!keyword(argv[i], "BLOB")) return "ERR Invalid argument, expected BLOB";
  if (i + 1 >= argv.size()) return "ERR Insufficient arguments, missing model BLOB";
  out.blob_first = i + 1;
  return nullptr;
}

const char* parse_modelexecute(const Argv& argv, ExecuteArgs& out) {
  if (argv.size() < 4) return kWrongArity;
  out = ExecuteArgs();
  out.key = argv[1];
  size_t i = 2;
  if (!keyword(argv[i], "INPUTS")) return "ERR INPUTS not specified";
  if (const char* e = counted(argv, i, out.inputs, "ERR Invalid argument for input_count")) return e;
  if (i >= argv.size() || !keyword(argv[i], "OUTPUTS")) return "ERR OUTPUTS not specified";
  if (const char* e = counted(argv, i, out.outputs, "ERR Invalid argument for output_count")) return e;
  if (out.inputs.empty()) return "ERR Invalid argument for input_count";
  if (out.outputs.empty()) return "ERR Invalid argument for output_count";
  return optional_timeout(argv, i, out.timeout_ms);
}

const char* parse_scriptexecute(const Argv& argv, ExecuteArgs& out) {
  if (argv.size() < 3) return kWrongArity;
  out = ExecuteArgs();
  out.key = argv[1];
  out.function = argv[2];
  size_t i = 3;
  if (const char* e = optional_counted(argv, i, "KEYS", out.keys, "ERR Invalid argument for key_count")) return e;
  if (const char* e = optional_counted(argv, i, "INPUTS", out.inputs, "ERR Invalid argument for input_count")) return e;
  if (const char* e = optional_counted(argv, i, "ARGS", out.args, "ERR Invalid argument for arg_count")) return e;
  if (const char* e = optional_counted(argv, i, "OUTPUTS", out.outputs, "ERR Invalid argument for output_count")) return e;
  return optional_timeout(argv, i, out.timeout_ms);
}

const char* parse_scriptrun(const Argv& argv, ExecuteArgs& out) {
  if (argv.size() < 5) return kWrongArity;
  out = ExecuteArgs();
  out.key = argv[1];
  out.function = argv[2];
  size_t i = 3;
  if (keyword(argv[i], "INPUTS"))
    for (++i; i < argv.size() && !keyword(argv[i], "OUTPUTS"); ++i) out.inputs.push_back(argv[i]);
  if (i >= argv.size() || !keyword(argv[i], "OUTPUTS")) return "ERR OUTPUTS not specified";
  for (++i; i < argv.size() && !keyword(argv[i], "TIMEOUT"); ++i) out.outputs.push_back(argv[i]);
  if (out.outputs.empty()) return "ERR OUTPUTS not specified";
  return optional_timeout(argv, i, out.timeout_ms);
}

namespace {

// key device [TAG tag] at argv[1..]; i moves past them.
const char* script_head(const Argv& argv, ScriptStoreArgs& out, size_t& i) {
  out = ScriptStoreArgs();
  out.key = argv[1];
  if (!parse_device(argv[2], out.device)) return "ERR Invalid DEVICE";
  i = 3;
  optional_tag(argv, i, out.tag);
  return nullptr;
}

const char* script_source(const Argv& argv, size_t i, ScriptStoreArgs& out) {
  if (i >= argv.size() || !keyword(argv[i], "SOURCE") || i + 2 != argv.size()) return "ERR Insufficient arguments, missing script SOURCE";
  out.source = argv[i + 1];
  return nullptr;
}

}  // namespace

const char* parse_scriptstore(const Argv& argv, ScriptStoreArgs& out) {
  if (argv.size() < 5) return kWrongArity;
  size_t i;
  if (const char* e = script_head(argv, out, i)) return e;
  if (i >= argv.size() || !keyword(argv[i], "ENTRY_POINTS")) return "ERR Insufficient arguments, missing script entry points";
  if (const char* e = counted(argv, i, out.entry_points, "ERR Invalid argument for entry_point_count")) return e;
  if (out.entry_points.empty()) return "ERR Invalid argument for entry_point_count";
  return script_source(argv, i, out);
}

const char* parse_scriptset(const Argv& argv, ScriptStoreArgs& out) {
  if (argv.size() < 5) return kWrongArity;
  size_t i;
  if (const char* e = script_head(argv, out, i)) return e;
  return script_source(argv, i, out);
}

namespace {

const char* value_get(const Argv& argv, ValueGetArgs& out, std::string_view payload_word) {
  if (argv.size() < 2 || argv.size() > 4) return kWrongArity;
  out = ValueGetArgs();
  out.key = argv[1];
  for (size_t i = 2; i < argv.size(); ++i) {
    if (keyword(argv[i], "META")) out.meta = true;
    else if (keyword(argv[i], payload_word)) out.payload = true;
    else return "ERR unrecognized parameter";
  }
  if (!out.meta && !out.payload) out.meta = out.payload = true;
  return nullptr;
}

}  // namespace

const char* parse_modelget(const Argv& argv, ValueGetArgs& out) { return value_get(argv, out, "BLOB"); }
const char* parse_scriptget(const Argv& argv, ValueGetArgs& out) { return value_get(argv, out, "SOURCE"); }

const char* parse_info(const Argv& argv, InfoArgs& out) {
  if (argv.size() < 2 || argv.size() > 3) return kWrongArity;
  out = InfoArgs();
  out.key = argv[1];
  if (argv.size() == 3) {
    if (keyword(argv[2], "WITHBATCHES")) out.batches = true;
    else if (keyword(argv[2], "RESETSTAT")) out.reset = true;
    else return "ERR unsupported subcommand";
  }
  return nullptr;
}

}  // namespace redisai
