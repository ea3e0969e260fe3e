// A bench's figures for bench/run-all: with FANOUT_FIGURES set, each figure is appended to that file as one
// line "metric 0 value unit t_unix_s" (results/figures.h's text form; run-all numbers the rounds and stores them
// with `fanout results record`); without it, nothing. The bench's printed table stays for people.
#pragma once
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace bench {

inline void figure(const std::string& metric, double value, const std::string& unit) {
  const char* path = std::getenv("FANOUT_FIGURES");
  if (!path || !*path) return;
  FILE* f = std::fopen(path, "a");
  if (!f) {
    std::perror(path);
    std::exit(1);  // asked for figures and cannot keep them: fail, do not measure in vain
  }
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::fprintf(f, "%s 0 %.17g %s %.6f\n", metric.c_str(), value, unit.c_str(), now);
  if (std::fclose(f) != 0) {
    std::perror(path);
    std::exit(1);
  }
}

// "1KiB", "4MiB": sizes in metric names.
inline std::string size_tag(size_t bytes) {
  return bytes >= (size_t(1) << 20) ? std::to_string(bytes >> 20) + "MiB" : std::to_string(bytes >> 10) + "KiB";
}

}  // namespace bench
