#include "results/smartsim_import.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <future>
#include <optional>
#include <map>
#include <regex>
#include <sstream>

#include "common/error.h"
#include "common/files.h"
#include "common/parallel.h"
#include "common/text.h"
#include "results/run_folder.h"
#include "results/store.h"

namespace fanout {

namespace fs = std::filesystem;

namespace {

const std::regex kRankFile(R"(rank_(\d+)_timing\.csv)");
constexpr int64_t kMaxRank = 10'000'000;  // far above any job's ranks; what int holds with room

// INI sections -> key -> value, read by the rules of Python's configparser (its _read, with the defaults that
// SmartSim-Scaling's write_run_config uses): ';' and '#' start full-line comments (skipped, also inside a value),
// no inline comments; a line indented deeper than its key's line continues the value; an empty line inside a
// value is kept as an empty line of it; the joined value loses its trailing white space.
std::map<std::string, std::vector<std::pair<std::string, std::string>>> read_ini(const fs::path& file) {
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> out;
  std::istringstream in(read_input_file(file, 1 << 20));
  std::string section, line;
  int n = 0;
  std::string* value = nullptr;  // the value of the key being read (continuations go to it)
  size_t key_indent = 0;
  auto finish = [&] {  // '\n'.join(parts).rstrip()
    if (value) value->erase(value->find_last_not_of(" \t\r\n") + 1);
    value = nullptr;
  };
  while (std::getline(in, line)) {
    ++n;
    const std::string t = trim(line);
    if (!t.empty() && (t[0] == '#' || t[0] == ';')) continue;
    if (t.empty()) {
      if (value) *value += "\n";
      continue;
    }
    const size_t indent = line.find_first_not_of(" \t\r\f\v");
    if (value && indent > key_indent) {
      *value += "\n" + t;
      continue;
    }
    finish();
    key_indent = indent;
    if (t.front() == '[' && t.back() == ']') {
      section = trim(t.substr(1, t.size() - 2));
      continue;
    }
    auto eq = t.find_first_of("=:");
    if (eq == std::string::npos) throw UserError(file.string() + ":" + std::to_string(n) + ": not 'key = value'");
    if (section.empty()) throw UserError(file.string() + ":" + std::to_string(n) + ": a key before any [section]");
    std::string key = trim(t.substr(0, eq));
    for (const auto& [k, v] : out[section])
      if (k == key) throw UserError(file.string() + ":" + std::to_string(n) + ": '" + key + "' twice in [" + section + "]");
    out[section].emplace_back(std::move(key), trim(t.substr(eq + 1)));
    value = &out[section].back().second;
  }
  finish();
  return out;
}

// A run folder's own run.cfg (run-<date>-<time>/run.cfg: the sweep's lists, [run] name = run-...) describes the
// sessions below it; it is not a session.
bool is_run_level_config(const fs::path& cfg) {
  try {
    auto ini = read_ini(cfg);  // kept: a range-for over read_ini(cfg)["run"] would outlive the map
    for (auto& [k, v] : ini["run"])
      if (k == "name") return starts_with(v, "run-");
  } catch (const UserError&) {
    // unreadable: a session, whose import will report the file and line
  }
  return false;
}

// Timing files make a folder a session whatever its run.cfg says (the long fuzz run found a session whose [run]
// name began with "run-": it was taken for the run folder's config and neither imported nor reported).
bool is_session_dir(const fs::path& d) {
  std::error_code ec;
  for (auto& e : fs::directory_iterator(d, ec))
    if (std::regex_match(e.path().filename().string(), kRankFile)) return true;
  return fs::exists(d / "run.cfg", ec) && !is_run_level_config(d / "run.cfg");
}

std::vector<fs::path> session_dirs(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() > 3) it.disable_recursion_pending();
    // A fanout run's folder is ours, whatever its steps wrote in it (an exec step running SmartSim-Scaling's
    // client leaves rank_<r>_timing.csv there): not a SmartSim-Scaling session.
    if (it->is_directory(ec) && fs::exists(it->path() / kRunMetadataFile, ec)) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_directory(ec) && is_session_dir(it->path())) out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct TimingRow {
  int rank;
  std::string function;
  double seconds;
};

// from_chars for what the clients print; strtod's wider syntax (a leading '+', hex) as before when it declines.
std::optional<double> seconds_of(std::string_view s) {
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc() && end == s.data() + s.size()) return v;
  return parse_double(s);
}

// One rank_<r>_timing.csv: "rank,function,seconds" lines (blank lines skipped). Read whole and parsed in place:
// a sweep's tree holds millions of lines.
std::vector<TimingRow> read_rank_file(const fs::path& file) {
  const std::string text = read_input_file(file, size_t(2) << 30);  // a regular file: a FIFO would hang the import
  std::vector<TimingRow> rows;
  rows.reserve(text.size() / 24);
  int n = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string_view t = trim_view(std::string_view(text).substr(at, end - at));
    at = end + 1;
    ++n;
    if (t.empty()) continue;
    auto bad = [&](const std::string& why) {
      return UserError(file.string() + ":" + std::to_string(n) + ": " + why + " in '" + printable(t.substr(0, 80)) + "'");
    };
    const size_t c1 = t.find(','), c2 = c1 == t.npos ? t.npos : t.find(',', c1 + 1);
    if (c2 == t.npos || t.find(',', c2 + 1) != t.npos) throw bad("expected rank,function,seconds");
    auto rank = parse_int(trim_view(t.substr(0, c1)));
    auto secs = seconds_of(trim_view(t.substr(c2 + 1)));
    if (!rank) throw bad("rank is not an integer");
    if (*rank < 0 || *rank > kMaxRank) throw bad("rank is outside 0.." + std::to_string(kMaxRank));
    if (!secs) throw bad("seconds is not a number");
    rows.push_back({int(*rank), std::string(trim_view(t.substr(c1 + 1, c2 - c1 - 1))), *secs});
  }
  return rows;
}

std::string kind_of(const std::string& session) {
  if (starts_with(session, "infer")) return "inference";
  if (starts_with(session, "throughput")) return "throughput";
  if (starts_with(session, "aggregat")) return "aggregation";
  return "unknown";
}

// One session read (run.cfg and every rank file), before anything is stored.
struct SessionTimings {
  RunMetadata meta;
  std::vector<std::pair<int, std::vector<TimingRow>>> ranks;  // by rank
  bool producer = false;  // an aggregation producer: no timings, by design
};

SessionTimings read_session(const fs::path& dir, const fs::path& session) {
  SessionTimings s;
  RunMetadata& m = s.meta;
  m.session = session.filename().string();
  m.experiment = fs::absolute(dir).lexically_normal().filename().string();
  m.plugin = "smartsim-scaling";
  m.subcommand = kind_of(m.session);
  m.scheduler = "imported";
  const fs::path cfg = session / "run.cfg";
  if (!fs::exists(cfg)) throw UserError(cfg.string() + ": missing (every SmartSim-Scaling session has one)");
  // SmartSim-Scaling's write_run_config puts the driver's arguments in [attributes] and run facts in [run];
  // `language` is in both (the same value): parameters come from [attributes], [run] goes to provenance.
  auto ini = read_ini(cfg);
  for (auto& [k, v] : ini["attributes"]) m.parameters.emplace_back(k, v);
  for (auto& [k, v] : ini["run"]) {
    m.provenance["smartsim." + k] = v;
    const std::string& key = k;  // a structured binding cannot be captured before C++20
    const bool known = std::any_of(m.parameters.begin(), m.parameters.end(), [&](const auto& p) { return p.first == key; });
    if (k == "language" && !known) m.parameters.emplace_back("language", v);
  }
  if (m.parameters.empty()) throw UserError(cfg.string() + ": no [attributes] section");
  m.provenance["imported_from"] = fs::absolute(session).string();
  auto sorted = m.parameters;
  std::sort(sorted.begin(), sorted.end());
  std::string canon = "smartsim-scaling\n" + m.subcommand + "\n";
  for (auto& [k, v] : sorted) canon += k + "=" + v + "\n";
  m.param_hash = fnv1a_hex(canon);

  // Read every rank file first: a malformed one skips the whole session, before anything is stored.
  auto& ranks = s.ranks;
  std::vector<fs::path> rank_files;
  for (auto& e : fs::directory_iterator(session)) {
    std::smatch match;
    std::string name = e.path().filename().string();
    if (std::regex_match(name, match, kRankFile)) {
      // The digits of the name, checked as a rank: a huge number is an error naming the file, not a bare "stoi".
      const auto rank = parse_int(match[1].str());
      if (!rank || *rank > kMaxRank)
        throw UserError(e.path().string() + ": rank " + match[1].str().substr(0, 24) + " in the file name is outside 0.." + std::to_string(kMaxRank));
      ranks.emplace_back(int(*rank), std::vector<TimingRow>{});
      rank_files.push_back(e.path());
    }
  }
  // In parallel; the error reported is the first file's in directory order, as when they were read in turn.
  std::vector<std::string> errors(rank_files.size());
  parallel_for(rank_files.size(), [&](size_t i) {
    try {
      ranks[i].second = read_rank_file(rank_files[i]);
    } catch (const UserError& e) {
      errors[i] = e.what();
    }
  });
  for (const std::string& e : errors)
    if (!e.empty()) throw UserError(e);
  std::sort(ranks.begin(), ranks.end(), [](auto& a, auto& b) { return a.first < b.first; });
  // SmartSim-Scaling's aggregation producers write no timing file: nothing to import.
  s.producer = ranks.empty() && m.session.find("-prod-") != std::string::npos;
  return s;
}

}  // namespace

bool is_smartsim_tree(const fs::path& dir) { return !session_dirs(dir).empty(); }

// Sessions are read one ahead, in a thread of their own, while the previous one is stored: SQLite takes one
// writer, and reading (on every core) would otherwise wait for it.
SmartSimImportReport import_smartsim_tree(const fs::path& dir, ResultsDb& db) {
  SmartSimImportReport report;
  const std::vector<fs::path> sessions = session_dirs(dir);
  struct Read {
    SessionTimings timings;
    std::string error;
  };
  auto read = [&](size_t i) {
    Read r;
    try {
      r.timings = read_session(dir, sessions[i]);
    } catch (const std::exception& e) {
      r.error = e.what();
    }
    return r;
  };
  std::future<Read> next;
  if (!sessions.empty()) next = std::async(std::launch::async, read, 0);
  for (size_t i = 0; i < sessions.size(); ++i) {
    const fs::path& session = sessions[i];
    Read got = next.get();
    if (i + 1 < sessions.size()) next = std::async(std::launch::async, read, i + 1);
    if (!got.error.empty()) {
      report.skipped.push_back(session.string() + ": " + got.error);
      continue;
    }
    SessionTimings& s = got.timings;
    if (s.producer) {
      ++report.producers;
      continue;
    }
    try {
      RunStatusRecord st;
      st.state = s.ranks.empty() ? "FAILED" : "COMPLETED";
      st.reason = s.ranks.empty() ? "no rank_*_timing.csv: the run produced no timings" : "";
      s.meta.status = st;
      auto stored = db.store_run(s.meta, session, [&](const ResultsDb::SampleSink& sink, IngestReport&) {
        std::map<std::string, int64_t> ids;
        for (auto& [rank, rows] : s.ranks) {
          std::map<std::string, int64_t> iteration;
          for (auto& r : rows) {
            auto it = ids.find(r.function);
            if (it == ids.end()) it = ids.emplace(r.function, sink.metric("client", r.function, "s")).first;
            sink.sample(r.rank, it->second, iteration[r.function]++, 0.0, r.seconds, false);
          }
        }
      });
      ++report.runs;
      report.samples += stored.samples;
    } catch (const std::exception& e) {
      report.skipped.push_back(session.string() + ": " + e.what());
    }
  }
  return report;
}

}  // namespace fanout
