// The plugins' control ports, fed any bytes over a real loopback connection: the parameter_serving trainer's
// ControlServer and the torchloader master's LineServer. The first input byte decides whether the job's token
// comes first (odd) or not (even). Asserts: without the token nothing is delivered; with it, the trainer gets
// only a HELLO and then posts for that same worker, and the master only whole lines of what was sent.
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "fanout_sdk.hpp"
#include "plugins/parameter_serving/control_channel.h"
#include "plugins/torchloader/line_channel.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/socket_peer.h"


extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 4096) return 0;
  static const std::string token = fanout_sdk::channel_token();
  static parameter_serving::ControlServer trainer("127.0.0.1", token);
  static torchloader::LineServer master("127.0.0.1", token);
  const bool with_token = data[0] & 1;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);

  // The trainer: 32 token bytes, then 24-byte messages.
  int fd = fuzz::connect_to(trainer.port());
  fuzz::send_all(fd, (with_token ? token : std::string()) + body);
  shutdown(fd, SHUT_WR);
  std::vector<parameter_serving::ControlMessage> got;
  // First accepted, then read to its end and closed by the server (a refusal closes it sooner). A deadline, not
  // a count of polls: on a loaded machine 200 short polls ended before the server saw the end, and the
  // connection's leftovers then reached the next input's checks (the long run's only control_channels failure).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  bool accepted = false;
  while (std::chrono::steady_clock::now() < deadline) {
    trainer.poll_messages(2, got);
    accepted = accepted || trainer.open_connections() > 0;  // a poll accepts; reading starts with the next
    if (accepted && trainer.open_connections() == 0) break;
  }
  FUZZ_CHECK(trainer.open_connections() == 0);
  close(fd);
  if (!with_token) FUZZ_CHECK(got.empty());
  for (size_t i = 0; i < got.size(); ++i) {
    FUZZ_CHECK(i == 0 ? got[i].type == parameter_serving::kHello : got[i].type == parameter_serving::kPost);
    FUZZ_CHECK(got[i].worker == got[0].worker);
  }

  // The master: "AUTH <token>", then lines.
  fd = fuzz::connect_to(master.port());
  fuzz::send_all(fd, (with_token ? "AUTH " + token + "\n" : std::string()) + body);
  close(fd);
  std::vector<torchloader::Line> lines;
  const size_t refused_before = master.refused();
  bool ended = false;
  const auto master_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!ended && std::chrono::steady_clock::now() < master_deadline) {  // until refused, or a peer's CLOSED
    auto more = master.poll(2);
    lines.insert(lines.end(), more.begin(), more.end());
    ended = master.refused() != refused_before || (!lines.empty() && lines.back().closed);
  }
  FUZZ_CHECK(ended);  // never carried over to the next input
  if (!with_token) FUZZ_CHECK(lines.empty());
  for (size_t i = 0; i < lines.size(); ++i) {  // a body line "CLOSED" is a line like any other, never the end
    FUZZ_CHECK(lines[i].closed == (i + 1 == lines.size() && lines[i].text.empty()));
    FUZZ_CHECK(lines[i].closed || (lines[i].text.find('\n') == std::string::npos && body.find(lines[i].text) != std::string::npos));
  }
  return 0;
}
