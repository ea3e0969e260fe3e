// Asserts: pslite::decode accepts only whole headers, and a header it accepts encodes back to the same 40 bytes.
#include <cstring>

#include "plugins/pslite/wire.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pslite::Header h;
  if (!pslite::decode(data, size, h).empty()) return 0;
  FUZZ_CHECK(size >= pslite::kHeaderBytes && h.len <= pslite::kMaxPayload);
  unsigned char out[pslite::kHeaderBytes];
  pslite::encode(h, out);
  FUZZ_CHECK(std::memcmp(out, data, pslite::kHeaderBytes) == 0);
  return 0;
}
