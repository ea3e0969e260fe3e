// A Google Benchmark program for the exec plugin's google-benchmark parser (tests/exec_test.cpp): one benchmark
// in microseconds with a byte rate, one in nanoseconds, as any user's benchmark binary built on libbenchmark.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

static void BM_copy(benchmark::State& state) {
  std::vector<char> a(size_t(state.range(0)), 'x'), b(a.size());
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), a.size());
    benchmark::DoNotOptimize(b.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * state.range(0));
}
BENCHMARK(BM_copy)->Arg(4096)->Unit(benchmark::kMicrosecond);

static void BM_add(benchmark::State& state) {
  int x = 0;
  for (auto _ : state) benchmark::DoNotOptimize(x += 1);
}
BENCHMARK(BM_add);

BENCHMARK_MAIN();
