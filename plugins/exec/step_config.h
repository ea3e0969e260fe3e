// What one exec step runs and reads: from the exec experiment's flags (--command, --parse, ...) or from an
// experiment file's [[steps]] table (its settings, which override the flags' values key by key).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "parsers.h"

namespace exec {

struct StepConfig {
  std::string command;             // the command line: words split as a shell would, nothing expanded
  std::vector<std::string> words;  // or the words themselves (a TOML array): no splitting
  bool shell = false;              // run `command` with /bin/sh -c (placeholders as "${FANOUT_P_name}": shell_script)
  std::vector<std::pair<std::string, std::string>> env;  // NAME, value template
  std::string cwd;                 // "" = the step's folder; relative: to the folder fanout was started in
  std::vector<std::string> after;  // steps that must be ready before this one starts
  std::string ready;               // "" | port:N | file:PATH | line:REGEX (this step's readiness)
  int64_t ready_timeout_s = 300;
  bool service = false;            // runs until the other steps end, then is stopped
  int64_t warmup = 0;              // invocations before the measured ones, their samples labelled warmup
  int64_t repeat = 1;              // measured invocations
  std::vector<ParseSpec> parsers;  // "time" when none is given
  std::vector<std::pair<std::string, std::string>> publish;  // NAME, value template: environment for later steps
};

// The flags' form: param(name) gives each declared parameter's text. Throws std::runtime_error naming the flag.
StepConfig config_from_params(const std::function<std::string(const char*)>& param);
// The file's settings (a JSON object) over `base`. Throws std::runtime_error naming the step key.
StepConfig config_from_settings(StepConfig base, const std::string& json);
// Both over each other, as a rank and the plan see the step: a service's flags' default parser (time) is not its.
StepConfig config_for_step(const std::function<std::string(const char*)>& param, const std::string& settings_json);
// The texts the rank fills placeholders into (command words, env values, cwd, file globs, publish, ready), each
// with the setting it came from.
std::vector<std::pair<std::string, std::string>> filled_texts(const StepConfig& c);
// Which word of a command is the program: the first, or the one after launcher words and their options
// (`mpirun -np 2 ./pingpong`, `env A=1 taskset -c 0 ./bench`, `srun -n 4 ./x`, `numactl -N 0 ./x`). words.size()
// when nothing is left after them.
size_t program_word(const std::vector<std::string>& words);
// What waitpid's status says, one account: "exited with status 3", "was killed by SIGSEGV (signal 11)", and for a
// shell's or launcher's 128 + N "exited with status 132 (128 + SIGILL: a process it started died of SIGILL)".
std::string describe_exit(int wait_status);
// Where a program word leads on this machine: its path, or "" when it is no runnable file (`path`, a PATH value,
// searched for a bare name; a relative path taken in submit_dir, as the rank takes it).
std::string find_program(const std::string& word, const std::string& submit_dir, const std::string& path);

// A placeholder's value: a parameter, a step variable, or nullopt when the name is neither.
using ValueOf = std::function<std::optional<std::string>(const std::string&)>;
// The text with each {name} filled in; throws std::runtime_error naming the first unknown name.
std::string fill_text(const std::string& text, const ValueOf& value_of);
// "./x" or "bin/x" as the submit folder's ("<submit>/x"); a bare name (found on PATH) and an absolute path as they are.
std::string in_submit_dir(const std::string& word, const std::string& submit_dir);
// What a rank runs, the rank and the plan alike: the words with the placeholders filled, the first word and the
// program after launcher words made the submit folder's when relative; under shell = true the script and the
// FANOUT_P_<name> environment its values travel in. `given` holds the words as filled, before that.
struct CommandLine {
  std::vector<std::string> words, given;
  std::vector<std::pair<std::string, std::string>> env;
  size_t program = 0;  // which word is the program (words.size() when none follows the launcher words)
};
CommandLine command_line(const StepConfig& c, const ValueOf& value_of, const std::string& submit_dir);
// The folder the command starts in: the step's, the submit folder (cwd = "submit"), or cwd filled in (relative: to
// the submit folder).
std::string working_folder(const StepConfig& c, const ValueOf& value_of, const std::string& submit_dir, const std::string& step_dir);
// The PATH word k of the command line is looked up in: the step's env PATH, else fanout's; for the program after
// launcher words, an `env PATH=...` word before it first.
std::string search_path(const StepConfig& c, const CommandLine& line, size_t k, const ValueOf& value_of);
// `cwd = "submit"`: the step runs in the folder fanout was started in.
inline bool runs_in_submit_dir(const StepConfig& c) { return c.cwd == "submit"; }
// The steps a step's settings name in `after` ("" or settings without it: none); another plugin's step's too.
std::vector<std::string> after_in(const std::string& settings_json);
// `after` against the run's steps (name, settings), before anything runs: each name a step of the run, never the
// step itself, and no cycle through it (each would wait for the other until the wall time).
void check_after(const std::string& step, const std::vector<std::pair<std::string, std::string>>& run_steps);
// Checks what can be checked before anything runs (parsers compile, keys make sense).
void validate(const StepConfig& c);
// What depends on the step's rank count: in a step of several ranks sharing one folder, a file parser's glob must
// pick each rank's own files ({FANOUT_RANK} in it or in cwd), or every rank would count every rank's samples.
void validate_for_ranks(const StepConfig& c, int64_t ranks);

// Splits a command line into words as POSIX sh does for quotes and backslashes ('...', "...", \x), without
// expanding anything. Throws std::runtime_error on an unterminated quote.
std::vector<std::string> split_words(const std::string& line);
// shell = true: the command as /bin/sh gets it. Each {name} becomes "${FANOUT_P_name}" (a step variable
// "${FANOUT_RANK}"): the value travels in the environment, never in the script, so no position (a here-document,
// a comment, a value with a newline or $(...)) can make it code. `params` receives the parameters it references
// (their environment: FANOUT_P_<name>=value).
std::string shell_script(const std::string& command, std::vector<std::string>* params);
// The environment variable a parameter's value travels in under shell = true.
inline std::string shell_param_variable(const std::string& name) { return "FANOUT_P_" + name; }
// A word the shell reads back as itself.
std::string shell_quote(const std::string& word);

}  // namespace exec
