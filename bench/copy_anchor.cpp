// The ceiling under ps-lite's shared-memory figures: how fast one core copies the run's values when it does nothing
// else. fanout-pslite's shared-memory link copies every value twice, into its ring on the sender's core and out of
// it on the receiver's (plugins/pslite/shm_link.cpp), as TCP copies it into and out of the socket; the two copies
// run at once on two cores, so each core copies every byte once and the pair moves at most what one core copies
// alone. This program does that one copy and nothing more: from `values` distinct source values into as many
// distinct destinations in turn (as a worker's keys and a server's store hold them: 40 of 1 MiB are 40 MiB that a
// core's cache does not hold), every page written before the clock starts. An estimate of that ceiling, not a strict
// bound: each side of the ring has one end of its copy in the cache (the ring), which can cost less a byte than a
// copy from memory to memory.
//   copy_anchor <value bytes> <copies> [values]   prints "Copy rate: X Gbit/s"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: copy_anchor <value bytes> <copies> [values]\n");
    return 2;
  }
  const size_t len = std::strtoull(argv[1], nullptr, 10);
  const long copies = std::atol(argv[2]), distinct = argc == 4 ? std::atol(argv[3]) : 1;
  if (len == 0 || copies < 1 || distinct < 1) return std::fprintf(stderr, "copy_anchor: bad arguments\n"), 2;
  std::vector<std::vector<char>> from(size_t(distinct), std::vector<char>(len, 'v')), into(size_t(distinct), std::vector<char>(len, 'w'));
  // One pass first, not counted: what the timed copies find in the caches is what a run's steady state finds.
  for (long i = 0; i < distinct; ++i) std::memcpy(into[size_t(i)].data(), from[size_t(i)].data(), len);
  // The empty asm statements tell the compiler that memory is read and written there: the copies can be neither
  // dropped nor moved out of the clock's reach.
  const auto t0 = std::chrono::steady_clock::now();
  asm volatile("" ::: "memory");
  for (long i = 0; i < copies; ++i) {
    char* to = into[size_t(i % distinct)].data();
    std::memcpy(to, from[size_t(i % distinct)].data(), len);
    asm volatile("" : : "r"(to) : "memory");
  }
  asm volatile("" ::: "memory");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Keeps the copies from being optimised away: a byte of every destination is read.
  long sum = 0;
  for (auto& v : into) sum += v[len / 2];
  std::printf("Copy rate: %.4f Gbit/s (%zu-byte values, %ld copies from %ld values into %ld; check %ld)\n",
              double(len) * double(copies) * 8 / s / 1e9, len, copies, distinct, distinct, sum);
  return 0;
}
