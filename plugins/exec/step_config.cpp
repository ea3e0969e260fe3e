#include "step_config.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "fanout_placeholders.hpp"

namespace exec {

namespace {

int64_t positive_or_zero(const std::string& what, const std::string& text) {
  size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
  }
  if (used != text.size() || v < 0 || v > 1000000) throw std::runtime_error(what + ": '" + text + "' is not an integer from 0 to 1000000");
  return v;
}

// "NAME=value" lines (--env, repeatable).
std::vector<std::pair<std::string, std::string>> name_values(const std::string& what, const std::string& lines) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t at = 0;
  while (at < lines.size()) {
    size_t nl = lines.find('\n', at);
    if (nl == std::string::npos) nl = lines.size();
    std::string line = lines.substr(at, nl - at);
    at = nl + 1;
    if (line.empty()) continue;
    size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0) throw std::runtime_error(what + ": '" + line + "' is not NAME=value");
    out.emplace_back(line.substr(0, eq), line.substr(eq + 1));
  }
  return out;
}

bool env_name(const std::string& s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s)
    if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
  return true;
}

std::string text_of(const nlohmann::json& v, const std::string& key) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  throw std::runtime_error("step key " + key + " must be a string");
}

std::vector<std::pair<std::string, std::string>> table_of(const nlohmann::json& v, const std::string& key) {
  if (!v.is_object()) throw std::runtime_error("step key " + key + " must be a table of NAME = \"value\"");
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [k, val] : v.items()) out.emplace_back(k, text_of(val, key + "." + k));
  return out;
}

// A string or an array of strings (after = "db" or ["db", "sched"]).
std::vector<std::string> names_of(const nlohmann::json& v, const std::string& key) {
  std::vector<std::string> out;
  if (v.is_array())
    for (auto& a : v) out.push_back(text_of(a, key + "[]"));
  else
    out.push_back(text_of(v, key));
  return out;
}

ParseSpec parse_table(const nlohmann::json& t) {
  if (t.is_string()) return parse_spec_text(t.get<std::string>());
  if (!t.is_object()) throw std::runtime_error("step key parse: each entry is a table or \"kind:argument\"");
  ParseSpec s;
  for (auto& [k, v] : t.items()) {
    const std::string text = text_of(v, "parse." + k);
    if (k == "kind" || k == "format") s.kind = text;
    else if (k == "pattern" || k == "regex" || k == "columns" || k == "fields") s.pattern = text;
    else if (k == "metric") s.metric = text;
    else if (k == "unit") s.unit = text;
    else if (k == "from") s.from = text;
    else if (k == "better") s.better = text;
    else if (k == "label") s.label = text;
    else throw std::runtime_error("step key parse." + k + " is unknown (known: kind, pattern, columns, fields, metric, unit, from, better, label)");
  }
  if (s.kind.empty()) throw std::runtime_error("step key parse: an entry needs kind = \"regex\" (or csv, jsonl, google-benchmark, smartsim-timing, time)");
  parse_spec_text(s.kind);  // a known kind
  return s;
}

}  // namespace

std::vector<std::string> split_words(const std::string& line) {
  std::vector<std::string> words;
  std::string cur;
  bool in_word = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(cur), cur.clear(), in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\'') {
      size_t end = line.find('\'', i + 1);
      if (end == std::string::npos) throw std::runtime_error("unterminated ' in: " + line);
      cur += line.substr(i + 1, end - i - 1);
      i = end;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < line.size() && line[j] != '"'; ++j) {
        if (line[j] == '\\' && j + 1 < line.size() && std::string("\"\\$`\n").find(line[j + 1]) != std::string::npos) ++j;
        cur += line[j];
      }
      if (j >= line.size()) throw std::runtime_error("unterminated \" in: " + line);
      i = j;
    } else if (c == '\\' && i + 1 < line.size()) {
      cur += line[++i];
    } else {
      cur += c;
    }
  }
  if (in_word) words.push_back(cur);
  return words;
}

std::string shell_script(const std::string& command, std::vector<std::string>* params) {
  std::string out;
  fanout_sdk::scan_placeholders(
      command,
      [&](std::string_view name) {
        const std::string n(name);
        if (fanout_sdk::step_variable(n)) {
          out += "\"${" + n + "}\"";
          return;
        }
        out += "\"${" + shell_param_variable(n) + "}\"";
        if (params && std::find(params->begin(), params->end(), n) == params->end()) params->push_back(n);
      },
      [&](std::string_view text) { out += text; });
  return out;
}

std::string shell_quote(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

StepConfig config_from_params(const std::function<std::string(const char*)>& param) {
  StepConfig c;
  c.command = param("command");
  c.shell = param("shell") == "true" || param("shell") == "1" || param("shell") == "yes";
  c.env = name_values("--env", param("env"));
  c.cwd = param("cwd");
  c.warmup = positive_or_zero("--warmup", param("warmup"));
  c.repeat = positive_or_zero("--repeat_command", param("repeat_command"));
  std::string parses = param("parse");
  size_t at = 0;
  while (at <= parses.size() && !parses.empty()) {
    size_t nl = parses.find('\n', at);
    if (nl == std::string::npos) nl = parses.size();
    if (nl > at) {
      ParseSpec s = parse_spec_text(parses.substr(at, nl - at));
      s.metric = param("metric"), s.unit = param("unit"), s.from = param("from"), s.better = param("better"), s.label = param("label");
      c.parsers.push_back(s);
    }
    at = nl + 1;
  }
  return c;
}

std::string describe_exit(int st) {
  auto name = [](int sig) {
    const char* abbrev = sig > 0 && sig < 65 ? ::sigabbrev_np(sig) : nullptr;
    return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
  };
  if (WIFSIGNALED(st)) return "was killed by " + name(WTERMSIG(st)) + " (signal " + std::to_string(WTERMSIG(st)) + ")";
  const int code = WEXITSTATUS(st);
  std::string out = "exited with status " + std::to_string(code);
  if (code == 127) out += " (127: a program it was to start was not found)";
  else if (code == 126) out += " (126: a program it was to start is not executable)";
  else if (code > 128 && code < 128 + 65 && ::sigabbrev_np(code - 128))
    out += " (128 + " + name(code - 128) + ": a process it started died of " + name(code - 128) + ")";
  return out;
}

std::string find_program(const std::string& word, const std::string& submit_dir, const std::string& path) {
  auto runnable = [](const std::string& f) {
    struct stat st {};
    return ::stat(f.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(f.c_str(), X_OK) == 0;
  };
  if (word.empty()) return "";
  if (word.find('/') != std::string::npos) {
    const std::string file = in_submit_dir(word, submit_dir);
    return runnable(file) ? file : "";
  }
  for (size_t at = 0; at <= path.size();) {
    size_t colon = path.find(':', at);
    if (colon == std::string::npos) colon = path.size();
    const std::string dir = colon > at ? path.substr(at, colon - at) : ".";
    if (runnable(dir + "/" + word)) return dir + "/" + word;
    at = colon + 1;
  }
  return "";
}

std::string fill_text(const std::string& text, const ValueOf& value_of) {
  std::string unknown;
  auto out = fanout_sdk::fill_placeholders(text, value_of, &unknown);
  if (!out) throw std::runtime_error("{" + unknown + "} is no parameter of this run and no FANOUT_ variable of the step");
  return *out;
}

std::string in_submit_dir(const std::string& word, const std::string& submit_dir) {
  if (word.empty() || word[0] == '/' || word.find('/') == std::string::npos || submit_dir.empty()) return word;
  return submit_dir + "/" + (word.rfind("./", 0) == 0 ? word.substr(2) : word);
}

CommandLine command_line(const StepConfig& c, const ValueOf& value_of, const std::string& submit_dir) {
  CommandLine line;
  if (c.shell) {
    std::vector<std::string> used;
    line.words = {"/bin/sh", "-c", shell_script(c.command, &used)};
    for (auto& name : used) {
      auto v = value_of(name);
      if (!v) throw std::runtime_error("{" + name + "} is no parameter of this run and no FANOUT_ variable of the step");
      line.env.emplace_back(shell_param_variable(name), *v);
    }
    line.given = line.words;
    return line;
  }
  for (auto& w : c.words.empty() ? split_words(c.command) : c.words) line.words.push_back(fill_text(w, value_of));
  if (line.words.empty()) throw std::runtime_error("the command has no words");
  line.given = line.words;
  line.program = program_word(line.words);
  line.words[0] = in_submit_dir(line.words[0], submit_dir);
  if (line.program < line.words.size()) line.words[line.program] = in_submit_dir(line.words[line.program], submit_dir);
  return line;
}

std::string working_folder(const StepConfig& c, const ValueOf& value_of, const std::string& submit_dir, const std::string& step_dir) {
  if (runs_in_submit_dir(c) && !submit_dir.empty()) return submit_dir;
  if (c.cwd.empty()) return step_dir;
  const std::string d = fill_text(c.cwd, value_of);
  return d[0] == '/' || submit_dir.empty() ? d : submit_dir + "/" + d;
}

std::string search_path(const StepConfig& c, const CommandLine& line, size_t k, const ValueOf& value_of) {
  if (k > 0)
    for (size_t i = k; i-- > 0;)
      if (line.given[i].rfind("PATH=", 0) == 0) return line.given[i].substr(5);
  for (auto it = c.env.rbegin(); it != c.env.rend(); ++it)
    if (it->first == "PATH") return fill_text(it->second, value_of);
  const char* path = std::getenv("PATH");
  return path ? path : "";
}

StepConfig config_for_step(const std::function<std::string(const char*)>& param, const std::string& settings_json) {
  StepConfig c = config_from_settings(config_from_params(param), settings_json);
  if (c.service && settings_json.find("\"parse\"") == std::string::npos) c.parsers.clear();
  return c;
}

std::vector<std::pair<std::string, std::string>> filled_texts(const StepConfig& c) {
  std::vector<std::pair<std::string, std::string>> out;
  if (c.words.empty()) out.emplace_back("command", c.command);
  for (auto& w : c.words) out.emplace_back("command", w);
  for (auto& [name, v] : c.env) out.emplace_back("env " + name, v);
  if (!runs_in_submit_dir(c)) out.emplace_back("cwd", c.cwd);
  for (auto& [name, v] : c.publish) out.emplace_back("publish " + name, v);
  for (auto& p : c.parsers)
    if (p.from.rfind("file:", 0) == 0) out.emplace_back("from", p.from);
  if (c.ready.rfind("line:", 0) != 0) out.emplace_back("ready", c.ready);  // a line's regex keeps its braces
  return out;
}

namespace {
// A launcher word, the options of it that take a value as the next word, and how many words it takes before the
// program (taskset's mask, timeout's duration, chrt's priority).
struct LauncherWord {
  std::string_view name;
  std::vector<std::string_view> valued;
  int positional;
};
// Open MPI's, MPICH's (Hydra) and Intel MPI's options that take a value.
const std::vector<std::string_view> kMpiValued = {
    "-np",   "--np",     "-n",         "-c",      "-N",   "-npernode", "--npernode", "-H",       "--host",    "-host",
    "-hostfile", "--hostfile", "-machinefile", "--machinefile", "-x", "--map-by", "-map-by", "--bind-to", "-bind-to", "--rank-by",
    "-wdir", "--wdir",   "-wd",        "-ppn",    "-hosts", "-f",       "--mca",      "-mca",     "-genv",     "-env",
    "--prefix", "-launcher", "-rf",    "--rankfile"};
const LauncherWord kLaunchers[] = {
    {"mpirun", kMpiValued, 0},
    {"mpiexec", kMpiValued, 0},
    {"srun", {"-n", "-N", "-c", "-p", "-t", "-w", "-J", "-A", "-q", "-o", "-e", "-G", "-x", "-m", "-D", "-C", "-d", "--ntasks", "--nodes",
              "--ntasks-per-node", "--cpus-per-task", "--partition", "--time", "--nodelist", "--job-name", "--account", "--mpi",
              "--chdir", "--constraint", "--gpus", "--mem", "--distribution", "--cpu-bind", "--export"}, 0},
    {"env", {"-u", "-C", "--unset", "--chdir"}, 0},
    {"taskset", {}, 1},
    {"numactl", {"-N", "-m", "-C", "-p", "-i", "--cpunodebind", "--membind", "--physcpubind", "--preferred", "--interleave"}, 0},
    {"nice", {"-n"}, 0},
    {"timeout", {"-s", "-k", "--signal", "--kill-after"}, 1},
    {"stdbuf", {"-i", "-o", "-e", "--input", "--output", "--error"}, 0},
    {"time", {"-f", "-o", "--format", "--output"}, 0},
    {"chrt", {}, 1},
    {"nohup", {}, 0},
    {"perf", {"-e", "-o", "-r", "-C", "-p", "-t", "-G", "-x", "-I", "-F", "-c", "--event", "--output", "--repeat", "--call-graph", "--freq"}, 0},
};
// mpirun's options that take two words (--mca NAME VALUE).
bool two_valued(std::string_view launcher, std::string_view opt) {
  return (launcher == "mpirun" || launcher == "mpiexec") && (opt == "--mca" || opt == "-mca" || opt == "-genv" || opt == "-env");
}
}  // namespace

size_t program_word(const std::vector<std::string>& words) {
  size_t i = 0;
  while (i < words.size()) {
    const std::string base = words[i].substr(words[i].rfind('/') == std::string::npos ? 0 : words[i].rfind('/') + 1);
    const LauncherWord* l = nullptr;
    for (auto& k : kLaunchers)
      if (k.name == base) l = &k;
    if (!l) return i;
    ++i;
    if (l->name == "perf") {  // perf stat|record [options] program
      if (i < words.size() && words[i][0] != '-') ++i;
    }
    int positional = l->positional;
    while (i < words.size()) {
      const std::string& w = words[i];
      if (w == "--") {
        ++i;
        break;
      }
      if (l->name == "env" && w.find('=') != std::string::npos && w[0] != '-') {
        ++i;
        continue;
      }
      if (!w.empty() && w[0] == '-' && w.size() > 1) {
        const std::string opt = w.substr(0, w.find('='));
        const bool inline_value = w.find('=') != std::string::npos;
        ++i;
        if (!inline_value && std::find(l->valued.begin(), l->valued.end(), opt) != l->valued.end()) i += two_valued(l->name, opt) ? 2 : 1;
        continue;
      }
      if (positional > 0) {
        --positional, ++i;
        continue;
      }
      break;
    }
  }
  return words.size();
}

StepConfig config_from_settings(StepConfig c, const std::string& json) {
  if (json.empty()) return c;
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (!j.is_object()) throw std::runtime_error("the step's settings are not a JSON object");
  for (auto& [k, v] : j.items()) {
    if (k == "command") {
      if (v.is_array()) {
        c.command.clear(), c.words.clear();
        for (auto& w : v) c.words.push_back(text_of(w, "command[]"));
      } else {
        c.command = text_of(v, k), c.words.clear();
      }
    } else if (k == "shell" || k == "service") {
      if (!v.is_boolean()) throw std::runtime_error("step key " + k + " must be true or false");
      (k == "shell" ? c.shell : c.service) = v.get<bool>();
    } else if (k == "env") {
      c.env = table_of(v, k);
    } else if (k == "publish") {
      c.publish = table_of(v, k);
    } else if (k == "cwd") {
      c.cwd = text_of(v, k);
    } else if (k == "ready") {
      c.ready = text_of(v, k);
    } else if (k == "ready_timeout") {
      c.ready_timeout_s = positive_or_zero("step key ready_timeout", text_of(v, k));
    } else if (k == "after") {
      c.after = names_of(v, k);
    } else if (k == "warmup" || k == "repeat_command") {
      (k == "warmup" ? c.warmup : c.repeat) = positive_or_zero("step key " + k, text_of(v, k));
    } else if (k == "parse") {
      c.parsers.clear();
      if (v.is_array())
        for (auto& t : v) c.parsers.push_back(parse_table(t));
      else
        c.parsers.push_back(parse_table(v));
    } else {
      throw std::runtime_error("step key " + k + " is not an exec setting");
    }
  }
  return c;
}

namespace {

// With shell = true each {name} becomes "${FANOUT_P_name}". Two positions are refused, the first one found
// returned with why ("" when none): inside the command's own quotes (quoted twice, or literal within '...'), and
// inside $(( )), (( )), [[ ]] or ${ }, where bash evaluates a variable's value again as an expression, so that
// "a[$(cmd)]" would run cmd.
std::pair<std::string, std::string> unsafe_placeholder(const std::string& command) {
  char quote = 0;
  int evaluated = 0;  // depth of $(( (( [[ ${ around here
  for (size_t i = 0; i < command.size(); ++i) {
    const char c = command[i];
    const char next = i + 1 < command.size() ? command[i + 1] : 0;
    if (quote == '\'') {
      if (c == '\'') quote = 0;
      continue;
    }
    if (c == '\\') {
      ++i;
      continue;
    }
    if (quote == '"' && c == '"') quote = 0;
    else if (!quote && (c == '\'' || c == '"')) quote = c;
    else if ((c == '(' && next == '(') || (c == '[' && next == '[')) ++evaluated, ++i;
    else if (((c == ')' && next == ')') || (c == ']' && next == ']')) && evaluated > 0) --evaluated, ++i;
    else if (c == '$' && next == '{') ++evaluated, ++i;
    else if (c == '}' && evaluated > 0 && next != '}') --evaluated;
    else if (c == '{' && next == '{') ++i;
    else if (c == '{') {
      if (size_t n = fanout_sdk::placeholder_detail::placeholder_at(command, i)) {
        if (quote) return {command.substr(i, n), "quotes"};
        if (evaluated) return {command.substr(i, n), "evaluated"};
        i += n - 1;
      }
    }
  }
  return {"", ""};
}

}  // namespace

void validate(const StepConfig& c) {
  if (c.shell) {
    auto [q, why] = unsafe_placeholder(c.command);
    if (why == "quotes")
      throw std::runtime_error("shell = true: " + q + " sits inside quotes in the command; fanout puts every value in quotes itself (as \"${FANOUT_P_" +
                               q.substr(1, q.size() - 2) + "}\", the value in the environment): write " + q + " unquoted");
    if (why == "evaluated")
      throw std::runtime_error("shell = true: " + q + " sits inside $(( )), (( )), [[ ]] or ${ } in the command, where bash evaluates a value again "
                               "as an expression (a value such as a[$(cmd)] would run cmd): use " + q + " outside them");
  }
  if (c.command.empty() && c.words.empty()) throw std::runtime_error("no command: give --command='...' (or command = \"...\" in the step)");
  if (!c.shell && c.words.empty() && split_words(c.command).empty()) throw std::runtime_error("the command has no words");
  if (c.repeat < 1 && !c.service) throw std::runtime_error("repeat_command must be at least 1");
  for (auto& [name, v] : c.env)
    if (!env_name(name)) throw std::runtime_error("env: '" + name + "' is not a variable name");
  for (auto& [name, v] : c.publish)
    if (!env_name(name)) throw std::runtime_error("publish: '" + name + "' is not a variable name");
  if (!c.ready.empty() && c.ready.rfind("port:", 0) != 0 && c.ready.rfind("file:", 0) != 0 && c.ready.rfind("line:", 0) != 0)
    throw std::runtime_error("ready = '" + c.ready + "': expected port:<port>, file:<path> or line:<regex>");
  for (auto& p : c.parsers) make_parser(p);  // compiles (throws ParseError with its reason)
  if (c.service && !c.parsers.empty()) throw std::runtime_error("a service step measures nothing: give it no parse");
}

std::vector<std::string> after_in(const std::string& settings_json) {
  if (settings_json.empty()) return {};
  const nlohmann::json j = nlohmann::json::parse(settings_json, nullptr, false);
  if (!j.is_object() || !j.contains("after")) return {};
  return names_of(j["after"], "after");
}

void check_after(const std::string& step, const std::vector<std::pair<std::string, std::string>>& run_steps) {
  if (run_steps.empty()) return;  // a host before ABI 4.7's run_steps: the rank finds out
  std::map<std::string, std::vector<std::string>> after;
  std::string names;
  for (auto& [name, settings] : run_steps) after[name] = after_in(settings), names += (names.empty() ? "" : ", ") + name;
  for (auto& a : after[step]) {
    if (a == step) throw std::runtime_error("step '" + step + "': after = '" + a + "' names this step itself");
    if (!after.count(a)) throw std::runtime_error("step '" + step + "': after = '" + a + "': no step of that name in this run (steps: " + names + ")");
  }
  // A cycle through this step: a path of `after` edges that comes back to it.
  std::vector<std::string> path = {step};
  std::set<std::string> seen;
  std::function<bool(const std::string&)> back = [&](const std::string& from) {
    for (auto& next : after[from]) {
      if (next == step) return path.push_back(next), true;
      if (!seen.insert(next).second) continue;
      path.push_back(next);
      if (back(next)) return true;
      path.pop_back();
    }
    return false;
  };
  if (back(step)) {
    std::string cycle;
    for (auto& p : path) cycle += (cycle.empty() ? "" : " -> ") + p;
    throw std::runtime_error("step '" + step + "': after makes a cycle (" + cycle + "): each would wait for the other until the wall time");
  }
}

void validate_for_ranks(const StepConfig& c, int64_t ranks) {
  const std::string mine = "{FANOUT_RANK}";
  // "r{FANOUT_RANK}*.csv": rank 1's glob also takes ranks 10 to 19's files.
  for (auto& p : c.parsers)
    if (size_t at = p.from.find(mine); p.from.rfind("file:", 0) == 0 && at != std::string::npos && at + mine.size() < p.from.size() &&
                                       std::string("*?[0123456789").find(p.from[at + mine.size()]) != std::string::npos && ranks > 1)
      throw std::runtime_error("'" + p.text() + "' reads from '" + p.from + "': a wildcard or digit right after " + mine +
                               " makes rank 1 read ranks 10 to 19's files too; put a separator after it (rank_" + mine + "_*.csv)");
  if (ranks < 2 || c.cwd.find(mine) != std::string::npos) return;
  for (auto& p : c.parsers)
    if (p.from.rfind("file:", 0) == 0 && p.from.find(mine) == std::string::npos)
      throw std::runtime_error("'" + p.text() + "' reads from '" + p.from + "', which every one of the step's " + std::to_string(ranks) +
                               " ranks would read whole, each counting the others' samples as its own: name each rank's files with " + mine +
                               " (e.g. from = \"file:rank_" + mine + "_timing.csv\"), or give the step a folder per rank (cwd = \"out_" + mine + "\")");
}

}  // namespace exec
