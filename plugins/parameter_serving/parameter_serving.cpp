// Parameter serving (openpsi-project/srl's parameter_serving benchmark): a trainer publishes versioned
// checkpoints every push_frequency seconds, workers pull the newest (filesystem mode) or receive each one
// (multicast mode), record the version they hold every step_frequency seconds, and post their mean to the
// trainer every post_frequency seconds. Staleness is computed per step sample against the trainer's
// publication timeline (versions and seconds), not only as the seed's mean of posts.
//
// Job sequence: fence 1 (trainers published their control address), workers connect and say HELLO, the
// trainer pushes until max_version/max_time, says DONE, publishes its timeline; fence 2; workers compute and
// record staleness. `benchmarks` > 1 runs that many independent trainer+workers groups at once against one
// store (the seed's contention scenario): worker rank r belongs to group r % benchmarks.
#include <arpa/inet.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint_store.h"
#include "control_channel.h"
#include "fanout_sdk.hpp"
#include "multicast.h"
#include "staleness.h"

namespace ps = parameter_serving;

namespace {

constexpr int kSetupTimeoutMs = 120000;
constexpr int kEndTimeoutMs = 7 * 24 * 3600 * 1000;  // the run's wall time ends a stuck job first

const char* const kModes[] = {"filesystem", "multicast"};
const char* const kLogLevels[] = {"DEBUG", "INFO", "WARNING", "ERROR"};
// Bounds and choices are checked by the driver for every value; check() below keeps what spans parameters.
const fanout_param_spec kParams[] = {
    FANOUT_PARAM_ONE_OF("mode", FANOUT_PARAM_STRING, "filesystem", "filesystem (a shared folder) or multicast (UDP multicast of each version)", kModes),
    FANOUT_PARAM_RANGE_FLAGS("push_frequency", FANOUT_PARAM_FLOAT, "0.2", "seconds between two checkpoints of the trainer", "0", NULL, FANOUT_PARAM_MIN_EXCLUSIVE),
    FANOUT_PARAM_RANGE_FLAGS("data_size", FANOUT_PARAM_FLOAT, "10", "checkpoint payload in MB (10^6 bytes)", "0", "64000", FANOUT_PARAM_MIN_EXCLUSIVE),
    FANOUT_PARAM_RANGE_FLAGS("pull_frequency", FANOUT_PARAM_FLOAT, "0.2", "filesystem mode: seconds between two looks for a newer checkpoint", "0", NULL, FANOUT_PARAM_MIN_EXCLUSIVE),
    FANOUT_PARAM_RANGE_FLAGS("post_frequency", FANOUT_PARAM_FLOAT, "2", "seconds between two posts of a worker's mean version to the trainer", "0", NULL, FANOUT_PARAM_MIN_EXCLUSIVE),
    FANOUT_PARAM_RANGE_FLAGS("step_frequency", FANOUT_PARAM_FLOAT, "0.005", "seconds between two samples of the version a worker holds", "0", NULL, FANOUT_PARAM_MIN_EXCLUSIVE),
    FANOUT_PARAM_RANGE("max_version", FANOUT_PARAM_INT, "500", "the trainer stops after this version", "1", NULL),
    FANOUT_PARAM_RANGE_FLAGS("max_time", FANOUT_PARAM_FLOAT, "60", "the trainer stops after this many seconds", "0", NULL, FANOUT_PARAM_MIN_EXCLUSIVE),
    FANOUT_PARAM_RANGE_FLAGS("workers", FANOUT_PARAM_INT, "4", "workers per benchmark", "1", NULL, FANOUT_PARAM_WEAK_SCALING),
    FANOUT_PARAM_RANGE_FLAGS("nworkers_per_node", FANOUT_PARAM_INT, "1", "workers sharing a node (1: one per node, as the seed)", "1", NULL, FANOUT_PARAM_WEAK_SCALING),
    FANOUT_PARAM_ONE_OF("LOGLEVEL", FANOUT_PARAM_STRING, "INFO", "DEBUG, INFO, WARNING or ERROR", kLogLevels),
    FANOUT_PARAM("trial_name", FANOUT_PARAM_STRING, "default", "a label recorded with the run (the seed's trial name)"),
    FANOUT_PARAM_RANGE("benchmarks", FANOUT_PARAM_INT, "1", "concurrent benchmarks (trainer + workers each) sharing one parameter store", "1", NULL),
    FANOUT_PARAM("store_dir", FANOUT_PARAM_STRING, "auto", "filesystem mode: the parameter store folder (auto: <run>/parameter_db; point it at NFS/Lustre)"),
    FANOUT_PARAM_RANGE("keep_versions", FANOUT_PARAM_INT, "3", "filesystem mode: checkpoints kept; older ones are removed", "1", NULL),
    FANOUT_PARAM("fsync", FANOUT_PARAM_BOOL, "false", "filesystem mode: fsync each checkpoint before publishing it"),
    FANOUT_PARAM("mcast_group", FANOUT_PARAM_STRING, "239.255.41.1", "multicast mode: IPv4 group"),
    FANOUT_PARAM_RANGE("mcast_port", FANOUT_PARAM_INT, "30000", "multicast mode: UDP port (benchmark b uses port + b)", "1", "65535"),
    FANOUT_PARAM_RANGE("mcast_ttl", FANOUT_PARAM_INT, "1", "multicast mode: TTL (1 stays on the local network)", "0", "255"),
    FANOUT_PARAM("mcast_interface", FANOUT_PARAM_STRING, "auto", "multicast mode: interface name or IPv4 address (lo, eth0, ...; auto: the host name's address)"),
    FANOUT_PARAM_RANGE("mcast_chunk", FANOUT_PARAM_INT, "0", "multicast mode: payload bytes per datagram (0: the interface MTU's worth)", "0", "65451"),
    FANOUT_PARAM_RANGE("mcast_rate", FANOUT_PARAM_FLOAT, "0", "multicast mode: sender pacing in MB/s (0: unpaced)", "0", NULL),
};

double seconds(int64_t from_ns, int64_t to_ns) { return double(to_ns - from_ns) / 1e9; }

using fanout_sdk::wall_ns;  // the SDK's clocks, as every plugin reads them

void sleep_until(fanout_sdk::Host& host, int64_t due_ns) {
  int64_t now = host.now_ns();
  if (due_ns <= now) return;
  timespec ts{time_t((due_ns - now) / 1000000000), long((due_ns - now) % 1000000000)};
  nanosleep(&ts, nullptr);
}

// Everything a role needs from the parameters, read once.
struct Settings {
  std::string mode;
  double push_s, pull_s, post_s, step_s, max_time_s, mcast_rate;
  uint64_t data_bytes;
  int64_t max_version, workers, per_node, benchmarks, keep, mcast_port, mcast_ttl, mcast_chunk;
  bool fsync;
  int log_level;
  std::string store_dir, mcast_group, mcast_interface;

  explicit Settings(fanout_sdk::Host& h)
      : mode(h.param("mode")),
        push_s(h.param_double("push_frequency")),
        pull_s(h.param_double("pull_frequency")),
        post_s(h.param_double("post_frequency")),
        step_s(h.param_double("step_frequency")),
        max_time_s(h.param_double("max_time")),
        mcast_rate(h.param_double("mcast_rate") * 1e6),
        data_bytes(uint64_t(std::llround(h.param_double("data_size") * 1e6))),
        max_version(h.param_int("max_version")),
        workers(h.param_int("workers")),
        per_node(h.param_int("nworkers_per_node")),
        benchmarks(h.param_int("benchmarks")),
        keep(h.param_int("keep_versions")),
        mcast_port(h.param_int("mcast_port")),
        mcast_ttl(h.param_int("mcast_ttl")),
        mcast_chunk(h.param_int("mcast_chunk")),
        fsync(h.param_bool("fsync")),
        mcast_group(h.param("mcast_group")),
        mcast_interface(h.param("mcast_interface")) {
    const std::string level = h.param("LOGLEVEL");
    log_level = level == "DEBUG" ? FANOUT_LOG_DEBUG : level == "WARNING" ? FANOUT_LOG_WARN : level == "ERROR" ? FANOUT_LOG_ERROR : FANOUT_LOG_INFO;
    // One folder per run and benchmark inside the store, named after the experiment, the sweep and the run
    // (results/<exp>/run-<stamp>/<session>), so that experiments sharing a store_dir never collide, even
    // two with the same parameters.
    const std::filesystem::path run_dir(h.run_dir());
    const std::string run = run_dir.parent_path().parent_path().filename().string() + "." +
                            run_dir.parent_path().filename().string() + "." + run_dir.filename().string();
    const std::string base = h.param("store_dir");
    store_dir = base == "auto" ? h.run_dir() + "/parameter_db" : base + "/" + run;
  }
  std::string store_of(int64_t benchmark) const { return store_dir + "/bench" + std::to_string(benchmark); }
  ps::McastConfig mcast(int64_t benchmark) const {
    ps::McastConfig c;
    c.group = mcast_group;
    c.port = int(mcast_port + benchmark);
    c.ttl = int(mcast_ttl);
    c.interface_ip = fanout_sdk::interface_ipv4(mcast_interface);
    c.chunk_bytes = size_t(mcast_chunk);
    c.rate_bytes_per_s = mcast_rate;
    c.max_bytes = uint64_t(data_bytes);
    return c;
  }
};

void log(fanout_sdk::Host& host, const Settings& s, fanout_log_level level, const std::string& msg) {
  if (int(level) >= s.log_level) host.log(level, msg);
}

uint64_t random_u64() {
  uint64_t v = 0;
  while (getrandom(&v, sizeof v, 0) != sizeof v) {
  }
  return v;
}

// Checkpoint payload: random bytes once, then the version stamped at the front so each version differs.
std::vector<char> make_payload(uint64_t bytes) {
  std::vector<char> data(bytes);
  uint64_t x = random_u64() | 1;
  for (size_t i = 0; i + 8 <= data.size(); i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::memcpy(&data[i], &x, 8);
  }
  return data;
}

void stamp(std::vector<char>& data, uint64_t version) { std::memcpy(data.data(), &version, std::min<size_t>(8, data.size())); }

std::string timeline_key(int64_t b) { return "ps.timeline." + std::to_string(b); }
std::string trainer_key(int64_t b) { return "ps.trainer." + std::to_string(b); }

void create_store_parents(const Settings& s) {
  std::error_code ec;
  std::filesystem::create_directories(s.store_dir, ec);
  if (ec) throw std::runtime_error("cannot create store_dir " + s.store_dir + ": " + ec.message());
  ::chmod(s.store_dir.c_str(), 0700);
}

// ---------------------------------------------------------------------------------------------- trainer

int run_trainer(fanout_context* ctx, const fanout_host_ops* ops) {
  fanout_sdk::Host host(ctx, ops);
  try {
    const Settings s(host);
    const int64_t b = host.rank();
    const bool multicast = s.mode == "multicast";
    std::unique_ptr<ps::CheckpointStore> store;
    std::unique_ptr<ps::McastSender> sender;
    const uint64_t token = random_u64();
    const ps::McastKey key = ps::McastKey::random();  // the datagrams' mac key: to the workers by rendezvous only
    if (multicast) {
      sender = std::make_unique<ps::McastSender>(s.mcast(b), token, key);
    } else {
      create_store_parents(s);
      const uint64_t need = uint64_t(s.keep + 1) * (s.data_bytes + sizeof(ps::CheckpointHeader)) * uint64_t(s.benchmarks);
      if (uint64_t free = ps::free_bytes(s.store_dir); free < need)
        throw std::runtime_error("data_size: " + std::to_string(s.keep + 1) + " checkpoints of " + std::to_string(s.data_bytes) +
                                 " bytes per benchmark need " + std::to_string(need) + " bytes but " + s.store_dir + " has " +
                                 std::to_string(free) + " free");
      store = std::make_unique<ps::CheckpointStore>(s.store_of(b), int(s.keep), s.fsync);
    }
    const std::string channel = fanout_sdk::channel_token();
    ps::ControlServer control(fanout_sdk::node_ipv4(), channel);
    if (!host.put(trainer_key(b), fanout_sdk::node_ipv4() + " " + std::to_string(control.port()) + " " + std::to_string(token) + " " + channel + " " + key.hex()))
      return 2;
    if (!host.fence(kSetupTimeoutMs)) return 3;

    // Every worker of this benchmark has joined (multicast group, control connection) before version 1.
    std::vector<ps::ControlMessage> msgs;
    const int64_t setup_until = host.now_ns() + int64_t(kSetupTimeoutMs) * 1000000;
    while (int64_t(control.hellos()) < s.workers) {
      if (host.now_ns() > setup_until || host.should_stop())
        throw std::runtime_error("only " + std::to_string(control.hellos()) + " of " + std::to_string(s.workers) + " workers connected");
      control.poll_messages(100, msgs);
    }
    log(host, s, FANOUT_LOG_INFO, "benchmark " + std::to_string(b) + ": " + std::to_string(s.workers) + " workers ready, mode " + s.mode);

    std::vector<char> payload = make_payload(s.data_bytes);
    std::vector<ps::Publication> timeline;
    uint64_t version = 0;
    auto on_posts = [&](std::vector<ps::ControlMessage>& in) {
      for (auto& m : in) {
        // A post that cannot be a worker's of this benchmark (index, a mean outside the versions published) is
        // dropped: the control channel is authenticated, but a sample must never be made up.
        const bool plausible = int64_t(m.worker) < s.workers && std::isfinite(m.mean_version) && m.mean_version >= 0 &&
                               m.mean_version <= double(version);
        if (m.type == ps::kPost && m.count > 0 && plausible)  // the seed's staleness: current version - a worker's mean
          host.record("posted_staleness", int64_t(m.worker), host.now_ns(), double(version) - m.mean_version, "versions", false);
      }
      in.clear();
    };
    on_posts(msgs);
    const int64_t t0 = host.now_ns();
    const int64_t period = int64_t(s.push_s * 1e9), end = t0 + int64_t(s.max_time_s * 1e9);
    while (int64_t(version) < s.max_version && !host.should_stop()) {
      const int64_t due = t0 + int64_t(version) * period;  // a fixed schedule: a slow push does not shift later ones
      if (due >= end) break;
      for (int64_t now; (now = host.now_ns()) < due;) {
        control.poll_messages(int(std::max<int64_t>(1, (due - now) / 1000000)), msgs);
        on_posts(msgs);
      }
      const uint64_t v = version + 1;
      stamp(payload, v);
      const int64_t start = host.now_ns();
      const size_t bytes = multicast ? sender->send(v, payload) : store->publish(v, payload, wall_ns());
      const int64_t done = host.now_ns();
      timeline.push_back({v, wall_ns()});
      version = v;
      host.record("push_time", int64_t(v), start, seconds(start, done), "s", false);
      host.record("push_bandwidth", int64_t(v), start, double(bytes) / std::max(1e-9, seconds(start, done)), "bytes/s", false);
      log(host, s, FANOUT_LOG_DEBUG, "pushed version " + std::to_string(v) + " in " + std::to_string(seconds(start, done)) + " s");
    }
    control.send_done();
    // Take the workers' last posts; they close their connection when they have stopped.
    const int64_t drain_until = host.now_ns() + int64_t(std::max(10.0, 4 * s.post_s) * 1e9);
    while (control.open_connections() > 0 && host.now_ns() < drain_until) {
      control.poll_messages(50, msgs);
      on_posts(msgs);
      if (control.open_connections() > 0) control.send_done();  // late-accepted connections hear it too
    }
    host.record("versions_published", 0, t0, double(version), "versions", false);
    log(host, s, FANOUT_LOG_INFO, "benchmark " + std::to_string(b) + ": published " + std::to_string(version) + " versions");
    if (!host.put(timeline_key(b), ps::encode_timeline(timeline))) return 2;
    if (!host.fence(kEndTimeoutMs)) return 3;
    if (store) {
      std::filesystem::remove_all(store->dir());
      ::rmdir(s.store_dir.c_str());  // the run's folder in the store goes with its last benchmark
    }
    return 0;
  } catch (const std::exception& e) {
    host.log(FANOUT_LOG_ERROR, e.what());
    return 1;
  }
}

// ---------------------------------------------------------------------------------------------- worker

// What a worker held over time and what it received, filled by its pulling or receiving thread.
struct Held {
  std::atomic<uint64_t> version{0};
  std::mutex mu;
  struct Receipt {
    uint64_t version;
    int64_t t_ns;
    double seconds;  // pull time, or multicast receive time (first to last chunk)
    uint64_t bytes;
  };
  std::vector<Receipt> receipts;
  uint64_t torn = 0;
  void got(uint64_t v, int64_t t_ns, double secs, uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu);
    receipts.push_back({v, t_ns, secs, bytes});
    version = v;
  }
};

// Filesystem mode: every pull_frequency, read the newest checkpoint when it is newer than the one held.
void pull_loop(fanout_sdk::Host& host, const Settings& s, const ps::CheckpointStore& store, Held& held, const std::atomic<bool>& stop) {
  std::vector<char> payload;
  ps::CheckpointHeader header{};
  const int64_t period = int64_t(s.pull_s * 1e9);
  for (int64_t due = host.now_ns(); !stop; due += period) {
    sleep_until(host, due);
    const int64_t start = host.now_ns();
    for (int attempt = 0; attempt < 3; ++attempt) {  // a version removed between listing and opening: look again
      const uint64_t newest = store.newest_version();
      if (newest <= held.version) break;
      ps::ReadStatus st = store.read(newest, payload, header);
      if (st == ps::ReadStatus::Gone) continue;
      if (st == ps::ReadStatus::Torn) {
        std::lock_guard<std::mutex> lock(held.mu);
        ++held.torn;
        break;
      }
      held.got(newest, start, seconds(start, host.now_ns()), sizeof header + payload.size());
      break;
    }
  }
}

std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find(' ', i);
    out.push_back(text.substr(i, j == std::string::npos ? std::string::npos : j - i));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return out;
}

int run_worker(fanout_context* ctx, const fanout_host_ops* ops) {
  fanout_sdk::Host host(ctx, ops);
  try {
    const Settings s(host);
    const int64_t b = host.rank() % s.benchmarks, index = host.rank() / s.benchmarks;
    if (!host.fence(kSetupTimeoutMs)) return 3;
    if (index >= s.workers) {  // a spare slot of the last node (workers not a multiple of nworkers_per_node)
      return host.fence(kEndTimeoutMs) ? 0 : 3;
    }
    std::string address;
    if (!host.get(trainer_key(b), address, kSetupTimeoutMs)) throw std::runtime_error("the trainer never published its address");
    auto w = words(address);
    const auto key = w.size() == 5 ? ps::McastKey::from_hex(w[4]) : std::nullopt;
    if (!key) throw std::runtime_error("malformed trainer address (ip port token channel key expected)");
    const uint64_t token = std::stoull(w[2]);

    Held held;
    std::atomic<bool> stop{false};
    std::unique_ptr<ps::McastReceiver> receiver;
    std::unique_ptr<ps::CheckpointStore> store;
    std::thread puller;
    if (s.mode == "multicast") {
      receiver = std::make_unique<ps::McastReceiver>(s.mcast(b), token, *key, [&](const ps::McastVersion& v) {
        held.got(v.version, v.first_chunk_ns, seconds(v.first_chunk_ns, v.last_chunk_ns), v.bytes);
      });
    } else {
      store = std::make_unique<ps::CheckpointStore>(s.store_of(b), int(s.keep), false);
      puller = std::thread([&] { pull_loop(host, s, *store, held, stop); });
    }
    ps::ControlClient control(w[0], std::stoi(w[1]), w[3], kSetupTimeoutMs);
    control.send({ps::kHello, uint32_t(index), 0, 0});

    // Steps: the version held, sampled on a fixed schedule; posts of the mean every post_frequency.
    struct Step {
      int64_t t_ns, wall;
      uint64_t held;
    };
    std::vector<Step> steps;
    double post_sum = 0;
    uint64_t post_n = 0;
    const int64_t step_period = int64_t(s.step_s * 1e9), post_period = int64_t(s.post_s * 1e9);
    const int64_t t0 = host.now_ns();
    const int64_t give_up = t0 + int64_t((s.max_time_s + 60) * 1e9);  // the trainer stops by max_time
    int64_t next_post = t0 + post_period;
    auto post = [&] {
      if (post_n) control.send({ps::kPost, uint32_t(index), post_sum / double(post_n), post_n});
      post_sum = 0, post_n = 0;
    };
    for (int64_t due = t0; !control.trainer_done(); due += step_period) {
      if (host.should_stop()) throw std::runtime_error("stopped before the trainer finished");
      if (host.now_ns() > give_up) throw std::runtime_error("the trainer did not finish within max_time + 60 s");
      sleep_until(host, due);
      const int64_t now = host.now_ns();
      const uint64_t v = held.version;
      steps.push_back({now, wall_ns(), v});
      if (v) post_sum += double(v), ++post_n;
      if (now >= next_post) post(), next_post += post_period;
    }
    stop = true;
    if (puller.joinable()) puller.join();
    ps::McastCounts counts;
    if (receiver) counts = receiver->stop();
    post();
    control.close();

    if (!host.fence(kEndTimeoutMs)) return 3;
    std::string encoded;
    if (!host.get(timeline_key(b), encoded, kSetupTimeoutMs)) throw std::runtime_error("the trainer's timeline never arrived");
    const auto timeline = ps::decode_timeline(encoded);
    std::vector<ps::StepSample> samples;
    for (auto& st : steps) samples.push_back({st.wall, st.held});
    const auto staleness = ps::staleness_of(timeline, samples);
    for (size_t i = 0; i < steps.size(); ++i) {
      const bool warmup = steps[i].held == 0;  // before the first version arrived: nothing to be stale about
      host.record("staleness", int64_t(i), steps[i].t_ns, double(staleness[i].versions), "versions", warmup);
      host.record("staleness_time", int64_t(i), steps[i].t_ns, staleness[i].seconds, "s", warmup);
    }
    const char* time_metric = receiver ? "receive_time" : "pull_time";
    const char* bw_metric = receiver ? "receive_bandwidth" : "pull_bandwidth";
    for (auto& r : held.receipts) {
      host.record(time_metric, int64_t(r.version), r.t_ns, r.seconds, "s", false);
      if (r.seconds > 0) host.record(bw_metric, int64_t(r.version), r.t_ns, double(r.bytes) / r.seconds, "bytes/s", false);
    }
    host.record("versions_received", 0, t0, double(held.receipts.size()), "versions", false);
    host.record("torn_reads", 0, t0, double(held.torn + counts.corrupt), "count", false);
    if (receiver) {
      host.record("mcast_chunks_lost", 0, t0, double(counts.chunks_lost), "count", false);
      host.record("mcast_versions_lost", 0, t0, double(counts.versions_lost), "versions", false);
      // Datagrams with the benchmark's token that the trainer did not send (dropped): someone else on the group.
      host.record("mcast_forged", 0, t0, double(counts.forged), "count", false);
      if (counts.forged) log(host, s, FANOUT_LOG_WARN, std::to_string(counts.forged) + " forged datagrams on " + s.mcast(b).group + " were dropped");
    }
    log(host, s, FANOUT_LOG_INFO, "worker " + std::to_string(index) + " of benchmark " + std::to_string(b) + ": " +
                                      std::to_string(held.receipts.size()) + " versions received, " + std::to_string(steps.size()) +
                                      " steps" + (receiver ? ", " + std::to_string(counts.chunks_lost) + " chunks lost" : ""));
    return 0;
  } catch (const std::exception& e) {
    host.log(FANOUT_LOG_ERROR, e.what());
    return 1;
  }
}

// ---------------------------------------------------------------------------------------------- checks

int check_values(const char* const* names, const char* const* values, uint32_t n, char* err, size_t err_len) {
  std::map<std::string, std::string> p;
  for (uint32_t i = 0; i < n; ++i) p[names[i]] = values[i];
  auto fail = [&](const std::string& why) {
    std::snprintf(err, err_len, "%s", why.c_str());
    return 1;
  };
  const double bytes = std::stod(p["data_size"]) * 1e6;
  if (p["mode"] == "multicast") {
    in_addr a{};
    if (inet_pton(AF_INET, p["mcast_group"].c_str(), &a) != 1 || (ntohl(a.s_addr) >> 28) != 0xE)
      return fail("mcast_group must be an IPv4 multicast address (224.0.0.0/4), got '" + p["mcast_group"] + "'");
    if (std::stoll(p["mcast_port"]) < 1 || std::stoll(p["mcast_port"]) + std::stoll(p["benchmarks"]) > 65536)
      return fail("mcast_port must leave room for one port per benchmark below 65536, got " + p["mcast_port"]);
  } else if (p["store_dir"] != "auto") {
    // The driver usually sees the same shared file system as the nodes; the trainer checks again at run time.
    const double need = double(std::stoll(p["keep_versions"]) + 1) * bytes * double(std::stoll(p["benchmarks"]));
    const uint64_t free = ps::free_bytes(p["store_dir"]);
    if (double(free) < need)
      return fail("data_size " + p["data_size"] + " MB: " + p["keep_versions"] + "+1 checkpoints x " + p["benchmarks"] +
                  " benchmarks need " + std::to_string(uint64_t(need)) + " bytes but store_dir " + p["store_dir"] + " has " +
                  std::to_string(free) + " free");
  }
  return 0;
}

// Nothing may escape through the C ABI.
int check(const char* const* names, const char* const* values, uint32_t n, char* err, size_t err_len) {
  try {
    return check_values(names, values, n, err, err_len);
  } catch (const std::exception& e) {
    std::snprintf(err, err_len, "cannot check the parameters: %s", e.what());
    return 1;
  }
}

const fanout_role kRoles[] = {
    FANOUT_ROLE("trainer", "publishes a checkpoint of data_size MB every push_frequency s (one rank per concurrent benchmark)", run_trainer),
    FANOUT_ROLE("worker", "pulls or receives the newest checkpoint, samples the version held every step_frequency s", run_worker),
};

// One trainer node (the seed pins it); workers on nodes of their own, nworkers_per_node each.
const fanout_step_spec kSteps[] = {FANOUT_STEP("trainer", "1", "{benchmarks}", "disjoint"),
                                   FANOUT_STEP("worker", "{workers/nworkers_per_node}", "{nworkers_per_node*benchmarks}", "disjoint")};

const fanout_experiment_spec kExperiments[] = {
    FANOUT_EXPERIMENT("parameter_serving", "trainer publishes versioned checkpoints, workers pull or receive them: staleness (openpsi srl)", FANOUT_ARRAY(kSteps), FANOUT_NO_ARRAY, nullptr, nullptr, nullptr),
};

// Which way each metric is better (a verdict never guesses it) and which are once-per-run setup costs.
const fanout_metric_spec kMetrics[] = {
    FANOUT_METRIC("posted_staleness", FANOUT_BETTER_LOWER, "a worker's mean version lag"),
    FANOUT_METRIC("push_time", FANOUT_BETTER_LOWER, "one checkpoint publish"),
    FANOUT_METRIC("push_bandwidth", FANOUT_BETTER_HIGHER, "publish bytes per second"),
    FANOUT_METRIC("versions_published", FANOUT_BETTER_NONE, "versions the trainer published"),
    FANOUT_METRIC("staleness", FANOUT_BETTER_LOWER, "versions behind the trainer"),
    FANOUT_METRIC("staleness_time", FANOUT_BETTER_LOWER, "seconds behind the trainer"),
    FANOUT_METRIC("receive_time", FANOUT_BETTER_LOWER, "one version received (multicast)"),
    FANOUT_METRIC("receive_bandwidth", FANOUT_BETTER_HIGHER, "received bytes per second"),
    FANOUT_METRIC("pull_time", FANOUT_BETTER_LOWER, "one version pulled"),
    FANOUT_METRIC("pull_bandwidth", FANOUT_BETTER_HIGHER, "pulled bytes per second"),
    FANOUT_METRIC("versions_received", FANOUT_BETTER_NONE, "versions a worker held"),
    FANOUT_METRIC("torn_reads", FANOUT_BETTER_LOWER, "reads of a half-written version"),
    FANOUT_METRIC("mcast_chunks_lost", FANOUT_BETTER_LOWER, "multicast chunks lost"),
    FANOUT_METRIC("mcast_versions_lost", FANOUT_BETTER_LOWER, "multicast versions lost"),
    FANOUT_METRIC("mcast_forged", FANOUT_BETTER_NONE, "forged datagrams refused"),
};

const fanout_plugin kPlugin = FANOUT_PLUGIN_WITH_METRICS("parameter_serving", "checkpoint staleness between a trainer and its workers, filesystem or multicast", "0.1.0", FANOUT_ARRAY(kParams), FANOUT_ARRAY(kRoles), FANOUT_ARRAY(kExperiments), nullptr, nullptr, check, FANOUT_ARRAY(kMetrics));

}  // namespace

extern "C" FANOUT_PLUGIN_EXPORT const fanout_plugin* fanout_plugin_entry(void) { return &kPlugin; }
