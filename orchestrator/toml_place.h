// Where a TOML node is, for errors that name the file and line: one form for experiment files and site profiles.
#pragma once
#include <toml++/toml.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/toml_document.h"
#include "common/text.h"

namespace fanout {

// "file:line" of a node.
inline std::string toml_at(const std::filesystem::path& file, const toml::node& n) {
  return file.string() + ":" + std::to_string(n.source().begin.line);
}

// The document in `text`; a syntax error is a UserError naming file:line.
inline toml::table parse_toml(std::string_view text, const std::filesystem::path& file) { return parse_toml_document(text, file.string()); }

// A TOML value (scalar or array of scalars) as texts.
inline std::vector<std::string> toml_values(const toml::node& n, const std::string& origin) {
  auto scalar = [&](const toml::node& v) -> std::string {
    if (auto s = v.value_exact<std::string>()) return *s;
    if (auto i = v.value_exact<int64_t>()) return std::to_string(*i);
    if (auto b = v.value_exact<bool>()) return *b ? "true" : "false";
    if (auto d = v.value_exact<double>()) {
      char buf[40];
      std::snprintf(buf, sizeof buf, "%.15g", *d);
      return std::string(buf);
    }
    throw UserError(origin + ": values must be strings, numbers or booleans");
  };
  if (auto* arr = n.as_array()) {
    if (arr->empty()) throw UserError(origin + ": empty list");
    std::vector<std::string> out;
    for (auto& v : *arr) {
      if (v.is_array() || v.is_table()) throw UserError(origin + ": nested lists are not allowed");
      out.push_back(scalar(v));
    }
    return out;
  }
  if (n.is_table()) throw UserError(origin + ": a table is not a parameter value");
  return {scalar(n)};
}

}  // namespace fanout
