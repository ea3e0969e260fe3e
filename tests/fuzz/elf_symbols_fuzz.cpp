// Asserts: the ELF reader the plugin loader runs before dlopen (host/elf_symbols.h) takes any bytes as a file and
// answers, within the file's bounds (ASan checks every read), never crashing; a file that is no ELF is "not an
// ELF file". Input: the file's bytes.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "host/elf_symbols.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string file = fuzz_input_file("elf", ".so", data, size);
  if (file.empty()) return 0;
  const std::string why = fanout::elf_exports_function(file, "fanout_plugin_entry");
  if (size < 4 || std::memcmp(data, "\x7f" "ELF", 4) != 0) FUZZ_CHECK(why == "it is not an ELF file");
  return 0;
}
