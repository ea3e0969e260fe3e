// The one way fanout reads a TOML document (experiment files, site profiles, run.toml, reference files, saved
// commands): the guards toml++ needs first (refuse_non_ascii_outside_strings: Debian 12's toml++ 3.3.0 reaches
// __builtin_unreachable on non-ASCII outside strings; refuse_deep_toml_keys: its recursion on dotted keys), then the
// parse, a syntax error a UserError naming file:line. A reader that parsed on its own once forgot the first guard.
#pragma once
#include <toml++/toml.h>

#include <string>
#include <string_view>

#include "common/error.h"
#include "common/text.h"

namespace fanout {

inline toml::table parse_toml_document(std::string_view text, const std::string& file) {
  refuse_non_ascii_outside_strings(text, file);
  refuse_deep_toml_keys(text, file);
  try {
    return toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    throw UserError(file + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
}

}  // namespace fanout
