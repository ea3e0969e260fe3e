// The SmartSim client's own RESP reader for AI.TENSORGET META BLOB (plugins/smartsim/tensor_wire.h), fed any
// bytes as the database's reply over a real socket (a socketpair under a hiredis context). Asserts: it returns
// "" with a tensor whose blob went where the destination said, or an error reply's text, or throws WireError;
// nothing else, and never a read past the destination (ASan).
#include <hiredis/hiredis.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "plugins/smartsim/tensor_wire.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65536) return 0;
  int sv[2];
  FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  FUZZ_CHECK(write(sv[1], data, size) == ssize_t(size));
  close(sv[1]);  // the reply ends here: a short one must fail, not wait
  redisContext* c = redisConnectFd(sv[0]);
  FUZZ_CHECK(c && !c->err);
  smartsim::TensorMeta meta;
  std::vector<char> blob;
  bool asked = false;
  try {
    const std::string error = smartsim::read_tensor_reply(c, meta, [&](const smartsim::TensorMeta& m) -> char* {
      asked = true;
      if (m.bytes > 65536) return nullptr;  // as a client that cannot take it: read and dropped
      blob.resize(m.bytes);
      return blob.data();
    });
    if (error.empty()) FUZZ_CHECK(asked && meta.bytes <= size);
    else FUZZ_CHECK(!asked);
  } catch (const smartsim::WireError&) {
  }
  redisFree(c);  // closes sv[0]
  return 0;
}
