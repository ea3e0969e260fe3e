// The three ps-lite roles as functions, shared by the fanout plugin (parameters from fanout, samples to its
// store) and the standalone DMLC_* program (parameters from the environment, samples printed).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "kv.h"

namespace pslite {

struct Where {
  std::string scheduler_host;
  int scheduler_port = 0;
  std::string token;    // the job's channel token, presented at registration ("" : none asked, as ps-lite)
  std::string my_host;  // the address this node listens on / is reached at
  int num_servers = 1, num_workers = 1;
  int timeout_ms = 120000;
  int spin_us = 0;  // receiving threads poll this long after a message before sleeping (receiver.h); 0: never poll
};

struct BenchConfig {
  std::string mode = "pushpull";  // push, pull, pushpull, sync
  size_t len = 1 << 20;           // bytes per value
  int keys_per_server = 40;
  int threads = 1;                // worker threads, each with its own connections
  int64_t iterations = 100;       // measured iterations per thread (0: bounded by duration only)
  double duration_s = 0;          // measured time bound per thread (0: iterations only)
  int64_t warmup = 5;             // iterations run first, recorded as warmup
  Transport transport = Transport::Auto;
  bool verify = false;            // checksum every value pulled against what was pushed
  size_t shm_ring_bytes = 4 << 20;  // per direction: large enough to stream, small enough to stay in cache
  int64_t kill_after = 0;         // testing: worker 0 kills itself (SIGKILL) after this many iterations
};

struct Recorder {
  std::function<int64_t()> now_ns;
  std::function<void(const char* metric, int64_t iteration, int64_t t_start_ns, double value, const char* unit, bool warmup)> record;
  std::function<void(const std::string&)> log;
  std::function<bool()> should_stop = [] { return false; };
};

// Each returns normally when its part is done; throws std::runtime_error with the reason otherwise.
void run_scheduler(const Where& w, const std::function<void(int port)>& on_listening);
void run_server(const Where& w, Transport transport, const Recorder& rec);
void run_worker(const Where& w, const BenchConfig& cfg, const Recorder& rec);

}  // namespace pslite
