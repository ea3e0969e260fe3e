#include "node.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "fanout_sdk.hpp"

namespace pslite {

void run_scheduler(const Where& w, const std::function<void(int)>& on_listening) {
  Scheduler scheduler(w.scheduler_host, w.scheduler_port, w.token);
  on_listening(scheduler.port());
  scheduler.run(w.num_servers, w.num_workers, w.timeout_ms);
}

void run_server(const Where& w, Transport transport, const Recorder& rec) {
  KVServer server(w.my_host, 0, transport, w.spin_us, w.token);
  SchedulerClient sc(w.scheduler_host, w.scheduler_port, "server", w.my_host, server.port(), w.timeout_ms, w.token);
  server.start(sc.me().id);
  rec.log("server " + std::to_string(sc.me().rank) + " data port " + w.my_host + ":" + std::to_string(server.port()));
  sc.barrier(false, w.timeout_ms);  // every worker has connected
  const int64_t t0 = rec.now_ns();
  for (auto& d : server.link_descriptions()) rec.log("server " + std::to_string(sc.me().rank) + " <- worker over " + d);
  sc.barrier(true, 7 * 24 * 3600 * 1000);  // the workers are done (or one died: the scheduler says so)
  rec.record("messages_served", 0, t0, double(server.messages()), "messages", false);
  // Connections to the data port that were not this job's workers (or pushed more than they declared), counted
  // once the accept loop has stopped: its handshakes' refusals (silent, malformed, departed, still pending) are
  // added to the count when it ends (recorded before, 1 of ~305 refused connections was counted).
  server.stop();
  rec.record("connections_refused", 0, t0, double(server.refused()), "count", false);
}

namespace {

// One worker thread's keys: keys_per_server on every server, disjoint from other threads and workers.
std::vector<uint64_t> keys_of(int worker_rank, int thread, const BenchConfig& cfg, int servers) {
  std::vector<uint64_t> keys;
  const uint64_t slot = uint64_t(worker_rank) * uint64_t(cfg.threads) + uint64_t(thread);
  for (int s = 0; s < servers; ++s)
    for (int k = 0; k < cfg.keys_per_server; ++k) keys.push_back(range_begin(s, servers) + slot * uint64_t(cfg.keys_per_server) + uint64_t(k));
  return keys;
}

struct ThreadResult {
  uint64_t bytes = 0;
  int64_t first_ns = 0, last_ns = 0;  // the measured phase
  uint64_t mismatches = 0;
};

// The values pushed in an iteration: a pattern per key, with the iteration stamped in front so that a pull
// returning an older value is caught by the checksum.
void fill(ValueBuffer& v, uint64_t key, int64_t iteration) {
  uint64_t x = key * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i + 8 <= v.size(); i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::memcpy(&v[i], &x, 8);
  }
  std::memcpy(v.data(), &iteration, std::min<size_t>(8, v.size()));
}

// Every thread connects, then all wait for the job-wide barrier (every worker connected to every server).
struct StartGate {
  std::mutex mu;
  std::condition_variable cv;
  int connected = 0, failed = 0;
  bool open = false, proceed = false;
  void arrive(bool ok) {
    std::lock_guard<std::mutex> lock(mu);
    ok ? ++connected : ++failed;
    cv.notify_all();
  }
  bool wait_open() {  // false: the run is off (another thread or the barrier failed)
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return open; });
    return proceed;
  }
};

ThreadResult run_thread(const SchedulerClient& sc, const BenchConfig& cfg, int spin_us, const std::string& token, const Recorder& rec, int thread, std::mutex& rec_mu,
                        StartGate& gate) {
  const int rank = sc.me().rank;
  std::unique_ptr<KVWorker> connected;
  try {
    connected = std::make_unique<KVWorker>(sc.servers(), sc.me().id, cfg.transport, cfg.shm_ring_bytes, 30000, spin_us, token, cfg.len);
  } catch (...) {
    gate.arrive(false);
    throw;
  }
  gate.arrive(true);
  if (!gate.wait_open()) return {};
  KVWorker& kv = *connected;
  if (thread == 0)
    for (int s = 0; s < kv.servers(); ++s) rec.log("worker " + std::to_string(rank) + " -> server " + std::to_string(s) + " over " + kv.transport_to(s));
  const bool sync = cfg.mode == "sync";
  std::vector<uint64_t> keys = keys_of(rank, thread, cfg, kv.servers());
  if (sync) keys.resize(1);
  std::vector<ValueBuffer> vals(keys.size(), ValueBuffer(cfg.len)), outs(keys.size(), ValueBuffer(cfg.len));
  std::vector<size_t> out_lens(keys.size());
  std::vector<KVItem> items(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    fill(vals[i], keys[i], 0);
    items[i] = {keys[i], vals[i].data(), cfg.len, outs[i].data(), cfg.len, &out_lens[i]};
  }
  auto record = [&](const char* metric, int64_t it, int64_t t, double v, const char* unit, bool warm) {
    std::lock_guard<std::mutex> lock(rec_mu);
    rec.record(metric, it, t, v, unit, warm);
  };
  if (cfg.mode == "pull") kv.wait(kv.push(items));  // something to pull
  ThreadResult r;
  const int64_t total = cfg.warmup + (cfg.iterations > 0 ? cfg.iterations : INT64_MAX / 2);
  int64_t measured_start = 0;
  for (int64_t it = 0; it < total && !rec.should_stop(); ++it) {
    const bool warm = it < cfg.warmup;
    if (!warm && measured_start == 0) measured_start = rec.now_ns();
    if (!warm && cfg.duration_s > 0 && rec.now_ns() - measured_start >= int64_t(cfg.duration_s * 1e9)) break;
    if (cfg.kill_after > 0 && rank == 0 && thread == 0 && it == cfg.kill_after) raise(SIGKILL);
    if (cfg.verify && cfg.mode != "pull")  // pull mode reads back what was pushed before the loop
      for (size_t i = 0; i < keys.size(); ++i) fill(vals[i], keys[i], it);
    const int64_t t0 = rec.now_ns();
    if (sync) {  // one key: a push round trip, then a pull round trip
      kv.wait(kv.push(items));
      const int64_t t1 = rec.now_ns();
      kv.wait(kv.pull(items));
      const int64_t t2 = rec.now_ns();
      record("push_rtt", it, t0, double(t1 - t0) / 1e9, "s", warm);
      record("pull_rtt", it, t1, double(t2 - t1) / 1e9, "s", warm);
    } else {
      uint64_t ts = cfg.mode == "push" ? kv.push(items) : cfg.mode == "pull" ? kv.pull(items) : kv.pushpull(items);
      const size_t depth = kv.depth_at_last_request();
      kv.wait(ts);
      const int64_t t1 = rec.now_ns();
      // Goodput counts every byte moved: pushpull moves each value there and back.
      const uint64_t bytes = uint64_t(keys.size()) * cfg.len * (cfg.mode == "pushpull" ? 2 : 1);
      record("iteration_time", it, t0, double(t1 - t0) / 1e9, "s", warm);
      record("goodput", it, t0, double(bytes) / (double(t1 - t0) / 1e9), "bytes/s", warm);
      record("in_flight", it, t0, double(depth), "requests", warm);
      if (!warm) r.bytes += bytes;
    }
    if (cfg.verify && cfg.mode != "push")
      for (size_t i = 0; i < keys.size(); ++i)
        if (out_lens[i] != cfg.len || fanout_sdk::checksum64(outs[i].data(), cfg.len) != fanout_sdk::checksum64(vals[i].data(), cfg.len))
          ++r.mismatches;
    if (!warm) r.last_ns = rec.now_ns(), r.first_ns = measured_start;
  }
  return r;
}

}  // namespace

void run_worker(const Where& w, const BenchConfig& cfg, const Recorder& rec) {
  SchedulerClient sc(w.scheduler_host, w.scheduler_port, "worker", w.my_host, 0, w.timeout_ms, w.token);
  std::vector<ThreadResult> results(size_t(cfg.threads));
  std::vector<std::string> errors(size_t(cfg.threads));
  std::mutex rec_mu;
  StartGate gate;
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < cfg.threads; ++t)
      threads.emplace_back([&, t] {
        try {
          results[size_t(t)] = run_thread(sc, cfg, w.spin_us, w.token, rec, t, rec_mu, gate);
        } catch (const std::exception& e) {
          errors[size_t(t)] = e.what();
        }
      });
    {
      std::unique_lock<std::mutex> lock(gate.mu);
      gate.cv.wait(lock, [&] { return gate.connected + gate.failed == cfg.threads; });
    }
    std::string barrier_error;
    if (gate.failed == 0) {
      try {
        sc.barrier(false, w.timeout_ms);
      } catch (const std::exception& e) {
        barrier_error = e.what();
      }
    }
    {
      std::lock_guard<std::mutex> lock(gate.mu);
      gate.open = true;
      gate.proceed = gate.failed == 0 && barrier_error.empty();
      gate.cv.notify_all();
    }
    for (auto& t : threads) t.join();
    if (!barrier_error.empty()) throw std::runtime_error(barrier_error);
  }
  for (auto& e : errors)
    if (!e.empty()) throw std::runtime_error(e);
  uint64_t bytes = 0, mismatches = 0;
  int64_t first = INT64_MAX, last = 0;
  for (auto& r : results) {
    bytes += r.bytes, mismatches += r.mismatches;
    if (r.last_ns) first = std::min(first, r.first_ns), last = std::max(last, r.last_ns);
  }
  if (cfg.mode != "sync" && last > first) rec.record("aggregate_goodput", 0, first, double(bytes) / (double(last - first) / 1e9), "bytes/s", false);
  if (cfg.verify) rec.record("verify_mismatches", 0, rec.now_ns(), double(mismatches), "values", false);
  sc.barrier(true, 7 * 24 * 3600 * 1000);
  if (mismatches) throw std::runtime_error(std::to_string(mismatches) + " pulled values did not match what was pushed (checksums)");
}

}  // namespace pslite
