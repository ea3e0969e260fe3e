// What a sweep's count parameter means for speedup and efficiency: strong (the same work spread over more
// nodes, ranks or threads) or weak (the work grows with them). Given as --scaling=strong:PARAM (process_scaling_results,
// and a sweep's own setting, stored with its runs as the provenance key "scaling"), or declared by a plugin
// (FANOUT_PARAM_STRONG_SCALING / FANOUT_PARAM_WEAK_SCALING).
#pragma once

#include <string>
#include <vector>

namespace fanout {

struct ScalingSpec {
  std::string mode;  // "strong" or "weak"
  std::string param;
  bool operator==(const ScalingSpec&) const = default;
};

// "strong:nodes"; throws UserError naming `origin` (e.g. --scaling).
ScalingSpec parse_scaling(const std::string& text, const std::string& origin = "--scaling");
// "strong:nodes,weak:size" (commas or blanks between entries; "" gives none): a parameter named twice is refused.
std::vector<ScalingSpec> parse_scaling_list(const std::string& text, const std::string& origin = "--scaling");
// The list's text as parse_scaling_list reads it back: "strong:nodes,weak:size".
std::string scaling_text(const std::vector<ScalingSpec>& specs);

}  // namespace fanout
