// List-valued flags in the SmartSim-Scaling form: "--nodes=[4,8,16]", "--languages=['cpp','fortran']",
// or a scalar "--nodes=4". The result is always the list of element texts.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace fanout {

// Throws UserError naming `what` (a flag or file location) when the text is malformed:
// unbalanced brackets, an empty element, nested lists or unbalanced quotes.
std::vector<std::string> parse_list_value(std::string_view text, std::string_view what);

// Renders values back as "[a,b]" (or "a" for one value), quoting elements that need it, so that
// parse_list_value(format_list_value(v)) == v. Throws UserError for a value no quoting can carry (the list
// syntax has no escapes); every value parse_list_value returns can be written.
std::string format_list_value(const std::vector<std::string>& values);

}  // namespace fanout
