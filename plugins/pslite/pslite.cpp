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

const fanout_param_spec kParams[] = {
    {"len", FANOUT_PARAM_INT, "1048576", "bytes per value (test_benchmark's LEN)"},
    {"keys_per_server", FANOUT_PARAM_INT, "40", "keys per server in each request (NUM_KEY_PER_SERVER)"},
    {"mode", FANOUT_PARAM_STRING, "pushpull", "push, pull, pushpull (one request each way) or sync (one key, round trips: latency)"},
    {"servers", FANOUT_PARAM_INT, "1", "server processes (DMLC_NUM_SERVER), one per node"},
    {"workers", FANOUT_PARAM_INT, "1", "worker processes (DMLC_NUM_WORKER); pslite_colocated: servers x workers_per_node"},
    {"workers_per_node", FANOUT_PARAM_INT, "1", "worker processes per node"},
    {"threads", FANOUT_PARAM_INT, "1", "threads per worker, each with its own connections and keys"},
    {"iterations", FANOUT_PARAM_INT, "100", "measured iterations per thread (0: bounded by duration)"},
    {"duration", FANOUT_PARAM_FLOAT, "0", "measured seconds per thread (0: bounded by iterations)"},
    {"warmup", FANOUT_PARAM_INT, "5", "iterations run first and recorded as warmup"},
    {"transport", FANOUT_PARAM_STRING, "auto", "auto (shm between processes on one host, else tcp), tcp, shm, ibverbs"},
    {"interface", FANOUT_PARAM_STRING, "auto", "interface or address nodes listen on (DMLC_INTERFACE): lo, eth0, auto"},
    {"scheduler_port", FANOUT_PARAM_INT, "0", "the scheduler's port (DMLC_PS_ROOT_PORT; 0: any free port)"},
    {"verify", FANOUT_PARAM_BOOL, "false", "compare the checksum of every pulled value with what was pushed"},
    {"shm_ring_bytes", FANOUT_PARAM_INT, "4194304", "shm transport: ring size per direction"},
    {"spin_us", FANOUT_PARAM_INT, "0", "microseconds a receiving thread keeps polling after a message before it sleeps (0: never poll; helps latency only with idle cores to spare)"},
    {"kill_worker_after", FANOUT_PARAM_INT, "0", "testing: worker 0 kills itself (SIGKILL) after this many iterations (0: never)"},
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
  std::string t = host.param("transport", "auto");
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

std::string my_host(fanout_sdk::Host& host) { return fanout_sdk::interface_ipv4(env_or("DMLC_INTERFACE", host.param("interface", "auto"))); }

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
    pslite::Scheduler scheduler(my_host(host), int(host.param_int("scheduler_port", 0)), token);
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
  w.spin_us = int(host.param_int("spin_us", w.spin_us));
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
    cfg.mode = host.param("mode", "pushpull");
    cfg.len = size_t(host.param_int("len", 1 << 20));
    cfg.keys_per_server = int(host.param_int("keys_per_server", 40));
    cfg.threads = int(host.param_int("threads", 1));
    cfg.iterations = host.param_int("iterations", 100);
    cfg.duration_s = host.param_double("duration", 0);
    cfg.warmup = host.param_int("warmup", 5);
    cfg.transport = transport_of(host);
    cfg.verify = host.param_bool("verify");
    cfg.shm_ring_bytes = size_t(host.param_int("shm_ring_bytes", 4 << 20));
    cfg.kill_after = host.param_int("kill_worker_after", 0);
    pslite::run_worker(w, cfg, recorder(host));
    return 0;
  });
}

int check_values(const std::map<std::string, std::string>& p, std::string& why) {
  auto num = [&](const char* n) { return std::stod(p.at(n)); };
  const std::string& mode = p.at("mode");
  if (mode != "push" && mode != "pull" && mode != "pushpull" && mode != "sync")
    return why = "mode must be push, pull, pushpull or sync, got '" + mode + "'", 1;
  for (const char* n : {"len", "keys_per_server", "servers", "workers", "workers_per_node", "threads"})
    if (num(n) < 1) return why = std::string(n) + " must be >= 1, got " + p.at(n), 1;
  for (const char* n : {"iterations", "duration", "warmup", "kill_worker_after", "scheduler_port"})
    if (num(n) < 0) return why = std::string(n) + " must be >= 0, got " + p.at(n), 1;
  if (num("iterations") == 0 && num("duration") == 0) return why = "iterations and duration are both 0: the run would never end", 1;
  if (num("len") > double(1ull << 32)) return why = "len " + p.at("len") + " is more than 4 GiB", 1;
  if (num("shm_ring_bytes") < 65536) return why = "shm_ring_bytes must be >= 65536, got " + p.at("shm_ring_bytes"), 1;
  if (num("scheduler_port") > 65535) return why = "scheduler_port must be < 65536", 1;
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
    {"scheduler", "ps-lite's scheduler: registration, node list, barriers; fails the job when a node leaves early", run_scheduler},
    {"server", "KV server: stores pushed values by key range, answers pulls", run_server},
    {"worker", "KV worker: pushes/pulls keys_per_server values of len bytes on every server, records goodput and latency", run_worker},
};

// The scheduler shares the first server's node (ps-lite: "it does not affect performance").
const fanout_step_spec kSteps[] = {{"server", "{servers}", "1", "disjoint"},
                                   {"scheduler", "1", "1", "colocated"},
                                   {"worker", "{workers/workers_per_node}", "{workers_per_node}", "disjoint"}};
const fanout_step_spec kColocatedSteps[] = {{"server", "{servers}", "1", "disjoint"},
                                            {"scheduler", "1", "1", "colocated"},
                                            {"worker", "{servers}", "{workers_per_node}", "colocated"}};
const fanout_param_default kColocatedDefaults[] = {{"workers", "1"}};

const fanout_experiment_spec kExperiments[] = {
    {"pslite", "ps-lite push/pull benchmark: servers and workers on nodes of their own", kSteps, 3, nullptr, 0, nullptr, nullptr, nullptr},
    {"pslite_colocated", "the same with workers_per_node workers on every server's node", kColocatedSteps, 3, kColocatedDefaults, 1, nullptr, nullptr, nullptr},
};

const fanout_plugin kPlugin = {
    FANOUT_PLUGIN_ABI_VERSION, "pslite", "ps-lite-style parameter server push/pull benchmark (tcp, shared memory)", "0.1.0", kParams,
    sizeof kParams / sizeof kParams[0], kRoles, 3, kExperiments, 2, nullptr, nullptr, check,
};

}  // namespace

extern "C" FANOUT_PLUGIN_EXPORT const fanout_plugin* fanout_plugin_entry(void) { return &kPlugin; }
