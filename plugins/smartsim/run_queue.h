// A device's run queue (RedisAI's per-device queue): `threads` workers take jobs in arrival order, and gather
// jobs of the same batch group into one run: up to batch_max samples, waiting for batch_min samples at most
// batch_timeout_ms after the first job arrived (0: no limit). Knows nothing of Redis or torch: the runner
// given at construction executes a group and answers its jobs.
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace redisai {

struct QueuedJob {
  const void* group = nullptr;  // jobs with the same non-null group and shape may run as one batch
  std::string shape;            // the inputs' count, types and dimensions after the first (what batching concatenates)
  long long samples = 1;        // this job's share of a batch (its inputs' first dimension)
  long long batch_max = 0;      // 0: never batched
  long long batch_min = 0;
  long long batch_timeout_ms = 0;
  std::chrono::steady_clock::time_point enqueued{};
  virtual ~QueuedJob() = default;
};

class RunQueue {
 public:
  // runner(group): called on a worker thread with one or more jobs (several only when batched); it owns
  // answering them. The queue never deletes a job.
  using Runner = std::function<void(std::vector<QueuedJob*>&)>;
  RunQueue(int threads, Runner runner);
  ~RunQueue();  // stops the workers after the jobs already queued
  RunQueue(const RunQueue&) = delete;
  RunQueue& operator=(const RunQueue&) = delete;

  void push(QueuedJob* job);
  // Takes a job out before a worker has taken it: true when it was still queued (the caller answers it now).
  bool remove(QueuedJob* job);
  int threads() const { return int(workers_.size()); }

 private:
  void work();
  // With the lock held: the next group to run, or empty when the worker must wait (at most until `wake`).
  std::vector<QueuedJob*> take(std::chrono::steady_clock::time_point& wake);

  Runner runner_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<QueuedJob*> jobs_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace redisai
