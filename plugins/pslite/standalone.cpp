// fanout-pslite: the same roles without fanout, configured like ps-lite's tests/test_benchmark so that existing
// launch scripts work unchanged:
//   DMLC_ROLE=scheduler|server|worker DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1 DMLC_PS_ROOT_URI=10.0.0.2
//   DMLC_PS_ROOT_PORT=8123 [DMLC_INTERFACE=eth0 | DMLC_NODE_HOST=...] [DMLC_ENABLE_RDMA=0|ibverbs]
//   [NUM_KEY_PER_SERVER=40] [PS_VERBOSE=1] fanout-pslite LEN REPEAT MODE
// MODE as test_benchmark: 0 sync push then pull on one key, 1 pushpull, 2 push, 3 pull. The worker prints
// goodput (both directions) and, in mode 0, round-trip percentiles.
#include <sys/time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "fanout_sdk.hpp"
#include "node.h"

namespace {

std::string env(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size() - 1) + 0.5))];
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string role = env("DMLC_ROLE");
    if (role != "scheduler" && role != "server" && role != "worker") {
      std::fprintf(stderr, "fanout-pslite: DMLC_ROLE must be scheduler, server or worker (got '%s')\n", role.c_str());
      return 2;
    }
    pslite::Where w;
    w.scheduler_host = env("DMLC_PS_ROOT_URI", "127.0.0.1");
    w.scheduler_port = std::stoi(env("DMLC_PS_ROOT_PORT", "8123"));
    w.token = env("FANOUT_PSLITE_TOKEN", "");  // optional: when set, the scheduler registers only nodes that present it
    w.num_servers = std::stoi(env("DMLC_NUM_SERVER", "1"));
    w.num_workers = std::stoi(env("DMLC_NUM_WORKER", "1"));
    w.my_host = env("DMLC_NODE_HOST", fanout_sdk::interface_ipv4(env("DMLC_INTERFACE", "auto")));
    w.spin_us = std::stoi(env("FANOUT_PSLITE_SPIN_US", std::to_string(w.spin_us)));
    const bool verbose = std::stoi(env("PS_VERBOSE", "0")) > 0;
    pslite::BenchConfig cfg;
    cfg.len = size_t(argc > 1 ? std::stoull(argv[1]) : 1024000);
    cfg.iterations = argc > 2 ? std::stoll(argv[2]) : 10;
    const int mode = argc > 3 ? std::stoi(argv[3]) : 0;
    static const char* modes[] = {"sync", "pushpull", "push", "pull"};
    if (mode < 0 || mode > 3) return std::fprintf(stderr, "fanout-pslite: MODE must be 0..3\n"), 2;
    cfg.mode = modes[mode];
    cfg.keys_per_server = std::stoi(env("NUM_KEY_PER_SERVER", "40"));
    cfg.warmup = std::stoll(env("FANOUT_PSLITE_WARMUP", "5"));
    cfg.shm_ring_bytes = std::stoull(env("FANOUT_PSLITE_SHM_RING", std::to_string(cfg.shm_ring_bytes)));
    cfg.transport = pslite::parse_transport(env("DMLC_ENABLE_RDMA", "auto"));

    std::map<std::string, std::vector<double>> samples;
    pslite::Recorder rec;
    rec.now_ns = fanout_sdk::monotonic_ns;
    rec.record = [&](const char* m, int64_t, int64_t, double v, const char*, bool warm) {
      if (!warm) samples[m].push_back(v);
    };
    rec.log = [&](const std::string& s) {
      if (verbose) std::fprintf(stderr, "[%s] %s\n", role.c_str(), s.c_str());
    };
    if (role == "scheduler") {
      pslite::run_scheduler(w, [&](int port) { rec.log("scheduler listening on port " + std::to_string(port)); });
    } else if (role == "server") {
      pslite::run_server(w, cfg.transport, rec);
    } else {
      pslite::run_worker(w, cfg, rec);
      if (cfg.mode == "sync") {
        // The round trips' time in all (push and pull alternate): how long an anchor must run to meet the same machine.
        double span_s = 0;
        for (const char* m : {"push_rtt", "pull_rtt"})
          for (double v : samples[m]) span_s += v;
        for (const char* m : {"push_rtt", "pull_rtt"})
          std::printf("%s of %zu bytes: p50 %.1f us, p99 %.1f us (%zu round trips; push and pull %.3f s in all)\n", m, cfg.len,
                      percentile(samples[m], 0.5) * 1e6, percentile(samples[m], 0.99) * 1e6, samples[m].size(), span_s);
      } else {
        std::printf("Application goodput: %.3f Gbps (%s, %zu-byte values, both directions counted)\n",
                    samples["aggregate_goodput"].empty() ? 0.0 : samples["aggregate_goodput"][0] * 8 / 1e9, cfg.mode.c_str(), cfg.len);
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fanout-pslite: %s\n", e.what());
    return 1;
  }
}
