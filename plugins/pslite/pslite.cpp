// ps-lite-style parameter server benchmark (bytedance/ps-lite tests/test_benchmark) as a fanout plugin: roles
// scheduler, server and worker; the scheduler's address goes through fanout's rendezvous instead of
// DMLC_PS_ROOT_URI/PORT (the standalone fanout-pslite program reads those). Transports: tcp, shm (same host),
// ibverbs (refused with the reason when unavailable); DMLC_ENABLE_RDMA and DMLC_INTERFACE are honoured.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <sstream>
#include <string>

#include "fanout_sdk.hpp"
#include "node.h"

namespace {

constexpr int kSetupTimeoutMs = 120000;

const char* const kModes[] = {"push", "pull", "pushpull", "sync"};
// Bounds and choices are checked by the driver for every value; check() below keeps what spans parameters.
const fanout_param_spec kParams[] = {
    FANOUT_PARAM_RANGE("len", FANOUT_PARAM_INT, "1048576", "bytes per value (test_benchmark's LEN)", "1", "4294967296"),
    FANOUT_PARAM_RANGE("keys_per_server", FANOUT_PARAM_INT, "40", "keys per server in each request (NUM_KEY_PER_SERVER)", "1", NULL),
    FANOUT_PARAM_ONE_OF("mode", FANOUT_PARAM_STRING, "pushpull", "push, pull, pushpull (one request each way) or sync (one key, round trips: latency)", kModes),
    FANOUT_PARAM_RANGE_FLAGS("servers", FANOUT_PARAM_INT, "1", "server processes (DMLC_NUM_SERVER), one per node", "1", NULL, FANOUT_PARAM_WEAK_SCALING),
    FANOUT_PARAM_RANGE_FLAGS("workers", FANOUT_PARAM_INT, "1", "worker processes (DMLC_NUM_WORKER); pslite_colocated: servers x workers_per_node", "1", NULL, FANOUT_PARAM_WEAK_SCALING),
    FANOUT_PARAM_RANGE_FLAGS("workers_per_node", FANOUT_PARAM_INT, "1", "worker processes per node", "1", NULL, FANOUT_PARAM_WEAK_SCALING),
    FANOUT_PARAM_RANGE_FLAGS("threads", FANOUT_PARAM_INT, "1", "threads per worker, each with its own connections and keys", "1", NULL, FANOUT_PARAM_WEAK_SCALING),
    FANOUT_PARAM_RANGE("iterations", FANOUT_PARAM_INT, "100", "measured iterations per thread (0: bounded by duration)", "0", NULL),
    FANOUT_PARAM_RANGE("duration", FANOUT_PARAM_FLOAT, "0", "measured seconds per thread (0: bounded by iterations)", "0", NULL),
    FANOUT_PARAM_RANGE("warmup", FANOUT_PARAM_INT, "5", "iterations run first and recorded as warmup", "0", NULL),
    FANOUT_PARAM("transport", FANOUT_PARAM_STRING, "auto", "auto (shm between processes on one host, else tcp), tcp, shm, ibverbs"),
    FANOUT_PARAM("interface", FANOUT_PARAM_STRING, "auto", "interface or address nodes listen on (DMLC_INTERFACE): lo, eth0, auto"),
    FANOUT_PARAM_RANGE("scheduler_port", FANOUT_PARAM_INT, "0", "the scheduler's port (DMLC_PS_ROOT_PORT; 0: any free port)", "0", "65535"),
    FANOUT_PARAM("verify", FANOUT_PARAM_BOOL, "false", "compare the checksum of every pulled value with what was pushed"),
    FANOUT_PARAM_RANGE("shm_ring_bytes", FANOUT_PARAM_INT, "4194304", "shm transport: ring size per direction", "65536", NULL),
    FANOUT_PARAM_RANGE("spin_us", FANOUT_PARAM_INT, "0", "microseconds a receiving thread keeps polling after a message before it sleeps (0: never poll; helps latency only with idle cores to spare)", "0", NULL),
    FANOUT_PARAM_RANGE("kill_worker_after", FANOUT_PARAM_INT, "0", "testing: worker 0 kills itself (SIGKILL) after this many iterations (0: never)", "0", NULL),
};

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}


pslite::Recorder recorder(fanout_sdk::Host& host) {
  pslite::Recorder r;
  r.now_ns = [&host] { return host.now_ns(); };
  r.record = [&host](const char* m, int64_t it, int64_t t, double v, const char* unit, bool warm) { host.record(m, it, t, v, unit, warm); };
  r.log = [&host](const std::string& s) { host.log(FANOUT_LOG_INFO, s); };
  r.should_stop = [&host] { return host.should_stop(); };
  return r;
}

pslite::Transport transport_of(fanout_sdk::Host& host) {
  std::string t = host.param("transport");
  if (t == "auto") t = env_or("DMLC_ENABLE_RDMA", "auto");
  return pslite::parse_transport(t);
}

// Rendezvous through fanout: the scheduler publishes its address, rank 0 of servers and workers their counts.
bool exchange(fanout_sdk::Host& host, pslite::Where& w) {
  if (!host.fence(kSetupTimeoutMs)) return false;
  std::string address, servers, workers;
  if (!host.get("pslite.scheduler", address, kSetupTimeoutMs) || !host.get("pslite.servers", servers, kSetupTimeoutMs) ||
      !host.get("pslite.workers", workers, kSetupTimeoutMs))
    return false;
  std::istringstream in(address);  // "host port token"
  if (!(in >> w.scheduler_host >> w.scheduler_port >> w.token)) return false;
  w.num_servers = std::stoi(servers);
  w.num_workers = std::stoi(workers);
  return true;
}

std::string my_host(fanout_sdk::Host& host) { return fanout_sdk::interface_ipv4(env_or("DMLC_INTERFACE", host.param("interface"))); }

template <typename F>
int guarded(fanout_sdk::Host& host, F body) {
  try {
    return body();
  } catch (const std::exception& e) {
    host.log(FANOUT_LOG_ERROR, e.what());
    return 1;
  }
}

int run_scheduler(fanout_context* ctx, const fanout_host_ops* ops) {
  fanout_sdk::Host host(ctx, ops);
  return guarded(host, [&] {
    const std::string token = fanout_sdk::channel_token();
    pslite::Scheduler scheduler(my_host(host), int(host.param_int("scheduler_port")), token);
    if (!host.put("pslite.scheduler", my_host(host) + " " + std::to_string(scheduler.port()) + " " + token)) return 2;
    pslite::Where w;
    if (!exchange(host, w)) return 3;
    scheduler.run(w.num_servers, w.num_workers, kSetupTimeoutMs);
    if (scheduler.refused()) host.log(FANOUT_LOG_WARN, std::to_string(scheduler.refused()) + " connection(s) that did not register as this job's nodes were dropped");
    return 0;
  });
}

// A server or worker joins: rank 0 publishes its step's size under count_key, then all learn the rest.
// Throws when the rendezvous fails.
pslite::Where join(fanout_sdk::Host& host, const char* count_key) {
  pslite::Where w;
  if ((host.rank() == 0 && !host.put(count_key, std::to_string(host.size()))) || !exchange(host, w))
    throw std::runtime_error("the job's rendezvous failed (scheduler address, node counts)");
  w.my_host = my_host(host);
  w.timeout_ms = kSetupTimeoutMs;
  w.spin_us = int(host.param_int("spin_us"));
  if (w.spin_us < 0) throw std::runtime_error("spin_us must be >= 0, got " + std::to_string(w.spin_us));
  return w;
}

int run_server(fanout_context* ctx, const fanout_host_ops* ops) {
  fanout_sdk::Host host(ctx, ops);
  return guarded(host, [&] {
    pslite::run_server(join(host, "pslite.servers"), transport_of(host), recorder(host));
    return 0;
  });
}

int run_worker(fanout_context* ctx, const fanout_host_ops* ops) {
  fanout_sdk::Host host(ctx, ops);
  return guarded(host, [&] {
    const pslite::Where w = join(host, "pslite.workers");
    pslite::BenchConfig cfg;
    cfg.mode = host.param("mode");
    cfg.len = size_t(host.param_int("len"));
    cfg.keys_per_server = int(host.param_int("keys_per_server"));
    cfg.threads = int(host.param_int("threads"));
    cfg.iterations = host.param_int("iterations");
    cfg.duration_s = host.param_double("duration");
    cfg.warmup = host.param_int("warmup");
    cfg.transport = transport_of(host);
    cfg.verify = host.param_bool("verify");
    cfg.shm_ring_bytes = size_t(host.param_int("shm_ring_bytes"));
    cfg.kill_after = host.param_int("kill_worker_after");
    pslite::run_worker(w, cfg, recorder(host));
    return 0;
  });
}

int check_values(const std::map<std::string, std::string>& p, std::string& why) {
  auto num = [&](const char* n) { return std::stod(p.at(n)); };
  if (num("iterations") == 0 && num("duration") == 0) return why = "iterations and duration are both 0: the run would never end", 1;
  pslite::parse_transport(p.at("transport"));  // throws with the value
  return 0;
}

int check(const char* const* names, const char* const* values, uint32_t n, char* err, size_t err_len) {
  std::map<std::string, std::string> p;
  for (uint32_t i = 0; i < n; ++i) p[names[i]] = values[i];
  std::string why;
  try {
    if (check_values(p, why) == 0) return 0;
  } catch (const std::exception& e) {
    why = e.what();
  }
  std::snprintf(err, err_len, "%s", why.c_str());
  return 1;
}

const fanout_role kRoles[] = {
    FANOUT_ROLE("scheduler", "ps-lite's scheduler: registration, node list, barriers; fails the job when a node leaves early", run_scheduler),
    FANOUT_ROLE("server", "KV server: stores pushed values by key range, answers pulls", run_server),
    FANOUT_ROLE("worker", "KV worker: pushes/pulls keys_per_server values of len bytes on every server, records goodput and latency", run_worker),
};

// The scheduler shares the first server's node (ps-lite: "it does not affect performance").
const fanout_step_spec kSteps[] = {FANOUT_STEP("server", "{servers}", "1", "disjoint"),
                                   FANOUT_STEP("scheduler", "1", "1", "colocated"),
                                   FANOUT_STEP("worker", "{workers/workers_per_node}", "{workers_per_node}", "disjoint")};
const fanout_step_spec kColocatedSteps[] = {FANOUT_STEP("server", "{servers}", "1", "disjoint"),
                                            FANOUT_STEP("scheduler", "1", "1", "colocated"),
                                            FANOUT_STEP("worker", "{servers}", "{workers_per_node}", "colocated")};
const fanout_param_default kColocatedDefaults[] = {FANOUT_DEFAULT("workers", "1")};

const fanout_experiment_spec kExperiments[] = {
    FANOUT_EXPERIMENT("pslite", "ps-lite push/pull benchmark: servers and workers on nodes of their own", FANOUT_ARRAY(kSteps), FANOUT_NO_ARRAY, nullptr, nullptr, nullptr),
    // Colocated: the worker count follows from servers x workers_per_node, so `workers` is not its parameter.
    FANOUT_EXPERIMENT_USING("pslite_colocated", "the same with workers_per_node workers on every server's node", FANOUT_ARRAY(kColocatedSteps), FANOUT_ARRAY(kColocatedDefaults), nullptr, nullptr, nullptr,
                            "len,keys_per_server,mode,servers,workers_per_node,threads,iterations,duration,warmup,transport,interface,scheduler_port,verify,shm_ring_bytes,spin_us,kill_worker_after"),
};

// Which way each metric is better (a verdict never guesses it) and which are once-per-run setup costs.
const fanout_metric_spec kMetrics[] = {
    FANOUT_METRIC("messages_served", FANOUT_BETTER_NONE, "messages a server answered"),
    FANOUT_METRIC("connections_refused", FANOUT_BETTER_NONE, "connections refused"),
    FANOUT_METRIC("push_rtt", FANOUT_BETTER_LOWER, "one push"),
    FANOUT_METRIC("pull_rtt", FANOUT_BETTER_LOWER, "one pull"),
    FANOUT_METRIC("iteration_time", FANOUT_BETTER_LOWER, "one iteration"),
    FANOUT_METRIC("goodput", FANOUT_BETTER_HIGHER, "payload bytes per second"),
    FANOUT_METRIC("in_flight", FANOUT_BETTER_NONE, "requests outstanding"),
    FANOUT_METRIC("aggregate_goodput", FANOUT_BETTER_HIGHER, "payload bytes per second over the run"),
    FANOUT_METRIC("verify_mismatches", FANOUT_BETTER_LOWER, "values that came back wrong"),
};

const fanout_plugin kPlugin = FANOUT_PLUGIN_WITH_METRICS("pslite", "ps-lite-style parameter server push/pull benchmark (tcp, shared memory)", "0.1.0", FANOUT_ARRAY(kParams), FANOUT_ARRAY(kRoles), FANOUT_ARRAY(kExperiments), nullptr, nullptr, check, FANOUT_ARRAY(kMetrics));

}  // namespace

extern "C" FANOUT_PLUGIN_EXPORT const fanout_plugin* fanout_plugin_entry(void) { return &kPlugin; }
