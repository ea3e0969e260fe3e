#include "run_queue.h"

#include <algorithm>

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

bool RunQueue::remove(QueuedJob* job) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find(jobs_.begin(), jobs_.end(), job);
  if (it == jobs_.end()) return false;
  jobs_.erase(it);
  return true;
}

std::vector<QueuedJob*> RunQueue::take(std::chrono::steady_clock::time_point& wake) {
  using clock = std::chrono::steady_clock;
  wake = clock::time_point::max();
  std::set<std::pair<const void*, std::string>> seen;  // batches already examined (their first job decides)
  for (auto it = jobs_.begin(); it != jobs_.end(); ++it) {
    QueuedJob* first = *it;
    if (!first->group || first->batch_max <= 0) {
      jobs_.erase(it);
      return {first};
    }
    if (!seen.insert({first->group, first->shape}).second) continue;
    // Gather the group in arrival order while it fits.
    long long samples = 0;
    std::vector<std::deque<QueuedJob*>::iterator> picked;
    for (auto j = it; j != jobs_.end(); ++j)
      if ((*j)->group == first->group && (*j)->shape == first->shape &&
          (picked.empty() || samples + (*j)->samples <= first->batch_max)) {
        picked.push_back(j);
        samples += (*j)->samples;
      }
    const auto deadline = first->batch_timeout_ms > 0 ? first->enqueued + std::chrono::milliseconds(first->batch_timeout_ms)
                                                      : clock::time_point::max();
    if (samples >= first->batch_min || clock::now() >= deadline || stop_) {
      std::vector<QueuedJob*> group;
      for (auto j : picked) group.push_back(*j);
      // One pass: erasing from a deque invalidates the other saved iterators.
      jobs_.erase(std::remove_if(jobs_.begin(), jobs_.end(),
                                 [&](QueuedJob* q) { return std::find(group.begin(), group.end(), q) != group.end(); }),
                  jobs_.end());
      return group;
    }
    // Too few samples yet: look further (other groups are not held back), and wake up by this group's timeout.
    wake = std::min(wake, deadline);
  }
  return {};
}

void RunQueue::work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    std::chrono::steady_clock::time_point wake;
    std::vector<QueuedJob*> group = take(wake);
    if (group.empty()) {
      if (stop_ && jobs_.empty()) return;
      // A push, the stop, or the earliest batch timeout wakes the worker to look again.
      if (wake != std::chrono::steady_clock::time_point::max()) cv_.wait_until(lock, wake);
      else cv_.wait(lock);
      continue;
    }
    lock.unlock();
    runner_(group);
    lock.lock();
  }
}

}  // namespace redisai
