#include "redisai_args.h"

#include <cctype>
#include <cerrno>
#include <charconv>
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
    count *= d;
    out.dims.push_back(d);
  }
  if (out.dims.empty()) return kArity;
  out.count = count;
  out.bytes = count * (long long)kTypes[out.dtype].size;
  if (out.bytes > kMaxTensorBytes) return "ERR tensor is too large";
  if (i < argc && keyword(argv[i], "BLOB")) {
    if (argc != i + 2) return kArity;
    if ((long long)argv[i + 1].size() != out.bytes) return "ERR data length does not match tensor shape and type";
    out.data = TensorSetArgs::Data::Blob;
    out.data_arg = i + 1;
  } else if (i < argc && keyword(argv[i], "VALUES")) {
    if ((long long)(argc - i - 1) != count) return "ERR wrong number of values provided";
    out.data = TensorSetArgs::Data::Values;
    out.data_arg = i + 1;
  }
  return nullptr;
}

const char* parse_tensor_values(const Argv& argv, const TensorSetArgs& args, std::string& bytes) {
  const DType& t = kTypes[args.dtype];
  bytes.assign(size_t(args.bytes), '\0');
  const long long lo = !t.is_signed ? 0 : t.size == 8 ? LLONG_MIN : -(1LL << (t.size * 8 - 1));
  const long long hi = t.size == 8 ? LLONG_MAX : t.is_signed ? (1LL << (t.size * 8 - 1)) - 1 : (1LL << (t.size * 8)) - 1;
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

}  // namespace redisai
