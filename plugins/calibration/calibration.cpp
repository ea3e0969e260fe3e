// Calibration plugin: benchmarks whose true cost is known, so that the whole measurement path (rank runner,
// sample files, ingestion, statistics) can be checked end to end against it.
//   sleep : each iteration waits exactly sleep_us microseconds (sleep, then spin the last stretch);
//           the reported p50 must match sleep_us within a few percent.
//   copy  : each iteration copies copy_bytes bytes (memcpy) and records its time and bandwidth.
// Every rank first rendezvouses with all others (put its node, fence, read a peer's key), which exercises
// the launcher's key-value service, and test hooks can make one rank fail, crash or hang.
#include <sys/prctl.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "fanout_sdk.hpp"

namespace {

const fanout_param_spec kParams[] = {
    // The driver refuses values outside these bounds before anything runs (a negative sleep, a million ranks).
    FANOUT_PARAM_RANGE_FLAGS("nodes", FANOUT_PARAM_INT, "1", "nodes of the step", "1", NULL, FANOUT_PARAM_WEAK_SCALING),
    FANOUT_PARAM_RANGE_FLAGS("ranks_per_node", FANOUT_PARAM_INT, "1", "ranks per node", "1", "4096", FANOUT_PARAM_WEAK_SCALING),
    FANOUT_PARAM_RANGE("iterations", FANOUT_PARAM_INT, "50", "measured iterations per rank", "0", "1000000000"),
    FANOUT_PARAM_RANGE("warmup", FANOUT_PARAM_INT, "3", "warmup iterations per rank (recorded, flagged, excluded from statistics)", "0", "1000000000"),
    FANOUT_PARAM_RANGE("sleep_us", FANOUT_PARAM_INT, "1000", "sleep role: microseconds each iteration takes", "0", "3600000000"),
    FANOUT_PARAM_RANGE("copy_bytes", FANOUT_PARAM_INT, "1048576", "copy role: bytes copied per iteration", "1", "68719476736"),
    FANOUT_PARAM("fail_rank", FANOUT_PARAM_INT, "-1", "test hook: this rank returns an error (exit code 3)"),
    FANOUT_PARAM("crash_rank", FANOUT_PARAM_INT, "-1", "test hook: this rank dies of SIGSEGV"),
    FANOUT_PARAM("hang_rank", FANOUT_PARAM_INT, "-1", "test hook: this rank waits until stopped (for wall-time tests)"),
};

// Rendezvous: every rank publishes its node, all fence, then each reads the next rank's key.
bool rendezvous(fanout_sdk::Host& host) {
  const std::string prefix = "calibration." + host.role() + ".";
  int64_t t0 = host.now_ns();
  if (!host.put(prefix + std::to_string(host.rank()), host.node())) return false;
  if (!host.fence(60000)) return false;
  std::string peer;
  if (!host.get(prefix + std::to_string((host.rank() + 1) % host.size()), peer, 10000) || peer.empty()) return false;
  host.record("rendezvous", 0, t0, double(host.now_ns() - t0) / 1e3, "us", false);
  return true;
}

// Test hooks shared by both roles; returns a non-zero exit status, or 0 to carry on.
int test_hooks(fanout_sdk::Host& host) {
  if (host.rank() == host.param_int("fail_rank")) {
    host.log(FANOUT_LOG_ERROR, "fail_rank: failing on purpose");
    return 3;
  }
  if (host.rank() == host.param_int("crash_rank")) std::raise(SIGSEGV);
  if (host.rank() == host.param_int("hang_rank")) {
    while (!host.should_stop()) {
      timespec ts{0, 10000000};
      nanosleep(&ts, nullptr);
    }
    return 4;
  }
  return 0;
}

void wait_until(int64_t deadline_ns, const fanout_sdk::Host& host) {
  // Sleep to within 200 us of the deadline, then spin: the timer's wake-up jitter would otherwise be measured.
  const int64_t spin_ns = 200000;
  int64_t now = host.now_ns();
  if (deadline_ns - now > spin_ns) {
    int64_t until = deadline_ns - spin_ns;
    timespec ts{time_t(until / 1000000000), long(until % 1000000000)};
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
  }
  while (host.now_ns() < deadline_ns) {
  }
}

int run_sleep(fanout_context* ctx, const fanout_host_ops* ops) {
  fanout_sdk::Host host(ctx, ops);
  if (!rendezvous(host)) return 5;
  if (int rc = test_hooks(host)) return rc;
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  const int64_t warmup = host.param_int("warmup"), iterations = host.param_int("iterations");
  const int64_t sleep_ns = host.param_int("sleep_us") * 1000;
  for (int64_t i = 0; i < warmup + iterations && !host.should_stop(); ++i) {
    int64_t t0 = host.now_ns();
    wait_until(t0 + sleep_ns, host);
    int64_t t1 = host.now_ns();
    if (!host.record("sleep", i - warmup, t0, double(t1 - t0) / 1e3, "us", i < warmup)) return 6;
  }
  return 0;
}

int run_copy(fanout_context* ctx, const fanout_host_ops* ops) {
  fanout_sdk::Host host(ctx, ops);
  if (!rendezvous(host)) return 5;
  if (int rc = test_hooks(host)) return rc;
  const int64_t warmup = host.param_int("warmup"), iterations = host.param_int("iterations");
  const size_t bytes = size_t(host.param_int("copy_bytes"));
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  for (int64_t i = 0; i < warmup + iterations && !host.should_stop(); ++i) {
    src[size_t(i) % bytes] = char(i);  // keep the copy from being optimised away
    int64_t t0 = host.now_ns();
    std::memcpy(dst.data(), src.data(), bytes);
    int64_t t1 = host.now_ns();
    double secs = double(std::max<int64_t>(1, t1 - t0)) / 1e9;
    bool w = i < warmup;
    if (!host.record("copy", i - warmup, t0, secs, "s", w) || !host.record("copy_bandwidth", i - warmup, t0, double(bytes) / secs, "bytes/s", w))
      return 6;
  }
  return std::memcmp(dst.data(), src.data(), bytes) == 0 ? 0 : 7;
}

const fanout_role kRoles[] = {
    FANOUT_ROLE("sleep", "waits sleep_us per iteration (known cost)", run_sleep),
    FANOUT_ROLE("copy", "copies copy_bytes per iteration (memory bandwidth)", run_copy),
};

const fanout_step_spec kSleepSteps[] = {FANOUT_STEP("sleep", "{nodes}", "{ranks_per_node}", "disjoint")};
const fanout_step_spec kCopySteps[] = {FANOUT_STEP("copy", "{nodes}", "{ranks_per_node}", "disjoint")};
const fanout_param_default kSweepDefaults[] = {FANOUT_DEFAULT("sleep_us", "[500,1000,2000]"), FANOUT_DEFAULT("ranks_per_node", "[1,2]"), FANOUT_DEFAULT("iterations", "100")};

// The test hooks (fail/crash/hang_rank) work in every experiment; each role reads its own size parameter.
const char* kSleepUses = "nodes,ranks_per_node,iterations,warmup,sleep_us,fail_rank,crash_rank,hang_rank";
const char* kCopyUses = "nodes,ranks_per_node,iterations,warmup,copy_bytes,fail_rank,crash_rank,hang_rank";

const fanout_experiment_spec kExperiments[] = {
    FANOUT_EXPERIMENT_USING("calibration_sleep", "sleep for a known time per iteration (checks the measurement path)", FANOUT_ARRAY(kSleepSteps), FANOUT_NO_ARRAY, nullptr, nullptr, nullptr, kSleepUses),
    FANOUT_EXPERIMENT_USING("calibration_copy", "memcpy bandwidth per rank", FANOUT_ARRAY(kCopySteps), FANOUT_NO_ARRAY, nullptr, nullptr, nullptr, kCopyUses),
    FANOUT_EXPERIMENT_USING("calibration_sweep", "a 6-run calibration sweep of known cost (1 and 2 ranks x 500/1000/2000 us); scripts/quickstart.sh is the SmartSim-style first run", FANOUT_ARRAY(kSleepSteps), FANOUT_ARRAY(kSweepDefaults), nullptr, nullptr, nullptr, kSleepUses),
};

// Which way each metric is better (a verdict never guesses it) and which are once-per-run setup costs.
const fanout_metric_spec kMetrics[] = {
    FANOUT_SETUP_METRIC("rendezvous", FANOUT_BETTER_LOWER, "time from start to the first fence"),
    FANOUT_METRIC("sleep", FANOUT_BETTER_LOWER, "one timed sleep"),
    FANOUT_METRIC("copy", FANOUT_BETTER_LOWER, "one buffer copy"),
    FANOUT_METRIC("copy_bandwidth", FANOUT_BETTER_HIGHER, "bytes copied per second"),
};

const fanout_plugin kPlugin = FANOUT_PLUGIN_WITH_METRICS("calibration", "benchmarks of known cost for checking the measurement path", "1.0.0", FANOUT_ARRAY(kParams), FANOUT_ARRAY(kRoles), FANOUT_ARRAY(kExperiments), nullptr, nullptr, nullptr, FANOUT_ARRAY(kMetrics));

}  // namespace

extern "C" FANOUT_PLUGIN_EXPORT const fanout_plugin* fanout_plugin_entry(void) { return &kPlugin; }
