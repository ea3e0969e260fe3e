// The ps-lite scheduler's registration (plugins/pslite/scheduler.h) with a stranger first: any bytes, sent
// whole or framed as an AddNode message (the input's first byte decides), then closed. The job's token is
// never in the input, so the stranger must be refused; the real server and worker then register, get the node
// list and pass the final barrier. Asserts: run() returns, the nodes are exactly the real two, and exactly one
// connection was refused when the stranger sent anything.
#include <string>
#include <thread>

#include "fanout_sdk.hpp"
#include "plugins/pslite/scheduler.h"
#include "plugins/pslite/wire.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/socket_peer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 8192) return 0;
  static const std::string token = fanout_sdk::channel_token();
  pslite::Scheduler scheduler("127.0.0.1", 0, token);
  std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 1) {  // framed: a well-formed AddNode header around the bytes
    pslite::Header h{pslite::MsgType::AddNode};
    h.len = bytes.size();
    unsigned char raw[pslite::kHeaderBytes];
    pslite::encode(h, raw);
    bytes = std::string(reinterpret_cast<const char*>(raw), sizeof raw) + bytes;
  }
  fuzz::send_and_close(scheduler.port(), bytes);
  std::string error;
  std::thread run([&] {
    try {
      scheduler.run(1, 1, 20000);
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  auto node = [&](const char* role, int port) {
    pslite::SchedulerClient c("127.0.0.1", scheduler.port(), role, "127.0.0.1", port, 20000, token);
    FUZZ_CHECK(c.nodes().size() == 2 && c.me().host == "127.0.0.1" && c.me().port == port);
    c.barrier(true, 20000);
  };
  std::thread server([&] { node("server", 1); });
  node("worker", 2);
  server.join();
  run.join();
  FUZZ_CHECK(error.empty());
  FUZZ_CHECK(scheduler.refused() == 1);  // the stranger, whatever it sent (nothing, too)
  return 0;
}
