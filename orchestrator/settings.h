// The driver's own settings, listed once: the command line (--<name>), experiment files ([experiment] <key>),
// --help, and the names a plugin may not give a parameter are all made from this table, so that the three
// can no longer drift apart (max_parallel's bounds, batch_args and resume in files).
#pragma once
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "orchestrator/experiment.h"
#include "orchestrator/toml_place.h"

namespace fanout {

struct DriverSetting {
  enum class Kind { Text, Int, Bool, Walltime, List, Number };  // Number: an integer, a float or a word (--repeat's auto)
  std::string name;      // the flag, without dashes
  std::string file_key;  // the key in an experiment file's [experiment] table
  Kind kind;
  std::string help;
  std::string default_text;  // what --help shows ("" when none)
  // Parses and checks text (bounds, choices: once, here) and stores it in the request; a List gets one more
  // element per call. `origin` ("--max_parallel", "exp.toml:3:1: experiment.max_parallel") leads every error.
  std::function<void(ExperimentRequest&, const std::string& text, const std::string& origin)> apply;
  std::string alias = "";  // another flag and file key for it (SmartSim-Scaling's name), or ""
};

const std::vector<DriverSetting>& driver_settings();
// The texts a TOML value gives a setting (one per item for a list), its type checked; `origin` leads the errors.
std::vector<std::string> setting_texts(const DriverSetting& setting, const toml::node& v, const std::filesystem::path& file,
                                       const std::string& origin);
// The setting an experiment file's [experiment] key names, or nullptr.
const DriverSetting* setting_for_file_key(const std::string& key);

}  // namespace fanout
