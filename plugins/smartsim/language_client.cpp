#include "language_client.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "fanout_process.hpp"

namespace smartsim {

std::string language_client_program(const std::string& language) {
  return fanout_sdk::companion_program("fanout-tensor-client-" + language);
}

namespace {

std::vector<std::string> database_env(const ClientOptions& db) {
  std::string ssdb;
  for (auto& a : db.addresses) ssdb += (ssdb.empty() ? "" : ",") + a;
  return {"SSDB=" + ssdb, std::string("SR_DB_TYPE=") + (db.cluster ? "Clustered" : "Standalone"), "SR_DB_PASSWORD=" + db.password,
          "SR_CONN_TIMEOUT=" + std::to_string(db.connect_timeout_ms), "SR_CMD_TIMEOUT=" + std::to_string(db.command_timeout_ms)};
}

// One report line; false when the program has ended.
bool read_line(FILE* in, std::string& line) {
  line.clear();
  for (int c; (c = std::fgetc(in)) != EOF;) {
    if (c == '\n') return true;
    line.push_back(char(c));
  }
  return !line.empty();
}

void handle(fanout_sdk::Host& host, const LanguageClientRun& run, const std::string& line, int to_child) {
  std::istringstream words(line);
  std::string kind;
  words >> kind;
  if (kind == "S") {
    std::string metric, unit, value_text;
    long long iteration = 0, t0 = 0;
    words >> metric >> iteration >> t0 >> value_text >> unit;
    char* end = nullptr;
    const double value = std::strtod(value_text.c_str(), &end);
    if (!words || unit.empty() || end == value_text.c_str() || *end)
      throw std::runtime_error("malformed sample line '" + line + "'");
    if (!host.record(metric.c_str(), iteration, t0, value, unit.c_str(), iteration < 0))
      throw std::runtime_error("sample '" + metric + "' could not be recorded");
  } else if (kind == "W" || kind == "C") {
    long long k = -1;
    words >> k;
    if (!words || k < 0) throw std::runtime_error("malformed line '" + line + "'");
    if (kind == "C") {
      if (!run.consumed) throw std::runtime_error("a consumer's line from a client that is not one: '" + line + "'");
      run.consumed(k);
      return;
    }
    if (run.before_iteration) run.before_iteration(k);
    if (::write(to_child, "G\n", 2) != 2) throw std::runtime_error("the client stopped reading");
  } else {
    throw std::runtime_error("unexpected line '" + line + "'");
  }
}

}  // namespace

void run_language_client(fanout_sdk::Host& host, const LanguageClientRun& run) {
  const std::string program = language_client_program(run.language);
  std::vector<std::string> argv = {program};
  argv.insert(argv.end(), run.args.begin(), run.args.end());
  fanout_sdk::SpawnOptions options;
  options.capture_stdout = options.feed_stdin = true;
  if (run.database) options.extra_env = database_env(*run.database);
  fanout_sdk::Child child = fanout_sdk::spawn_program(argv, options);
  FILE* from_child = ::fdopen(child.out, "r");
  std::string failure;
  try {
    if (!from_child) throw std::runtime_error("cannot read its output");
    for (std::string line; read_line(from_child, line);) handle(host, run, line, child.in);
  } catch (const std::exception& e) {
    failure = e.what();
    ::kill(child.pid, SIGKILL);
  }
  if (from_child) std::fclose(from_child);
  else ::close(child.out);
  ::close(child.in);
  const int status = fanout_sdk::wait_exit(child.pid);
  if (!failure.empty()) throw std::runtime_error(program + ": " + failure);
  if (status != 0)
    throw std::runtime_error(program + " exited with status " + std::to_string(status) + " (its error is above in this log)");
}

}  // namespace smartsim
