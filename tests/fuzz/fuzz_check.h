// FUZZ_CHECK: a harness assertion that holds in every build type (libFuzzer records the abort as a crash).
#pragma once
#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                                      \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond);     \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)
