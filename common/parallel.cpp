#include "common/parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace fanout {

void parallel_for(size_t n, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&] {
    try {
      for (size_t i; (i = next++) < n;) fn(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next = n;
    }
  };
  const size_t helpers = std::min<size_t>(n, std::max(1u, std::thread::hardware_concurrency())) - (n > 0);
  std::vector<std::thread> threads;
  for (size_t k = 0; k < helpers; ++k) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace fanout
