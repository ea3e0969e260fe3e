// SmartSim-like benchmarks: a database role that runs redis-server (with our RedisAI module) on each
// database node, standalone or as a Redis Cluster, and client roles that drive it the way SmartSim-Scaling's
// C++ apps do, with the same timing names: client(), put_tensor, run_script, run_model, unpack_tensor,
// loop_time, main().
// Every job follows one sequence of fences, whatever the role:
//   1 db rank 0 has published the password    2 every server is up and published its address
//   3 the database (cluster) is ready          4 every client is done: servers shut down
// Where the database is a shared step (throughput_standard, aggregation_scaling: one database per group of
// runs, as SmartSim-Scaling reuses it across its inner loop), the database is a service job of its own: it
// shares password and addresses through its service folder, says ready after fence 3, and shuts down when the
// driver stops it; the clients' jobs then hold the clients alone and their fences are among themselves.
#include <dirent.h>
#include <sched.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <chrono>
#include <ctime>
#include <functional>
#include <thread>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cpu_affinity.h"
#include "fanout_sdk.hpp"
#include "language_client.h"
#include "redis_server.h"
#include "tensor_client.h"

namespace {

constexpr int kSetupTimeoutMs = 120000;
constexpr int kRunTimeoutMs = 7 * 24 * 3600 * 1000;  // the run's wall time ends it first

const char* const kNetTypes[] = {"tcp", "uds"};
const char* const kDevices[] = {"CPU", "GPU"};
const char* const kLanguages[] = {"cpp", "c", "fortran", "python"};
const fanout_param_spec kParams[] = {
    // Sweep order (first outermost) as SmartSim-Scaling's throughput_standard: db_nodes x db_cpus outside,
    // then client_nodes, clients_per_node, tensor_bytes, languages.
    FANOUT_PARAM_RANGE_FLAGS("db_nodes", FANOUT_PARAM_INT, "[12]", "database nodes (one redis-server each; a Redis Cluster when > 1)", "1", NULL, FANOUT_PARAM_STRONG_SCALING),
    FANOUT_PARAM_RANGE("db_cpus", FANOUT_PARAM_INT, "[2]", "CPUs per database node: the server is pinned to them and gets as many io-threads", "1", NULL),
    FANOUT_PARAM_RANGE_FLAGS("nodes", FANOUT_PARAM_INT, "[16,32,64,128]", "colocated: application nodes, each with its own database", "1", NULL, FANOUT_PARAM_WEAK_SCALING),
    FANOUT_PARAM_RANGE_FLAGS("client_nodes", FANOUT_PARAM_INT, "[128,256,512]", "standard: client nodes", "1", NULL, FANOUT_PARAM_WEAK_SCALING),
    FANOUT_PARAM_RANGE_FLAGS("clients_per_node", FANOUT_PARAM_INT, "[32]", "client ranks per node", "1", NULL, FANOUT_PARAM_WEAK_SCALING),
    FANOUT_PARAM_RANGE("tensor_bytes", FANOUT_PARAM_INT, "[1024,8192,16384,32769,65538,131076,262152,524304,1024000,2048000,4096000]", "bytes per tensor (a float32 tensor of tensor_bytes/4 elements)", "4", NULL),
    FANOUT_PARAM_RANGE("tensors_per_dataset", FANOUT_PARAM_INT, "4", "aggregation: tensors in each producer's dataset", "1", NULL),
    FANOUT_PARAM_RANGE_FLAGS("client_threads", FANOUT_PARAM_INT, "32", "aggregation: threads (and connections) the consumer fetches datasets with", "1", NULL, FANOUT_PARAM_STRONG_SCALING),
    FANOUT_PARAM("fs_dir", FANOUT_PARAM_STRING, "auto", "filesystem aggregation: the shared folder (auto: <run>/aggregation_fs; point it at NFS/Lustre)"),
    FANOUT_PARAM_ONE_OF("languages", FANOUT_PARAM_STRING, "[cpp]", "language of the throughput clients and aggregation producers: cpp (in the rank), c, fortran, python (fanout-tensor-client-<language>)", kLanguages),
    FANOUT_PARAM_RANGE("iterations", FANOUT_PARAM_INT, "100", "measured put/unpack iterations per client", "0", NULL),
    FANOUT_PARAM_RANGE("warmup", FANOUT_PARAM_INT, "1", "warmup iterations per client (recorded, flagged, excluded from statistics)", "0", NULL),
    FANOUT_PARAM_RANGE("db_port", FANOUT_PARAM_INT, "6780", "first database port (database rank r listens on db_port + r)", "1", "65535"),
    FANOUT_PARAM("net_ifname", FANOUT_PARAM_STRING, "auto", "interface the database listens on: lo, ib0, ..., or auto (the host name's address)"),
    FANOUT_PARAM_ONE_OF("net_type", FANOUT_PARAM_STRING, "tcp", "colocated: tcp or uds (a Unix socket on the node)", kNetTypes),
    FANOUT_PARAM("run_db_as_batch", FANOUT_PARAM_BOOL, "true", "SmartSim-Scaling compatibility: a reused database (throughput_standard, aggregation_scaling) always runs as a job of its own, otherwise as a step of the run's job"),
    FANOUT_PARAM_RANGE("db_tpq", FANOUT_PARAM_INT, "[1]", "inference: threads per device queue in the database (RedisAI THREADS_PER_QUEUE)", "1", NULL),
    FANOUT_PARAM_RANGE("batch_size", FANOUT_PARAM_INT, "[1]", "inference: the model's BATCHSIZE (concurrent requests run as one batch up to it)", "0", NULL),
    FANOUT_PARAM_ONE_OF("device", FANOUT_PARAM_STRING, "GPU", "inference: CPU or GPU, where the database runs the model", kDevices),
    FANOUT_PARAM_RANGE("num_devices", FANOUT_PARAM_INT, "1", "inference: GPUs per node (the model is stored on GPU:0..n-1; clients spread over them)", "1", NULL),
    FANOUT_PARAM("rebuild_model", FANOUT_PARAM_BOOL, "false", "inference: rebuild the ResNet-50 file even if it exists"),
    FANOUT_PARAM("model_dir", FANOUT_PARAM_STRING, "auto", "inference: folder of the model and script files (auto: <experiment>/models)"),
    FANOUT_PARAM("pin_app_cpus", FANOUT_PARAM_BOOL, "false", "colocated: keep the application off the db_cpus CPUs its node's database is pinned to (SmartSim's limit_app_cpus)"),
};

// The address a database on this node listens on.
std::string listen_address(const std::string& ifname) {
  try {
    return fanout_sdk::interface_ipv4(ifname);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("net_ifname: ") + e.what());
  }
}

// The RedisAI module: ours, next to this plugin, or the site's (FANOUT_REDISAI_MODULE, e.g. a real RedisAI's
// redisai.so through a site profile's [roles.db] env).
std::string module_path() {
  const char* site = std::getenv("FANOUT_REDISAI_MODULE");
  return site && *site ? site : fanout_sdk::plugin_dir() + "/redisai.so";
}

bool fence(fanout_sdk::Host& host, int n, int timeout_ms) {
  if (host.fence(timeout_ms)) return true;
  host.log(FANOUT_LOG_ERROR, "fence " + std::to_string(n) + " failed");
  return false;
}

bool get(fanout_sdk::Host& host, const std::string& key, std::string& value) {
  if (host.get(key, value, kSetupTimeoutMs)) return true;
  host.log(FANOUT_LOG_ERROR, "rendezvous key " + key + " never arrived");
  return false;
}

// What the database shares with its clients (the job's rendezvous, or a shared database's service folder).
bool get_shared(fanout_sdk::Host& host, const std::string& key, std::string& value) {
  if (host.shared(key, value, kSetupTimeoutMs)) return true;
  host.log(FANOUT_LOG_ERROR, "the database never shared " + key + (host.service_dir().empty() ? "" : " in " + host.service_dir()));
  return false;
}

// The database role: one redis-server per rank (one rank per node); colocated: one per application node.
int run_db(fanout_context* ctx, const fanout_host_ops* ops, bool colocated) {
  fanout_sdk::Host host(ctx, ops);
  try {
    const int servers = host.size();
    const bool cluster = !colocated && servers > 1;
    if (host.rank() == 0 && !host.share("smartsim.password", fanout_sdk::random_hex())) return 2;
    if (!fence(host, 1, kSetupTimeoutMs)) return 3;
    std::string password;
    if (!get(host, "smartsim.password", password)) return 3;

    smartsim::RedisServerConfig cfg;
    cfg.dir = host.run_dir() + "/database/" + std::to_string(host.rank());
    std::string mk = host.run_dir() + "/database";
    ::mkdir(mk.c_str(), 0700);
    cfg.bind = listen_address(host.param("net_ifname"));
    cfg.port = int(host.param_int("db_port") + host.rank());
    cfg.password = password;
    cfg.module = module_path();
    cfg.cluster = cluster;
    cfg.cpus = int(host.param_int("db_cpus"));
    // RedisAI's threading: db_tpq workers per device queue, the node's db_cpus shared among them for intra-op work.
    const int64_t tpq = std::max<int64_t>(1, host.param_int("db_tpq"));
    cfg.module_args = {"THREADS_PER_QUEUE", std::to_string(tpq), "INTRA_OP_PARALLELISM",
                       std::to_string(std::max<int64_t>(1, cfg.cpus / tpq)), "INTER_OP_PARALLELISM", "1"};
    std::string socket_dir;
    if (colocated && host.param("net_type") == "uds") {
      // Socket paths must fit in 107 bytes: a private folder under /tmp, not the (long) run folder.
      char tmpl[] = "/tmp/fanout-db-XXXXXX";
      if (!mkdtemp(tmpl)) throw std::runtime_error("cannot create a folder for the database socket");
      socket_dir = tmpl;
      cfg.unix_socket = socket_dir + "/redis.sock";
    }
    struct RemoveDir {
      std::string dir;
      ~RemoveDir() {
        if (!dir.empty()) ::unlink((dir + "/redis.sock").c_str()), ::rmdir(dir.c_str());
      }
    } cleanup{socket_dir};
    auto t0 = host.now_ns();
    auto server = std::make_unique<smartsim::RedisServer>(cfg);
    host.record("db_start", 0, t0, double(host.now_ns() - t0) / 1e9, "s", false);
    host.log(FANOUT_LOG_INFO, "redis-server on " + server->address() + " pinned to CPUs " + server->pinned());
    std::string endpoint = cfg.unix_socket.empty() ? server->address() : "unix:" + cfg.unix_socket;
    if (!host.put("smartsim.db." + std::to_string(host.rank()), endpoint)) return 2;
    if (colocated && !host.put("smartsim.db_cpus." + std::to_string(host.rank()), server->pinned())) return 2;
    if (!fence(host, 2, kSetupTimeoutMs)) return 3;

    if (host.rank() == 0) {
      std::vector<std::string> all;
      for (int r = 0; r < servers; ++r) {
        std::string a;
        if (!get(host, "smartsim.db." + std::to_string(r), a)) return 3;
        all.push_back(a);
      }
      if (cluster) {
        double secs = smartsim::create_cluster(all, password, 120);
        host.record("cluster_create", 0, host.now_ns(), secs, "s", false);
        host.log(FANOUT_LOG_INFO, "Redis Cluster of " + std::to_string(servers) + " shards ready in " + std::to_string(secs) + " s");
      }
      std::string ssdb;
      for (auto& a : all) ssdb += (ssdb.empty() ? "" : ",") + a;
      if (!host.share("smartsim.ssdb", ssdb) || !host.share("smartsim.db_type", cluster ? "Clustered" : "Standalone")) return 2;
      // The same as environment for any program the runs start (an exec step), as SmartSim sets it for its clients.
      if (!host.share(FANOUT_SERVICE_ENV_PREFIX "SSDB", ssdb) || !host.share(FANOUT_SERVICE_ENV_PREFIX "SR_DB_TYPE", cluster ? "Clustered" : "Standalone") ||
          !host.share(FANOUT_SERVICE_ENV_PREFIX "SR_DB_PASSWORD", password))
        return 2;
    }
    if (!fence(host, 3, kSetupTimeoutMs)) return 3;
    if (host.service() == fanout_sdk::Host::Service::Provider) {
      // Serves every run of its group: the driver stops it after the last one.
      if (host.rank() == 0 && !host.service_ready()) throw std::runtime_error("cannot write " + host.service_dir() + "/ready");
      while (!host.should_stop()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!fence(host, 4, kRunTimeoutMs)) return 3;  // the clients are done
    const int64_t stop0 = host.now_ns();
    server.reset();  // SHUTDOWN NOSAVE: teardown is part of what a sweep at scale pays for
    host.record("db_stop", 0, stop0, double(host.now_ns() - stop0) / 1e9, "s", false);
    return 0;
  } catch (const std::exception& e) {
    host.log(FANOUT_LOG_ERROR, e.what());
    return 1;
  }
}

// The database client a rank of `role` uses: the standard database (cluster or not), or, colocated, the one
// on this rank's node (nodes fill in order, clients_per_node ranks each).
smartsim::ClientOptions database_options(fanout_sdk::Host& host, bool colocated) {
  std::string ssdb, type, password;
  if (!get_shared(host, "smartsim.ssdb", ssdb) || !get_shared(host, "smartsim.db_type", type) ||
      !get_shared(host, "smartsim.password", password))
    throw std::runtime_error("the database never announced itself");
  smartsim::ClientOptions opts;
  opts.password = password;
  if (colocated) {
    std::string mine;
    int node = int(host.rank() / std::max<int64_t>(1, host.param_int("clients_per_node")));
    if (!get(host, "smartsim.db." + std::to_string(node), mine)) throw std::runtime_error("no database on this node");
    opts.addresses = {mine};
    return opts;
  }
  size_t start = 0;
  while (start <= ssdb.size()) {
    size_t c = ssdb.find(',', start);
    opts.addresses.push_back(ssdb.substr(start, c == std::string::npos ? std::string::npos : c - start));
    if (c == std::string::npos) break;
    start = c + 1;
  }
  opts.cluster = type == "Clustered";
  return opts;
}

// Every client role: the database's three setup fences, the body, then (always, even after a failure) the
// last fence that lets the database shut down. main() covers the whole role.
// SmartSim's limit_app_cpus (SmartSim-Scaling's pin_app_cpus): a colocated application leaves its node's database
// the CPUs the database pinned itself to (it publishes them). Threads and client programs started afterwards inherit
// the set.
void pin_app_cpus(fanout_sdk::Host& host) {
  if (host.param_int("pin_app_cpus") == 0) return;
  const int node = int(host.rank() / std::max<int64_t>(1, host.param_int("clients_per_node")));
  std::string db_list;
  if (!get(host, "smartsim.db_cpus." + std::to_string(node), db_list)) throw std::runtime_error("pin_app_cpus: the database never said its CPUs");
  std::vector<int> db_cpus;
  for (size_t at = 0; at < db_list.size();) {
    size_t comma = db_list.find(',', at);
    db_cpus.push_back(std::atoi(db_list.substr(at, comma - at).c_str()));
    at = comma == std::string::npos ? db_list.size() : comma + 1;
  }
  std::vector<int> mine;
  try {
    mine = smartsim::hold_off_cpus(db_cpus);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("pin_app_cpus: ") + e.what());
  }
  if (mine.empty())
    throw std::runtime_error("pin_app_cpus: the database's CPUs (" + db_list + ") are all the CPUs this task may use: nothing is left for the application");
  std::string list;
  for (int c : mine) list += (list.empty() ? "" : ",") + std::to_string(c);
  host.log(FANOUT_LOG_INFO, "application pinned to CPUs " + list + " (pin_app_cpus; the database has " + db_list + ")");
}

int client_role(fanout_sdk::Host& host, const std::function<void()>& body) {
  const int64_t t_main = host.now_ns();
  if (!fence(host, 1, kSetupTimeoutMs) || !fence(host, 2, kSetupTimeoutMs) || !fence(host, 3, kSetupTimeoutMs)) return 3;
  int rc = 0;
  try {
    body();
    host.record("main()", 0, t_main, double(host.now_ns() - t_main) / 1e9, "s", false);
  } catch (const std::exception& e) {
    host.log(FANOUT_LOG_ERROR, e.what());
    rc = 1;
  }
  if (!fence(host, 4, kRunTimeoutMs)) return 3;
  return rc;
}

std::unique_ptr<smartsim::Client> timed_client(fanout_sdk::Host& host, const smartsim::ClientOptions& opts) {
  const int64_t t0 = host.now_ns();
  auto client = std::make_unique<smartsim::Client>(opts);
  host.record("client()", 0, t0, double(host.now_ns() - t0) / 1e9, "s", false);
  return client;
}

double seconds(int64_t a, int64_t b) { return double(b - a) / 1e9; }

// The throughput client: put a float tensor, unpack it back, per iteration.
// What a client in another language is told (language_client.h): its mode, rank and sizes.
std::vector<std::string> client_args(fanout_sdk::Host& host, const std::string& mode) {
  return {mode, std::to_string(host.rank()), std::to_string(host.param_int("tensor_bytes")), std::to_string(host.param_int("iterations")),
          std::to_string(host.param_int("warmup")), std::to_string(host.param_int("tensors_per_dataset"))};
}

int run_throughput(fanout_context* ctx, const fanout_host_ops* ops, bool colocated) {
  fanout_sdk::Host host(ctx, ops);
  return client_role(host, [&] {
    if (colocated) pin_app_cpus(host);
    if (const std::string language = host.param("languages"); language != "cpp") {
      const smartsim::ClientOptions db = database_options(host, colocated);
      smartsim::run_language_client(host, {language, client_args(host, "throughput"), &db, nullptr, nullptr});
      return;
    }
    auto client = timed_client(host, database_options(host, colocated));
    const size_t elements = std::max<int64_t>(1, host.param_int("tensor_bytes") / 4);
    const size_t bytes = elements * 4;
    std::vector<float> out(elements), back(elements);
    for (size_t i = 0; i < elements; ++i) out[i] = float(host.rank()) + float(i) * 0.5f;
    const std::string key = "throughput_rank_" + std::to_string(host.rank());
    const std::vector<size_t> dims = {elements};
    const int64_t warmup = host.param_int("warmup"), iterations = host.param_int("iterations");
    for (int64_t i = -warmup; i < iterations && !host.should_stop(); ++i) {
      const bool w = i < 0;
      int64_t t0 = host.now_ns();
      client->put_tensor(key, smartsim::DType::Float, dims, out.data(), bytes);
      int64_t t1 = host.now_ns();
      client->unpack_tensor(key, smartsim::DType::Float, dims, back.data(), bytes);
      int64_t t2 = host.now_ns();
      if (i == -warmup && std::memcmp(out.data(), back.data(), bytes) != 0) throw std::runtime_error("unpacked tensor differs from the one put");
      host.record("put_tensor", i, t0, seconds(t0, t1), "s", w);
      host.record("unpack_tensor", i, t1, seconds(t1, t2), "s", w);
      host.record("loop_time", i, t0, seconds(t0, t2), "s", w);
      // Both directions: bytes put plus bytes read back, per second of the loop.
      host.record("loop_bandwidth", i, t0, 2.0 * double(bytes) / seconds(t0, t2), "bytes/s", w);
    }
  });
}

// Aggregation (SmartSim-Scaling's data aggregation): every producer puts a dataset per iteration, one consumer
// waits for all of them, fetches them with client_threads threads, cleans up, and releases the next iteration
// through the rendezvous ("smartsim.consumed.<k>"). Two transports share this protocol: the database (lists
// of datasets) and a shared folder (files written, then renamed).

// Runs body(k, i) for each producer iteration k (i = k - warmup, negative while warming up), each one once
// the consumer has finished the previous.
// Returns once the consumer has finished iteration k (at once for k < 0).
void wait_consumed(fanout_sdk::Host& host, int64_t k) {
  std::string consumed;
  if (k >= 0 && !host.get("smartsim.consumed." + std::to_string(k), consumed, kRunTimeoutMs))
    throw std::runtime_error("the consumer never finished iteration " + std::to_string(k));
}

void release_producers(fanout_sdk::Host& host, int64_t k) {
  if (!host.put("smartsim.consumed." + std::to_string(k), "1")) throw std::runtime_error("rendezvous put failed");
}

void producer_iterations(fanout_sdk::Host& host, const std::function<void(int64_t k, int64_t i)>& body) {
  const int64_t warmup = host.param_int("warmup"), iterations = host.param_int("iterations");
  for (int64_t k = 0; k < warmup + iterations && !host.should_stop(); ++k) {
    wait_consumed(host, k - 1);
    body(k, k - warmup);
  }
}

// For each consumer iteration k: wait(k) returns the items once every producer's is there; fetch(item)
// returns its bytes, run on client_threads threads; done(k, items) cleans up. Records poll_list, get_list
// and get_list_bandwidth, then releases the producers.
void consumer_iterations(fanout_sdk::Host& host, const std::function<std::vector<std::string>(int64_t k)>& wait,
                         const std::function<size_t(int thread, const std::string& item)>& fetch,
                         const std::function<void(int64_t k, const std::vector<std::string>& items)>& done) {
  const int threads = int(std::max<int64_t>(1, host.param_int("client_threads")));
  const int64_t warmup = host.param_int("warmup"), iterations = host.param_int("iterations");
  for (int64_t k = 0; k < warmup + iterations && !host.should_stop(); ++k) {
    const int64_t i = k - warmup;
    int64_t t0 = host.now_ns();
    std::vector<std::string> items = wait(k);
    int64_t t1 = host.now_ns();
    std::vector<size_t> bytes(static_cast<size_t>(threads), 0);
    std::vector<std::string> errors(static_cast<size_t>(threads));
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        try {
          for (size_t n = size_t(t); n < items.size(); n += size_t(threads)) bytes[size_t(t)] += fetch(t, items[n]);
        } catch (const std::exception& e) {
          errors[size_t(t)] = e.what();
        }
      });
    for (auto& w : workers) w.join();
    for (auto& e : errors)
      if (!e.empty()) throw std::runtime_error(e);
    int64_t t2 = host.now_ns();
    done(k, items);
    size_t total = 0;
    for (size_t b : bytes) total += b;
    host.record("poll_list", i, t0, seconds(t0, t1), "s", i < 0);
    host.record("get_list", i, t1, seconds(t1, t2), "s", i < 0);
    host.record("get_list_bandwidth", i, t1, double(total) / seconds(t1, t2), "bytes/s", i < 0);
    release_producers(host, k);
  }
}

int64_t producer_count(fanout_sdk::Host& host) { return host.param_int("client_nodes") * host.param_int("clients_per_node"); }

int run_producer(fanout_context* ctx, const fanout_host_ops* ops) {
  fanout_sdk::Host host(ctx, ops);
  return client_role(host, [&] {
    if (const std::string language = host.param("languages"); language != "cpp") {
      const smartsim::ClientOptions db = database_options(host, false);
      smartsim::run_language_client(host, {language, client_args(host, "producer"), &db, [&](int64_t k) { wait_consumed(host, k - 1); }, nullptr});
      return;
    }
    auto client = timed_client(host, database_options(host, false));
    const size_t elements = std::max<int64_t>(1, host.param_int("tensor_bytes") / 4);
    const int tensors = int(std::max<int64_t>(1, host.param_int("tensors_per_dataset")));
    std::vector<float> data(elements, float(host.rank()));
    std::vector<smartsim::TensorView> views;
    for (int t = 0; t < tensors; ++t)
      views.push_back({"tensor_" + std::to_string(t), smartsim::DType::Float, {elements}, data.data(), elements * 4});
    const std::string name = "aggregation_rank_" + std::to_string(host.rank());
    producer_iterations(host, [&](int64_t k, int64_t i) {
      int64_t t0 = host.now_ns();
      client->put_dataset(name, views);
      int64_t t1 = host.now_ns();
      client->append_to_list("iteration_" + std::to_string(k), name);
      host.record("put_dataset", i, t0, seconds(t0, t1), "s", i < 0);
      host.record("append_to_list", i, t1, seconds(t1, host.now_ns()), "s", i < 0);
    });
  });
}

int run_consumer(fanout_context* ctx, const fanout_host_ops* ops) {
  fanout_sdk::Host host(ctx, ops);
  return client_role(host, [&] {
    const auto opts = database_options(host, false);
    auto client = timed_client(host, opts);
    std::vector<std::unique_ptr<smartsim::Client>> pool;  // one connection per fetching thread
    for (int64_t t = 0; t < std::max<int64_t>(1, host.param_int("client_threads")); ++t) pool.push_back(std::make_unique<smartsim::Client>(opts));
    auto list = [](int64_t k) { return "iteration_" + std::to_string(k); };
    consumer_iterations(
        host,
        [&](int64_t k) {
          if (!client->poll_list_length(list(k), producer_count(host), 1, 600000))
            throw std::runtime_error(list(k) + " never reached " + std::to_string(producer_count(host)) + " datasets");
          return client->get_list(list(k));
        },
        [&](int t, const std::string& name) {
          std::vector<std::vector<char>> tensors;
          return pool[size_t(t)]->get_datasets({name}, tensors);
        },
        [&](int64_t k, const std::vector<std::string>&) { client->delete_list(list(k)); });
  });
}

// The filesystem variant (SmartSim-Scaling's aggregation_scaling_python_fs): a shared folder instead of the
// database, fs_dir or <run>/aggregation_fs.
std::string fs_root(fanout_sdk::Host& host) {
  std::string dir = host.param("fs_dir");
  return dir == "auto" || dir.empty() ? host.run_dir() + "/aggregation_fs" : dir;
}

std::string fs_iteration_dir(fanout_sdk::Host& host, int64_t k) { return fs_root(host) + "/iteration_" + std::to_string(k); }

int run_fs_producer(fanout_context* ctx, const fanout_host_ops* ops) {
  fanout_sdk::Host host(ctx, ops);
  return client_role(host, [&] {
    const size_t bytes = size_t(std::max<int64_t>(4, host.param_int("tensor_bytes")) / 4 * 4);
    const int tensors = int(std::max<int64_t>(1, host.param_int("tensors_per_dataset")));
    std::vector<char> data(bytes * size_t(tensors), char(host.rank()));
    ::mkdir(fs_root(host).c_str(), 0700);
    producer_iterations(host, [&](int64_t k, int64_t i) {
      const std::string dir = fs_iteration_dir(host, k);
      ::mkdir(dir.c_str(), 0700);
      // Written aside, then renamed: the consumer never sees half a file.
      const std::string file = dir + "/aggregation_rank_" + std::to_string(host.rank());
      int64_t t0 = host.now_ns();
      fanout_sdk::write_file_atomic(file, std::string_view(data.data(), data.size()), 0600);
      host.record("put_dataset", i, t0, seconds(t0, host.now_ns()), "s", i < 0);
    });
  });
}

int run_fs_consumer(fanout_context* ctx, const fanout_host_ops* ops) {
  fanout_sdk::Host host(ctx, ops);
  return client_role(host, [&] {
    auto finished = [&](int64_t k) {  // this iteration's files whose rename has happened
      std::vector<std::string> names;
      const std::string dir = fs_iteration_dir(host, k);
      if (DIR* d = ::opendir(dir.c_str())) {
        while (dirent* e = ::readdir(d)) {
          std::string n = e->d_name;
          if (n.rfind("aggregation_rank_", 0) == 0 && n.find(".tmp") == std::string::npos) names.push_back(dir + "/" + n);
        }
        ::closedir(d);
      }
      return names;
    };
    consumer_iterations(
        host,
        [&](int64_t k) {
          std::vector<std::string> files;
          while (int64_t((files = finished(k)).size()) < producer_count(host)) {
            if (host.should_stop()) throw std::runtime_error("stopped while waiting for " + fs_iteration_dir(host, k));
            timespec ts{0, 1000000};
            nanosleep(&ts, nullptr);
          }
          return files;
        },
        [&](int, const std::string& file) {
          size_t bytes = 0;
          std::vector<char> buf(1 << 20);
          if (FILE* f = std::fopen(file.c_str(), "rb")) {
            for (size_t got; (got = std::fread(buf.data(), 1, buf.size(), f)) > 0;) bytes += got;
            std::fclose(f);
          }
          return bytes;
        },
        [&](int64_t k, const std::vector<std::string>& files) {
          for (auto& f : files) ::unlink(f.c_str());
          ::rmdir(fs_iteration_dir(host, k).c_str());
        });
  });
}

// aggregation_scaling_python(_fs): the consumer in Python (SmartSim-Scaling's aggregation_consumer.py), on the
// fanout_tensor_client package; the rank records what it reports and releases the producers.
std::vector<std::string> python_consumer_args(fanout_sdk::Host& host, const std::string& mode) {
  std::vector<std::string> args = client_args(host, mode);
  args.push_back(std::to_string(producer_count(host)));
  args.push_back(std::to_string(std::max<int64_t>(1, host.param_int("client_threads"))));
  return args;
}

int run_python_consumer(fanout_context* ctx, const fanout_host_ops* ops) {
  fanout_sdk::Host host(ctx, ops);
  return client_role(host, [&] {
    const smartsim::ClientOptions db = database_options(host, false);
    smartsim::run_language_client(host, {"python", python_consumer_args(host, "consumer"), &db, nullptr,
                                         [&](int64_t k) { release_producers(host, k); }});
  });
}

int run_fs_python_consumer(fanout_context* ctx, const fanout_host_ops* ops) {
  fanout_sdk::Host host(ctx, ops);
  return client_role(host, [&] {
    std::vector<std::string> args = python_consumer_args(host, "fs_consumer");
    args.push_back(fs_root(host));
    smartsim::run_language_client(host, {"python", args, nullptr, nullptr, [&](int64_t k) { release_producers(host, k); }});
  });
}

// Inference (SmartSim-Scaling's ResNet-50 app): one client per rank; the rank that stores the model (rank 0, or
// colocated the first rank of each node) makes sure the model file exists, stores model and script, and every
// client then times put_tensor -> run_script -> run_model -> unpack_tensor per iteration.
constexpr const char* kModelName = "resnet_model";
constexpr const char* kScriptName = "resnet_script";
constexpr size_t kImage = 224 * 224 * 3, kClasses = 1000;

std::string upper(std::string s) {
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string model_dir(fanout_sdk::Host& host) {
  std::string dir = host.param("model_dir");
  return dir != "auto" && !dir.empty() ? dir : host.experiment_dir() + "/models";
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs fanout-build-model (argv, no shell) unless the model file exists; rebuild_model forces it.
void ensure_model_files(fanout_sdk::Host& host, const std::string& dir, const std::string& device) {
  std::vector<std::string> args = {fanout_sdk::companion_program("fanout-build-model"), "--out", dir, "--device", device.substr(0, 3)};
  if (host.param_bool("rebuild_model")) args.push_back("--force");
  const int64_t t0 = host.now_ns();
  const int rc = fanout_sdk::wait_exit(fanout_sdk::spawn_program(args, false).pid);
  if (rc != 0)
    throw std::runtime_error(args[0] + " exited with status " + std::to_string(rc) + (rc > 128 ? " (128 + the signal that killed it)" : "") +
                             " (its message is above, in this rank's log)");
  host.record("build_model", 0, t0, seconds(t0, host.now_ns()), "s", false);
}

// The model name a client uses: one copy per GPU when num_devices > 1.
std::string model_name(const std::string& device, int64_t index) {
  return device == "CPU" ? kModelName : std::string(kModelName) + ".GPU:" + std::to_string(index);
}

void store_model(fanout_sdk::Host& host, smartsim::Client& client, const std::string& device, int64_t devices) {
  const std::string dir = model_dir(host);
  ensure_model_files(host, dir, device);
  const int64_t t0 = host.now_ns();
  const std::string blob = read_file(dir + "/resnet50." + (device == "CPU" ? "cpu" : "gpu") + ".pt");
  const std::string script = read_file(dir + "/data_processing_script.txt");
  smartsim::ModelOptions options;
  options.batch_size = int(host.param_int("batch_size"));
  for (int64_t d = 0; d < devices; ++d) {
    const std::string on = device == "CPU" ? "CPU" : "GPU:" + std::to_string(d);
    client.set_script(kScriptName + (device == "CPU" ? std::string() : "." + on), on, script, {"pre_process_3ch"});
    client.set_model(model_name(device, d), blob, on, options);
  }
  host.record("set_model", 0, t0, seconds(t0, host.now_ns()), "s", false);
}

int run_inference(fanout_context* ctx, const fanout_host_ops* ops, bool colocated) {
  fanout_sdk::Host host(ctx, ops);
  return client_role(host, [&] {
    if (colocated) pin_app_cpus(host);
    auto client = timed_client(host, database_options(host, colocated));
    const std::string device = upper(host.param("device"));
    if (device != "CPU" && device != "GPU") throw std::runtime_error("device: " + device + " is neither CPU nor GPU");
    const int64_t devices = device == "CPU" ? 1 : std::max<int64_t>(1, host.param_int("num_devices"));
    const int64_t per_node = std::max<int64_t>(1, host.param_int("clients_per_node"));
    const bool stores = colocated ? host.rank() % per_node == 0 : host.rank() == 0;
    if (stores) store_model(host, *client, device, devices);
    const std::string model = model_name(device, host.rank() % devices);
    const std::string script = kScriptName + (device == "CPU" ? std::string() : ".GPU:" + std::to_string(host.rank() % devices));
    if (!client->poll_model(model, 100, kSetupTimeoutMs / 100 * 5) || !client->poll_model(script, 100, 50))
      throw std::runtime_error("the model " + model + " never appeared in the database");
    // Keys on the shard of the model copy they run with (no cross-shard copy).
    const std::string prefix = client->shard_prefix(int(host.rank() % client->shard_count()));
    const std::string r = std::to_string(host.rank());
    const std::string in = prefix + "resnet_input_rank_" + r, pre = prefix + "resnet_processed_rank_" + r,
                      out = prefix + "resnet_output_rank_" + r;
    std::vector<float> image(kImage), result(kClasses);
    uint32_t x = 2463534242u + uint32_t(host.rank());  // xorshift: an image of pixel values 0..255
    for (float& v : image) x ^= x << 13, x ^= x >> 17, x ^= x << 5, v = float(x % 256);
    const int64_t warmup = host.param_int("warmup"), iterations = host.param_int("iterations");
    for (int64_t i = -warmup; i < iterations && !host.should_stop(); ++i) {
      const bool w = i < 0;
      const int64_t t0 = host.now_ns();
      client->put_tensor(in, smartsim::DType::Float, {1, 224, 224, 3}, image.data(), kImage * 4);
      const int64_t t1 = host.now_ns();
      client->run_script(script, "pre_process_3ch", {in}, {pre});
      const int64_t t2 = host.now_ns();
      client->run_model(model, {pre}, {out});
      const int64_t t3 = host.now_ns();
      client->unpack_tensor(out, smartsim::DType::Float, {1, kClasses}, result.data(), kClasses * 4);
      const int64_t t4 = host.now_ns();
      if (i == -warmup && !std::all_of(result.begin(), result.end(), [](float v) { return std::isfinite(v); }))
        throw std::runtime_error("the model returned non-finite logits");
      host.record("put_tensor", i, t0, seconds(t0, t1), "s", w);
      host.record("run_script", i, t1, seconds(t1, t2), "s", w);
      host.record("run_model", i, t2, seconds(t2, t3), "s", w);
      host.record("unpack_tensor", i, t3, seconds(t3, t4), "s", w);
      host.record("loop_time", i, t0, seconds(t0, t4), "s", w);
    }
  });
}

int db_standard(fanout_context* c, const fanout_host_ops* o) { return run_db(c, o, false); }
int db_colocated(fanout_context* c, const fanout_host_ops* o) { return run_db(c, o, true); }
int throughput_standard(fanout_context* c, const fanout_host_ops* o) { return run_throughput(c, o, false); }
int throughput_colocated(fanout_context* c, const fanout_host_ops* o) { return run_throughput(c, o, true); }
int inference_standard(fanout_context* c, const fanout_host_ops* o) { return run_inference(c, o, false); }
int inference_colocated(fanout_context* c, const fanout_host_ops* o) { return run_inference(c, o, true); }

const fanout_role kRoles[] = {
    FANOUT_ROLE("db", "redis-server with the RedisAI tensor module on each database node (a cluster when several)", db_standard),
    FANOUT_ROLE("db_colocated", "one standalone redis-server on each application node", db_colocated),
    FANOUT_ROLE("throughput", "put_tensor + unpack_tensor per iteration against the database (SmartSim-Scaling's throughput app)", throughput_standard),
    FANOUT_ROLE("throughput_colocated", "the same against the database on the client's own node", throughput_colocated),
    FANOUT_ROLE("producer", "aggregation: put a dataset and append it to the iteration's list", run_producer),
    FANOUT_ROLE("consumer", "aggregation: wait for the full list, fetch every dataset with client_threads threads", run_consumer),
    FANOUT_ROLE("fs_producer", "filesystem aggregation: write a dataset file per iteration (atomically)", run_fs_producer),
    FANOUT_ROLE("fs_consumer", "filesystem aggregation: wait for every file, read them with client_threads threads", run_fs_consumer),
    FANOUT_ROLE("consumer_python", "aggregation_scaling_python's consumer: the same in Python (fanout-tensor-client-python)", run_python_consumer),
    FANOUT_ROLE("fs_consumer_python", "aggregation_scaling_python_fs's consumer: the filesystem consumer in Python", run_fs_python_consumer),
    FANOUT_ROLE("inference", "ResNet-50 per iteration: put_tensor, run_script, run_model, unpack_tensor (SmartSim-Scaling's inference app)", inference_standard),
    FANOUT_ROLE("inference_colocated", "the same against the database on the client's own node", inference_colocated),
};

const fanout_step_spec kStandardSteps[] = {FANOUT_STEP_CPUS("db", "{db_nodes}", "1", "disjoint", "{db_cpus}"),
                                           FANOUT_STEP("throughput", "{client_nodes}", "{clients_per_node}", "disjoint")};
const fanout_step_spec kColocatedSteps[] = {FANOUT_STEP("throughput_colocated", "{nodes}", "{clients_per_node}", "disjoint"),
                                            FANOUT_STEP_CPUS("db_colocated", "{nodes}", "1", "colocated", "{db_cpus}")};
// Parameters are per plugin: each experiment pins the ones it does not use to one value.
// An experiment's unused parameters get single defaults (a list would multiply its runs; the loader refuses it).
const fanout_param_default kStandardDefaults[] = {FANOUT_DEFAULT("nodes", "1"), FANOUT_DEFAULT("net_type", "tcp"), FANOUT_DEFAULT("db_tpq", "1"),
                                                  FANOUT_DEFAULT("batch_size", "1")};
const fanout_step_spec kAggregationSteps[] = {FANOUT_STEP_CPUS("db", "{db_nodes}", "1", "disjoint", "{db_cpus}"),
                                              FANOUT_STEP("producer", "{client_nodes}", "{clients_per_node}", "disjoint"),
                                              FANOUT_STEP("consumer", "1", "1", "disjoint")};
const fanout_param_default kAggregationDefaults[] = {FANOUT_DEFAULT("db_nodes", "[16]"), FANOUT_DEFAULT("clients_per_node", "[32]"), FANOUT_DEFAULT("tensors_per_dataset", "[4]"),
                                                     FANOUT_DEFAULT("client_threads", "[32]"), FANOUT_DEFAULT("nodes", "1"), FANOUT_DEFAULT("net_type", "tcp"),
                                                     FANOUT_DEFAULT("db_tpq", "1"), FANOUT_DEFAULT("batch_size", "1")};
const fanout_step_spec kAggregationPythonSteps[] = {FANOUT_STEP_CPUS("db", "{db_nodes}", "1", "disjoint", "{db_cpus}"),
                                                    FANOUT_STEP("producer", "{client_nodes}", "{clients_per_node}", "disjoint"),
                                                    FANOUT_STEP("consumer_python", "1", "1", "disjoint")};
// SmartSim-Scaling's aggregation_scaling_python and _python_fs defaults (driverdataaggregation/main.py).
const fanout_param_default kAggregationPythonDefaults[] = {FANOUT_DEFAULT("db_nodes", "[4,8]"), FANOUT_DEFAULT("db_cpus", "12"), FANOUT_DEFAULT("clients_per_node", "[32]"),
                                                           FANOUT_DEFAULT("client_nodes", "[128]"), FANOUT_DEFAULT("iterations", "1"), FANOUT_DEFAULT("tensor_bytes", "[1024]"),
                                                           FANOUT_DEFAULT("tensors_per_dataset", "[4]"), FANOUT_DEFAULT("client_threads", "[32]"), FANOUT_DEFAULT("nodes", "1"),
                                                           FANOUT_DEFAULT("net_type", "tcp"), FANOUT_DEFAULT("db_tpq", "1"), FANOUT_DEFAULT("batch_size", "1")};
const fanout_step_spec kAggregationPythonFsSteps[] = {FANOUT_STEP("fs_producer", "{client_nodes}", "{clients_per_node}", "disjoint"),
                                                      FANOUT_STEP("fs_consumer_python", "1", "1", "disjoint")};
const fanout_param_default kAggregationPythonFsDefaults[] = {FANOUT_DEFAULT("clients_per_node", "[32]"), FANOUT_DEFAULT("client_nodes", "[24,48]"), FANOUT_DEFAULT("iterations", "20"),
                                                             FANOUT_DEFAULT("tensor_bytes", "[1024]"), FANOUT_DEFAULT("tensors_per_dataset", "[4]"), FANOUT_DEFAULT("client_threads", "[16,32]"),
                                                             FANOUT_DEFAULT("db_nodes", "1"), FANOUT_DEFAULT("db_cpus", "1"), FANOUT_DEFAULT("nodes", "1"),
                                                             FANOUT_DEFAULT("net_type", "tcp"), FANOUT_DEFAULT("db_tpq", "1"), FANOUT_DEFAULT("batch_size", "1"), FANOUT_DEFAULT("languages", "cpp")};
const fanout_step_spec kAggregationFsSteps[] = {FANOUT_STEP("fs_producer", "{client_nodes}", "{clients_per_node}", "disjoint"),
                                                FANOUT_STEP("fs_consumer", "1", "1", "disjoint")};
const fanout_param_default kAggregationFsDefaults[] = {FANOUT_DEFAULT("db_nodes", "1"), FANOUT_DEFAULT("db_cpus", "1"), FANOUT_DEFAULT("clients_per_node", "[32]"),
                                                       FANOUT_DEFAULT("tensors_per_dataset", "[4]"), FANOUT_DEFAULT("client_threads", "[32]"), FANOUT_DEFAULT("nodes", "1"),
                                                       FANOUT_DEFAULT("net_type", "tcp"), FANOUT_DEFAULT("db_tpq", "1"), FANOUT_DEFAULT("batch_size", "1"), FANOUT_DEFAULT("languages", "cpp")};
// Inference: SmartSim-Scaling's defaults (its driver's --help). Its clients are C++ here (languages fixed to cpp).
// The database runs the model: on GPUs, it asks num_devices of them on each of its nodes (one task per node).
#define INFERENCE_DB_GPUS "{num_devices} if device=GPU"
const fanout_step_spec kInferenceSteps[] = {FANOUT_STEP_RESOURCES("db", "{db_nodes}", "1", "disjoint", "{db_cpus}", INFERENCE_DB_GPUS, NULL, NULL, 0u),
                                            FANOUT_STEP("inference", "{client_nodes}", "{clients_per_node}", "disjoint")};
const fanout_param_default kInferenceDefaults[] = {FANOUT_DEFAULT("db_nodes", "[12]"), FANOUT_DEFAULT("db_cpus", "[2]"), FANOUT_DEFAULT("client_nodes", "[12]"),
                                                   FANOUT_DEFAULT("clients_per_node", "[48]"), FANOUT_DEFAULT("batch_size", "[1000]"), FANOUT_DEFAULT("tensor_bytes", "1024"),
                                                   FANOUT_DEFAULT("nodes", "1"), FANOUT_DEFAULT("net_type", "tcp"), FANOUT_DEFAULT("languages", "cpp")};
const fanout_step_spec kInferenceColocatedSteps[] = {FANOUT_STEP("inference_colocated", "{nodes}", "{clients_per_node}", "disjoint"),
                                                     FANOUT_STEP_RESOURCES("db_colocated", "{nodes}", "1", "colocated", "{db_cpus}", INFERENCE_DB_GPUS, NULL, NULL, 0u)};
const fanout_param_default kInferenceColocatedDefaults[] = {FANOUT_DEFAULT("nodes", "[12]"), FANOUT_DEFAULT("clients_per_node", "[18]"), FANOUT_DEFAULT("db_cpus", "[2]"),
                                                            FANOUT_DEFAULT("batch_size", "[1]"), FANOUT_DEFAULT("tensor_bytes", "1024"), FANOUT_DEFAULT("db_nodes", "1"),
                                                            FANOUT_DEFAULT("client_nodes", "1"), FANOUT_DEFAULT("languages", "cpp")};
const fanout_param_default kColocatedDefaults[] = {FANOUT_DEFAULT("db_cpus", "[8]"), FANOUT_DEFAULT("clients_per_node", "[48]"), FANOUT_DEFAULT("db_nodes", "1"), FANOUT_DEFAULT("client_nodes", "1"),
                                                   FANOUT_DEFAULT("db_tpq", "1"), FANOUT_DEFAULT("batch_size", "1")};

// Session names as SmartSim-Scaling's (fanout appends the parameter hash where it appends an id). The database
// is reused where SmartSim-Scaling reuses it: per (db_nodes, db_cpus) for throughput_standard, per db_nodes for
// aggregation_scaling (every other parameter the db role reads is in the key too, so runs that differ in one
// never share a database configured for another); inference_standard starts one per run, as it does.
const char* kDbSharedBy = "db_nodes,db_cpus,db_tpq,db_port,net_ifname";
const char* kThroughputUses = "db_nodes,db_cpus,client_nodes,clients_per_node,tensor_bytes,languages,iterations,warmup,db_port,net_ifname,run_db_as_batch";
const char* kAggregationUses = "db_nodes,db_cpus,client_nodes,clients_per_node,tensor_bytes,tensors_per_dataset,client_threads,languages,iterations,warmup,db_port,net_ifname,run_db_as_batch";
// The filesystem producers write files with no database client: there is no language to choose.
const char* kFsUses = "client_nodes,clients_per_node,tensor_bytes,tensors_per_dataset,client_threads,fs_dir,iterations,warmup";
const fanout_experiment_spec kExperiments[] = {
    FANOUT_EXPERIMENT_USING("throughput_standard", "tensor throughput against a database on its own nodes (SmartSim-Scaling)", FANOUT_ARRAY(kStandardSteps), FANOUT_ARRAY(kStandardDefaults), "throughput-sess-{languages}-N{client_nodes}-T{clients_per_node}-DBN{db_nodes}-DBCPU{db_cpus}-ITER{iterations}-TB{tensor_bytes}", "db", kDbSharedBy, kThroughputUses),
    FANOUT_EXPERIMENT_USING("throughput_scaling", "SmartSim-Scaling's older name of throughput_standard (the same experiment)", FANOUT_ARRAY(kStandardSteps), FANOUT_ARRAY(kStandardDefaults), "throughput-sess-{languages}-N{client_nodes}-T{clients_per_node}-DBN{db_nodes}-DBCPU{db_cpus}-ITER{iterations}-TB{tensor_bytes}", "db", kDbSharedBy, kThroughputUses),
    FANOUT_EXPERIMENT_USING("throughput_colocated", "tensor throughput against a database on every application node", FANOUT_ARRAY(kColocatedSteps), FANOUT_ARRAY(kColocatedDefaults), "throughput-sess-colo-{languages}-N{nodes}-T{clients_per_node}-DBCPU{db_cpus}-ITER{iterations}-TB{tensor_bytes}", nullptr, nullptr, "nodes,db_cpus,clients_per_node,tensor_bytes,languages,iterations,warmup,db_port,net_ifname,net_type,pin_app_cpus"),
    FANOUT_EXPERIMENT_USING("aggregation_scaling", "producers put datasets, one consumer gathers them per iteration (SmartSim-Scaling)", FANOUT_ARRAY(kAggregationSteps), FANOUT_ARRAY(kAggregationDefaults), "aggregate-sess-{languages}-N{client_nodes}-T{clients_per_node}-DBN{db_nodes}-ITER{iterations}-TB{tensor_bytes}-TPD{tensors_per_dataset}-CT{client_threads}", "db", kDbSharedBy, kAggregationUses),
    FANOUT_EXPERIMENT_USING("aggregation_scaling_fs", "the same through a shared folder instead of a database", FANOUT_ARRAY(kAggregationFsSteps), FANOUT_ARRAY(kAggregationFsDefaults), "aggregate-sess-fs-cpp-N{client_nodes}-T{clients_per_node}-ITER{iterations}-TB{tensor_bytes}-TPD{tensors_per_dataset}-CT{client_threads}", nullptr, nullptr, kFsUses),
    FANOUT_EXPERIMENT_USING("aggregation_scaling_python", "aggregation with the consumer in Python (SmartSim-Scaling)", FANOUT_ARRAY(kAggregationPythonSteps), FANOUT_ARRAY(kAggregationPythonDefaults), "aggregate-sess-py-{languages}-N{client_nodes}-T{clients_per_node}-DBN{db_nodes}-ITER{iterations}-TB{tensor_bytes}-TPD{tensors_per_dataset}-CT{client_threads}", "db", kDbSharedBy, kAggregationUses),
    FANOUT_EXPERIMENT_USING("aggregation_scaling_python_fs", "filesystem aggregation with the consumer in Python (SmartSim-Scaling)", FANOUT_ARRAY(kAggregationPythonFsSteps), FANOUT_ARRAY(kAggregationPythonFsDefaults), "aggregate-sess-py-fs-N{client_nodes}-T{clients_per_node}-ITER{iterations}-TB{tensor_bytes}-TPD{tensors_per_dataset}-CT{client_threads}", nullptr, nullptr, kFsUses),
    FANOUT_EXPERIMENT_USING("inference_standard", "ResNet-50 inference in a database on its own nodes (SmartSim-Scaling)", FANOUT_ARRAY(kInferenceSteps), FANOUT_ARRAY(kInferenceDefaults), "infer-sess-cpp-N{client_nodes}-T{clients_per_node}-DBN{db_nodes}-DBCPU{db_cpus}-ITER{iterations}-DBTPQ{db_tpq}", nullptr, nullptr, "db_nodes,db_cpus,client_nodes,clients_per_node,iterations,warmup,db_port,net_ifname,run_db_as_batch,db_tpq,batch_size,device,num_devices,rebuild_model,model_dir"),
    FANOUT_EXPERIMENT_USING("inference_colocated", "ResNet-50 inference in a database on every application node", FANOUT_ARRAY(kInferenceColocatedSteps), FANOUT_ARRAY(kInferenceColocatedDefaults), "infer-sess-colo-cpp-N{nodes}-T{clients_per_node}-DBCPU{db_cpus}-ITER{iterations}-DBTPQ{db_tpq}", nullptr, nullptr, "nodes,db_cpus,clients_per_node,iterations,warmup,db_port,net_ifname,net_type,db_tpq,batch_size,device,num_devices,rebuild_model,model_dir,pin_app_cpus"),
};

// Which way each metric is better (a verdict never guesses it) and which are once-per-run setup costs.
const fanout_metric_spec kMetrics[] = {
    FANOUT_SETUP_METRIC("db_start", FANOUT_BETTER_LOWER, "database start until it answers"),
    FANOUT_SETUP_METRIC("cluster_create", FANOUT_BETTER_LOWER, "Redis cluster creation"),
    FANOUT_SETUP_METRIC("db_stop", FANOUT_BETTER_LOWER, "database shutdown"),
    FANOUT_SETUP_METRIC("build_model", FANOUT_BETTER_LOWER, "building the model file"),
    FANOUT_SETUP_METRIC("set_model", FANOUT_BETTER_LOWER, "AI.MODELSTORE of the model"),
    FANOUT_METRIC("main()", FANOUT_BETTER_LOWER, "a client's whole run"),
    FANOUT_METRIC("client()", FANOUT_BETTER_LOWER, "client construction"),
    FANOUT_METRIC("put_tensor", FANOUT_BETTER_LOWER, "one tensor put"),
    FANOUT_METRIC("unpack_tensor", FANOUT_BETTER_LOWER, "one tensor get"),
    FANOUT_METRIC("loop_time", FANOUT_BETTER_LOWER, "one iteration"),
    FANOUT_METRIC("loop_bandwidth", FANOUT_BETTER_HIGHER, "bytes moved both ways per second"),
    FANOUT_METRIC("poll_list", FANOUT_BETTER_LOWER, "polling the aggregation list"),
    FANOUT_METRIC("get_list", FANOUT_BETTER_LOWER, "getting the aggregation list"),
    FANOUT_METRIC("get_list_bandwidth", FANOUT_BETTER_HIGHER, "aggregation bytes per second"),
    FANOUT_METRIC("put_dataset", FANOUT_BETTER_LOWER, "one dataset put"),
    FANOUT_METRIC("append_to_list", FANOUT_BETTER_LOWER, "one list append"),
    FANOUT_METRIC("run_script", FANOUT_BETTER_LOWER, "the pre-processing script"),
    FANOUT_METRIC("run_model", FANOUT_BETTER_LOWER, "one inference"),
};

const fanout_plugin kPlugin = FANOUT_PLUGIN_WITH_METRICS("smartsim", "SmartSim-like database + client benchmarks on Redis with RedisAI's tensor commands", "0.2.0", FANOUT_ARRAY(kParams), FANOUT_ARRAY(kRoles), FANOUT_ARRAY(kExperiments), nullptr, nullptr, nullptr, FANOUT_ARRAY(kMetrics));

}  // namespace

extern "C" FANOUT_PLUGIN_EXPORT const fanout_plugin* fanout_plugin_entry(void) { return &kPlugin; }
