#include "language_client.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "fanout_clock.hpp"
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

// The program's report lines, read without blocking the rank: a stop request (SIGTERM to the rank, which
// interrupts reads) asks the program to end, and it is killed if it does not within 5 s.
class Lines {
 public:
  Lines(int fd, pid_t pid) : fd_(fd), pid_(pid) {}
  // The next line; false once the program has closed its output.
  bool next(fanout_sdk::Host& host, std::string& line) {
    for (;;) {
      if (auto nl = buf_.find('\n'); nl != std::string::npos) {
        line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return true;
      }
      if (eof_) {
        line = std::move(buf_);
        buf_.clear();
        return !line.empty();
      }
      if (host.should_stop() && stop_sent_ns_ == 0) {
        ::kill(pid_, SIGTERM);
        stop_sent_ns_ = fanout_sdk::monotonic_ns();
      }
      if (stop_sent_ns_ && fanout_sdk::monotonic_ns() - stop_sent_ns_ > 5000000000LL) ::kill(pid_, SIGKILL);
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) continue;  // a timeout, or a signal: look at the stop flag again
      char chunk[65536];
      const ssize_t n = ::read(fd_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) eof_ = true;
      else buf_.append(chunk, size_t(n));
    }
  }

 private:
  int fd_;
  pid_t pid_;
  std::string buf_;
  bool eof_ = false;
  int64_t stop_sent_ns_ = 0;
};

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
  std::string failure;
  try {
    Lines lines(child.out, child.pid);
    for (std::string line; lines.next(host, line);) handle(host, run, line, child.in);
  } catch (const std::exception& e) {
    failure = e.what();
    ::kill(child.pid, SIGKILL);
  }
  ::close(child.out);
  ::close(child.in);
  const int status = fanout_sdk::wait_exit(child.pid);
  if (!failure.empty()) throw std::runtime_error(program + ": " + failure);
  if (status != 0)
    throw std::runtime_error(program + " exited with status " + std::to_string(status) + " (its error is above in this log)");
}

}  // namespace smartsim
