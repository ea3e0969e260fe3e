#include "agent_message.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "line_channel.h"

namespace torchloader {
namespace {

std::optional<double> amount(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (*end != '\0' || !std::isfinite(v) || v < 0) return std::nullopt;
  return v;
}

}  // namespace

std::optional<int64_t> whole_number(const std::string& s, int64_t lo, int64_t hi) {
  if (s.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return std::nullopt;
  return v;
}

std::optional<AgentMessage> parse_agent_message(const std::string& line) {
  const auto w = words(line);
  if (w.size() < 3) return std::nullopt;
  constexpr int64_t kIntMax = std::numeric_limits<int>::max(), kIterMax = std::numeric_limits<int64_t>::max();
  const auto app = whole_number(w[1], 0, kIntMax), process = whole_number(w[2], 0, kIntMax);
  if (!app || !process) return std::nullopt;
  AgentMessage m;
  m.app = int(*app), m.process = int(*process);
  if (w[0] == "LISTENING" && w.size() == 4) {
    const auto port = whole_number(w[3], 1, 65535);
    if (!port) return std::nullopt;
    m.kind = AgentMessage::Kind::Listening, m.port = int(*port);
  } else if (w[0] == "HB" && (w.size() == 7 || w.size() == 8)) {
    const auto iter = whole_number(w[3], 0, kIterMax);
    const auto rate = amount(w[4]);
    const auto workers = w.size() == 8 ? whole_number(w[7], 1, kIntMax) : std::optional<int64_t>(0);
    if (!iter || !rate || !amount(w[5]) || !amount(w[6]) || !workers) return std::nullopt;
    m.kind = AgentMessage::Kind::Heartbeat, m.iteration = *iter, m.samples_per_s = *rate, m.loader_workers = int(*workers);
  } else if ((w[0] == "PAUSED" && w.size() == 4) || (w[0] == "FINISHED" && (w.size() == 4 || (w.size() == 5 && amount(w[4]))))) {
    const auto iter = whole_number(w[3], 0, kIterMax);
    if (!iter) return std::nullopt;
    m.kind = w[0] == "PAUSED" ? AgentMessage::Kind::Paused : AgentMessage::Kind::Finished, m.iteration = *iter;
  } else if (w[0] == "FAILED") {
    m.kind = AgentMessage::Kind::Failed;
    for (size_t i = 3; i < w.size(); ++i) m.why += (i > 3 ? " " : "") + w[i];
  } else {
    return std::nullopt;
  }
  return m;
}

}  // namespace torchloader
