// How late a sleep wakes on this machine now: timer slack, and the scheduling delay another test's load adds.
// Tests of timer-driven code (emulated devices and loaders) derive their tolerance from it instead of assuming
// a quiet machine.
#pragma once
#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

namespace fanout::test {

// The p90 of `samples` sleeps of period_s: how late they woke, seconds.
inline double sleep_overshoot_s(double period_s, int samples = 15) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> late;
  for (int i = 0; i < samples; ++i) {
    const auto due = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(period_s));
    std::this_thread::sleep_until(due);
    late.push_back(std::chrono::duration<double>(Clock::now() - due).count());
  }
  std::sort(late.begin(), late.end());
  return late[size_t(double(late.size() - 1) * 0.9)];
}

}  // namespace fanout::test
