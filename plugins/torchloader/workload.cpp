#include "workload.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <string_view>

namespace torchloader {
namespace {

constexpr std::array<const char*, 14> kColumns = {
    "arch",     "depth",      "batch",       "workers",    "output_folder", "master",  "port",
    "arrival_time", "cuda_device", "start_iter", "start_epoch",   "end_iter", "end_epoch", "node_size"};

[[noreturn]] void fail(const std::string& source, int line, const std::string& column, const std::string& what) {
  std::string msg = source + ":" + std::to_string(line) + ": ";
  if (!column.empty()) msg += column + ": ";
  throw std::runtime_error(msg + what);
}

std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n\v\f";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

// One raw field: its trimmed text, and whether it was one double-quoted string (then text is unquoted).
struct Field {
  std::string text;
  bool quoted = false;
};

// Drops the surrounding quotes of a field that is exactly one quoted string ("" inside -> ").
// Returns false when t is not of that form.
bool unquote(std::string_view t, std::string& out) {
  if (t.size() < 2 || t.front() != '"' || t.back() != '"') return false;
  out.clear();
  for (size_t i = 1; i + 1 < t.size(); ++i) {
    if (t[i] == '"') {
      if (i + 2 < t.size() && t[i + 1] == '"') {
        out += '"';
        ++i;
        continue;
      }
      return false;  // a quote closes before the end: not one quoted string
    }
    out += t[i];
  }
  return true;
}

// Splits a line at commas outside quotes and brackets.
std::vector<Field> split_line(std::string_view line, const std::string& source, int lineno) {
  std::vector<std::string_view> raw;
  bool in_quote = false;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (in_quote) {
      if (c == '"') in_quote = false;  // "" is two toggles: stays correct
    } else if (c == '"') {
      in_quote = true;
    } else if (c == '[') {
      ++depth;
    } else if (c == ']') {
      if (depth == 0) fail(source, lineno, "", "unbalanced ']' in column " + std::to_string(raw.size() + 1));
      --depth;
    } else if (c == ',' && depth == 0) {
      raw.push_back(line.substr(start, i - start));
      start = i + 1;
    }
  }
  if (in_quote) fail(source, lineno, "", "unterminated quote in column " + std::to_string(raw.size() + 1));
  if (depth != 0) fail(source, lineno, "", "unterminated '[' in column " + std::to_string(raw.size() + 1));
  raw.push_back(line.substr(start));

  std::vector<Field> fields;
  fields.reserve(raw.size());
  for (std::string_view r : raw) {
    std::string_view t = trim(r);
    Field f;
    std::string unq;
    if (unquote(t, unq)) {
      f.text = unq;
      f.quoted = true;
    } else {
      f.text = std::string(t);
    }
    fields.push_back(std::move(f));
  }
  return fields;
}

int parse_int(const std::string& s, const std::string& source, int line, const std::string& column) {
  std::string_view t = trim(s);
  if (!t.empty() && t.front() == '+') t.remove_prefix(1);
  int v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec == std::errc::invalid_argument || p != t.data() + t.size())
    fail(source, line, column, "'" + s + "' is not an integer");
  if (ec == std::errc::result_out_of_range) fail(source, line, column, "'" + s + "' is out of range");
  return v;
}

double parse_double(const std::string& s, const std::string& source, int line, const std::string& column) {
  std::string_view t = trim(s);
  if (!t.empty() && t.front() == '+') t.remove_prefix(1);
  double v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || p != t.data() + t.size() || !std::isfinite(v))
    fail(source, line, column, "'" + s + "' is not a number");
  return v;
}

// A group of device indexes separated by blanks and/or commas: "0 1", "0,1", "0, 1".
std::vector<int> parse_device_group(std::string_view g, const std::string& source, int line) {
  std::vector<int> out;
  size_t i = 0;
  while (i < g.size()) {
    while (i < g.size() && (g[i] == ' ' || g[i] == '\t' || g[i] == ',')) ++i;
    size_t b = i;
    while (i < g.size() && g[i] != ' ' && g[i] != '\t' && g[i] != ',') ++i;
    if (i == b) break;
    std::string tok(g.substr(b, i - b));
    int d = parse_int(tok, source, line, "cuda_device");
    if (d < 0) fail(source, line, "cuda_device", "device index " + tok + " is negative");
    out.push_back(d);
  }
  return out;
}

std::vector<std::vector<int>> parse_cuda_device(const Field& f, const std::string& source, int line) {
  const std::string& s = f.text;
  std::vector<std::vector<int>> nodes;
  if (f.quoted) {  // a bare "0 1": one node
    nodes.push_back(parse_device_group(s, source, line));
    return nodes;
  }
  std::string_view t = trim(s);
  if (t.empty()) return nodes;
  if (t.front() != '[' || t.back() != ']')
    fail(source, line, "cuda_device", "'" + s + "' is not a device list (e.g. [\"0 1\" \"0 1\"])");
  std::string_view inner = trim(t.substr(1, t.size() - 2));
  if (inner.empty()) return nodes;
  bool has_groups = inner.find('"') != std::string_view::npos || inner.find('[') != std::string_view::npos;
  if (!has_groups) {  // [0 1] or [0,1]: one node
    nodes.push_back(parse_device_group(inner, source, line));
    return nodes;
  }
  // Groups "..." or [...], separated by blanks and/or commas.
  size_t i = 0;
  while (i < inner.size()) {
    char c = inner[i];
    if (c == ' ' || c == '\t' || c == ',') {
      ++i;
      continue;
    }
    char close = c == '"' ? '"' : c == '[' ? ']' : 0;
    if (!close) fail(source, line, "cuda_device", "'" + s + "': expected a quoted or bracketed device group");
    size_t e = inner.find(close, i + 1);
    if (e == std::string_view::npos) fail(source, line, "cuda_device", "'" + s + "': unterminated device group");
    nodes.push_back(parse_device_group(inner.substr(i + 1, e - i - 1), source, line));
    i = e + 1;
  }
  return nodes;
}

void require_positive(int v, const std::string& source, int line, const std::string& column) {
  if (v <= 0) fail(source, line, column, "must be positive, got " + std::to_string(v));
}

}  // namespace

std::vector<AppSpec> parse_workload(const std::string& text, const std::string& source_name) {
  std::vector<AppSpec> apps;
  std::map<std::string, size_t> index;  // column name -> field position
  size_t ncols = 0;
  bool have_header = false;
  int lineno = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string_view line(text.data() + pos, nl - pos);
    pos = nl + 1;
    ++lineno;
    if (trim(line).empty()) continue;
    std::vector<Field> fields = split_line(line, source_name, lineno);

    if (!have_header) {
      for (size_t i = 0; i < fields.size(); ++i) {
        const std::string& name = fields[i].text;
        if (std::find(kColumns.begin(), kColumns.end(), name) == kColumns.end())
          fail(source_name, lineno, "header", "unknown column '" + name + "'");
        if (!index.emplace(name, i).second) fail(source_name, lineno, "header", "duplicate column '" + name + "'");
      }
      for (const char* c : kColumns)
        if (!index.count(c)) fail(source_name, lineno, "header", std::string("missing column '") + c + "'");
      ncols = fields.size();
      have_header = true;
      continue;
    }

    if (fields.size() != ncols)
      fail(source_name, lineno, "",
           "expected " + std::to_string(ncols) + " fields, got " + std::to_string(fields.size()));
    auto field = [&](const char* c) -> const Field& { return fields[index.at(c)]; };
    auto integer = [&](const char* c) { return parse_int(field(c).text, source_name, lineno, c); };

    AppSpec a;
    a.line = lineno;
    a.arch = field("arch").text;
    if (a.arch != "resnet" && a.arch != "vgg" && a.arch != "googlenet")
      fail(source_name, lineno, "arch", "'" + a.arch + "' is not one of resnet, vgg, googlenet");
    a.depth = integer("depth");
    a.batch = integer("batch");
    a.workers = integer("workers");
    a.output_folder = field("output_folder").text;
    a.master = field("master").text;
    a.port = integer("port");
    a.arrival_time = parse_double(field("arrival_time").text, source_name, lineno, "arrival_time");
    a.cuda_device = parse_cuda_device(field("cuda_device"), source_name, lineno);
    a.start_iter = integer("start_iter");
    a.start_epoch = integer("start_epoch");
    a.end_iter = integer("end_iter");
    a.end_epoch = integer("end_epoch");
    a.node_size = integer("node_size");

    require_positive(a.batch, source_name, lineno, "batch");
    require_positive(a.workers, source_name, lineno, "workers");
    require_positive(a.node_size, source_name, lineno, "node_size");
    require_positive(a.end_iter, source_name, lineno, "end_iter");
    if (a.arrival_time < 0)
      fail(source_name, lineno, "arrival_time", "must not be negative, got " + field("arrival_time").text);
    if (!a.cuda_device.empty()) {
      if (static_cast<int>(a.cuda_device.size()) != a.node_size)
        fail(source_name, lineno, "cuda_device",
             "lists " + std::to_string(a.cuda_device.size()) + " node(s) but node_size is " +
                 std::to_string(a.node_size));
      for (size_t n = 0; n < a.cuda_device.size(); ++n)
        if (a.cuda_device[n].empty())
          fail(source_name, lineno, "cuda_device", "node " + std::to_string(n) + " lists no device");
    }
    apps.push_back(std::move(a));
  }
  if (!have_header) fail(source_name, 1, "header", "no header row (the workload is empty)");
  return apps;
}

int total_iterations(const AppSpec& app) {
  long long epochs = std::max(1LL, static_cast<long long>(app.end_epoch) - app.start_epoch + 1);
  long long total = static_cast<long long>(app.end_iter) * epochs - app.start_iter;
  return static_cast<int>(std::clamp(total, 0LL, static_cast<long long>(std::numeric_limits<int>::max())));
}

}  // namespace torchloader
