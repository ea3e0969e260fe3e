#include "results/scaling_spec.h"

#include <algorithm>

#include "common/error.h"
#include "common/text.h"

namespace fanout {

ScalingSpec parse_scaling(const std::string& text, const std::string& origin) {
  const auto colon = text.find(':');
  ScalingSpec s;
  if (colon != std::string::npos) s.mode = text.substr(0, colon), s.param = text.substr(colon + 1);
  if ((s.mode != "strong" && s.mode != "weak") || s.param.empty())
    throw UserError(origin + " '" + printable(text) + "': expected strong:PARAM or weak:PARAM (e.g. strong:nodes)");
  return s;
}

std::vector<ScalingSpec> parse_scaling_list(const std::string& text, const std::string& origin) {
  std::vector<ScalingSpec> out;
  std::string word;
  auto take = [&] {
    if (word.empty()) return;
    ScalingSpec s = parse_scaling(word, origin);
    for (auto& o : out)
      if (o.param == s.param) throw UserError(origin + ": " + s.param + " is named twice (" + o.mode + " and " + s.mode + ")");
    out.push_back(std::move(s));
    word.clear();
  };
  for (char c : text) {
    if (c == ',' || c == ' ' || c == '\t' || c == '\n') take();
    else word += c;
  }
  take();
  return out;
}

std::string scaling_text(const std::vector<ScalingSpec>& specs) {
  std::string out;
  for (auto& s : specs) out += (out.empty() ? "" : ",") + s.mode + ":" + s.param;
  return out;
}

}  // namespace fanout
