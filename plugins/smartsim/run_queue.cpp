#include "run_queue.h"

namespace redisai {

RunQueue::RunQueue(int threads, Runner runner) : runner_(std::move(runner)) {
  for (int i = 0; i < std::max(1, threads); ++i) workers_.emplace_back([this] { work(); });
}

RunQueue::~RunQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void RunQueue::push(QueuedJob* job) {
  job->enqueued = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(job);
  }
  cv_.notify_all();
}

std::vector<QueuedJob*> RunQueue::take(std::chrono::steady_clock::time_point& wake, const void*& forming) {
  using clock = std::chrono::steady_clock;
  wake = clock::time_point::max();
  forming = nullptr;
  for (auto it = jobs_.begin(); it != jobs_.end(); ++it) {
    QueuedJob* first = *it;
    const bool batched = first->group && first->batch_max > 0;
    if (!batched) {
      jobs_.erase(it);
      return {first};
    }
    if (forming_.count(first->group)) continue;  // another worker is gathering this group
    // Gather the group in arrival order while it fits.
    long long samples = 0;
    std::vector<std::deque<QueuedJob*>::iterator> picked;
    for (auto j = it; j != jobs_.end(); ++j)
      if ((*j)->group == first->group && (picked.empty() || samples + (*j)->samples <= first->batch_max)) {
        picked.push_back(j);
        samples += (*j)->samples;
      }
    const bool timed_out = first->batch_timeout_ms > 0 &&
                           clock::now() >= first->enqueued + std::chrono::milliseconds(first->batch_timeout_ms);
    if (samples >= first->batch_min || timed_out || stop_) {
      std::vector<QueuedJob*> group;
      for (auto j : picked) group.push_back(*j);
      for (auto j = picked.rbegin(); j != picked.rend(); ++j) jobs_.erase(*j);
      return group;
    }
    // Too few samples yet: this worker waits for the group (others skip it), until more arrive or the timeout.
    forming_.insert(first->group);
    forming = first->group;
    if (first->batch_timeout_ms > 0) wake = first->enqueued + std::chrono::milliseconds(first->batch_timeout_ms);
    return {};
  }
  return {};
}

void RunQueue::work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    std::chrono::steady_clock::time_point wake;
    const void* forming = nullptr;
    std::vector<QueuedJob*> group = take(wake, forming);
    if (group.empty()) {
      if (stop_ && jobs_.empty()) return;
      if (wake != std::chrono::steady_clock::time_point::max()) cv_.wait_until(lock, wake);
      else cv_.wait(lock);
      // The group this worker was forming is examined afresh on the next take().
      if (forming) forming_.erase(forming);
      continue;
    }
    lock.unlock();
    runner_(group);
    lock.lock();
  }
}

}  // namespace redisai
