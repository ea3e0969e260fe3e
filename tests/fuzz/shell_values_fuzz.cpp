// Asserts: under exec's shell = true a parameter's value never becomes code (issue 53). Each input is a value; it is
// filled into commands that place it where a shell would once have read it (a plain word, a here-document, a
// comment, an assignment) exactly as a rank does (exec::command_line: the script and its FANOUT_P_ environment),
// run by the real /bin/sh in an empty folder: afterwards the folder is still empty, and the command that prints the
// value prints it byte for byte. Input: the value (up to 4 KiB, without NUL: an environment value cannot hold one).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "common/subprocess.h"
#include "step_config.h"
#include "tests/fuzz/fuzz_check.h"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096 || std::memchr(data, 0, size)) return 0;
  const std::string value(reinterpret_cast<const char*>(data), size);
  static const fs::path dir = fs::temp_directory_path() / ("fanout-shell-fuzz-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const char* commands[] = {"printf '%s' {v}", "cat <<EOF\n{v}\nEOF", "echo {v} # {v}", "x={v}; printf '%s' \"$x\"", "test -n {v} || true"};
  for (const char* command : commands) {
    exec::StepConfig c;
    c.shell = true;
    c.command = command;
    const exec::CommandLine line = exec::command_line(c, [&](const std::string&) { return std::optional<std::string>(value); }, "");
    std::vector<std::pair<std::string, std::string>> env = line.env;
    auto r = fanout::run_process(line.words, dir, 10, env);
    std::error_code ec;
    FUZZ_CHECK(fs::is_empty(dir, ec));  // nothing the value asked for was done
    if (std::string(command).rfind("printf '%s' {v}", 0) == 0) FUZZ_CHECK(r.out == value);
    for (auto& e : fs::directory_iterator(dir, ec)) fs::remove_all(e.path(), ec);
  }
  return 0;
}
