// What a node agent tells the torchloader master about one training process, a line each (NodeAgent in
// torchloader.cpp writes them, relaying what fanout-torchloader-train prints):
//   LISTENING <app> <proc> <port>                                   process 0 of a multi-node application takes peers
//   HB <app> <proc> <iter> <samples/s> <iter_s> <loader_wait_s> [<loader_workers>]   a heartbeat
//   PAUSED <app> <proc> <iter>
//   FINISHED <app> <proc> <iter> [<seconds>]
//   FAILED <app> <proc> <why...>
// Every field is checked (whole integers in range, finite non-negative numbers): a line that does not parse is
// nullopt, which the master logs and drops; parsing never throws.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace torchloader {

struct AgentMessage {
  enum class Kind { Listening, Heartbeat, Paused, Finished, Failed };
  Kind kind = Kind::Failed;
  int app = 0, process = 0;
  int port = 0;               // Listening: 1-65535
  int64_t iteration = 0;      // Heartbeat, Paused, Finished
  double samples_per_s = 0;   // Heartbeat
  int loader_workers = 0;     // Heartbeat: the workers its loader runs (0: not said)
  std::string why;            // Failed
};

std::optional<AgentMessage> parse_agent_message(const std::string& line);

// One field of the protocol as a whole decimal integer within [lo, hi] (REGISTER's node and cores too), else nullopt.
std::optional<int64_t> whole_number(const std::string& field, int64_t lo, int64_t hi);

}  // namespace torchloader
