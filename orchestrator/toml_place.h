// Where a TOML node is, for errors that name the file and line: one form for experiment files and site profiles.
#pragma once
#include <toml++/toml.h>

#include <filesystem>
#include <string>
#include <string_view>

#include "common/error.h"

namespace fanout {

// "file:line" of a node.
inline std::string toml_at(const std::filesystem::path& file, const toml::node& n) {
  return file.string() + ":" + std::to_string(n.source().begin.line);
}

// The document in `text`; a syntax error is a UserError naming file:line.
inline toml::table parse_toml(std::string_view text, const std::filesystem::path& file) {
  try {
    return toml::parse(text, file.string());
  } catch (const toml::parse_error& e) {
    throw UserError(file.string() + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
}

}  // namespace fanout
