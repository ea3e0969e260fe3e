// FUZZ_CHECK: a harness assertion that holds in every build type (libFuzzer records the abort as a crash).
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#define FUZZ_CHECK(cond)                                                                      \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond);     \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

// The input as a file of this process's own (for readers that take a path): its name, or "" when it could not be
// written. `suffix` is the file's extension (".toml", ".so").
inline std::string fuzz_input_file(const char* target, const char* suffix, const uint8_t* data, size_t size) {
  static thread_local std::string file;
  file = std::string("/tmp/fanout-") + target + "-fuzz-" + std::to_string(::getpid()) + suffix;
  FILE* f = std::fopen(file.c_str(), "wb");
  if (!f) return "";
  const bool ok = std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok ? file : "";
}
