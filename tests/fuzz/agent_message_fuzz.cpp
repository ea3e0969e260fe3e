// The torchloader master's reading of its node agents' lines (plugins/torchloader/agent_message.h), any text.
// Asserts: parsing never throws (it threw std::invalid_argument from stoi before); what it accepts has every
// field in range, and printed back in the protocol's own form it parses to the same message.
#include <cmath>
#include <string>

#include "plugins/torchloader/agent_message.h"
#include "tests/fuzz/fuzz_check.h"

using torchloader::AgentMessage;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string line(reinterpret_cast<const char*>(data), size);
  const auto m = torchloader::parse_agent_message(line);
  if (!m) return 0;
  FUZZ_CHECK(m->app >= 0 && m->process >= 0 && m->iteration >= 0);
  FUZZ_CHECK(std::isfinite(m->samples_per_s) && m->samples_per_s >= 0);
  const std::string id = std::to_string(m->app) + " " + std::to_string(m->process);
  std::string again;
  switch (m->kind) {
    case AgentMessage::Kind::Listening:
      FUZZ_CHECK(m->port >= 1 && m->port <= 65535);
      again = "LISTENING " + id + " " + std::to_string(m->port);
      break;
    case AgentMessage::Kind::Heartbeat: again = "HB " + id + " " + std::to_string(m->iteration) + " 1 0 0"; break;
    case AgentMessage::Kind::Paused: again = "PAUSED " + id + " " + std::to_string(m->iteration); break;
    case AgentMessage::Kind::Finished: again = "FINISHED " + id + " " + std::to_string(m->iteration); break;
    case AgentMessage::Kind::Failed: again = "FAILED " + id + " " + m->why; break;
  }
  const auto back = torchloader::parse_agent_message(again);
  FUZZ_CHECK(back && back->kind == m->kind && back->app == m->app && back->process == m->process && back->iteration == m->iteration &&
             back->port == m->port && back->why == m->why);
  return 0;
}
