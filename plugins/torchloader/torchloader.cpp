// torchloader (A-Dloader) on fanout: concurrent training applications whose data-loading workers are
// allocated by the Master (TPM + WAA), on a real cluster.
//   master  (1 rank, on the first node beside its agent as the seed; torchloader_master_apart: its own node): the Submitter and Scheduler. Listens on TCP, waits for every node to register,
//           launches applications at their arrival times, reallocates workers by mode, records per application
//           throughput over time, workers over time, completion times, and the makespan.
//   node    (1 rank per node): the Worker and Application Master of the node. Registers with the Master, spawns
//           fanout-torchloader-train processes, pauses them (SIGUSR1: checkpoint at the current iteration) and
//           resumes them with a new worker count, or resizes their loaders in place (SIGRTMIN+1 with the count,
//           resize=live), relays their heartbeats.
//   profile (1 rank): the TPM's profiling runs; fits and writes the model file the master reads.
// Messages (text lines, line_channel.h):  node -> master: REGISTER node cores ip | HB app proc iter samples/s
//   iter_s loader_wait_s loader_workers | LISTENING app 0 port | PAUSED app proc iter | FINISHED app proc iter seconds |
//   FAILED app proc why...     master -> node: LAUNCH|RESUME app proc workers arch depth batch iterations world
//   address | PAUSE app proc | RESIZE app proc workers (resize=live: the loader changes in place) | EXIT
// A multi-node application's processes average gradients through its process 0 (gradient_exchange.h): process 0
// starts first and says where it listens (LISTENING), then the others start with that address.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>

#include "agent_message.h"
#include "fanout_sdk.hpp"
#include "gradient_exchange.h"
#include "line_channel.h"
#include "scheduler.h"
#include "shared_device.h"

namespace torchloader {
namespace {

constexpr int kSetupTimeoutMs = 120000;

// The seed's workload (README of torchloader): three 2-node applications arriving together.
constexpr char kSeedWorkload[] =
    "arch,depth,batch,workers,output_folder,master,port,arrival_time,cuda_device,start_iter,start_epoch,end_iter,end_epoch,node_size\n"
    "resnet, 10, 512, 16, \"test-48worker-2node-mod3\",d3093, 12448, 1, [\"0 1\" \"0 1\"], 0, 1, 500, 1, 2\n"
    "vgg, 11, 512, 16, \"test-48worker-2node-mod3\",d3093, 23448, 1, [\"1 2\" \"1 2\"], 0, 1, 500, 1, 2\n"
    "googlenet, 1, 512, 16, \"test-48worker-2node-mod3\",d3093, 58448,  1, [\"0 2\" \"0 2\"], 0, 1, 500, 1, 2\n";

const char* const kModes[] = {"1", "2", "3"};
const char* const kDevices[] = {"auto", "cpu", "cuda", "emulated"};
const char* const kWorkloadWords[] = {"seed"};
const char* const kTpmWords[] = {"auto"};
const char* const kLoaders[] = {"real", "emulated"};
const char* const kResizings[] = {"restart", "live"};
const fanout_param_spec kParams[] = {
    FANOUT_PARAM_ONE_OF("workload", FANOUT_PARAM_PATH, "seed", "workload CSV file (torchloader's columns), or seed: the seed's 3 applications", kWorkloadWords),
    FANOUT_PARAM_ONE_OF("mode", FANOUT_PARAM_INT, "[1,2,3]", "1 even split of the cores, fixed; 2 reallocate by WAA on arrivals; 3 on arrivals and completions", kModes),
    FANOUT_PARAM_RANGE_FLAGS("nodes", FANOUT_PARAM_INT, "2", "nodes running a Worker + Application Master", "1", NULL, FANOUT_PARAM_STRONG_SCALING),
    FANOUT_PARAM_RANGE_FLAGS("cores", FANOUT_PARAM_INT, "0", "data-loading cores per node for WAA (0: the node's CPUs)", "0", NULL, FANOUT_PARAM_STRONG_SCALING),
    FANOUT_PARAM_RANGE("max_iterations", FANOUT_PARAM_INT, "0", "cap on each application's iterations (0: the workload's)", "0", NULL),
    FANOUT_PARAM_RANGE("max_batch", FANOUT_PARAM_INT, "0", "cap on each application's batch (0: the workload's)", "0", NULL),
    FANOUT_PARAM_RANGE("cost", FANOUT_PARAM_INT, "64", "CPU work per loaded sample (blur passes): at 64 one loader thread about feeds one training process", "1", NULL),
    FANOUT_PARAM_RANGE_FLAGS("threads", FANOUT_PARAM_INT, "1", "compute threads per training process", "1", NULL, FANOUT_PARAM_STRONG_SCALING),
    {sizeof(fanout_param_spec), FANOUT_PARAM_PATH, "tpm", "auto", "TPM file (auto: <experiment>/tpm.json), read when it exists, else profiled first and written",
     FANOUT_ARRAY(kTpmWords), FANOUT_PARAM_PATH_OUTPUT, NULL, NULL},
    FANOUT_PARAM_RANGE("profile_iterations", FANOUT_PARAM_INT, "3", "iterations per profiling run", "1", NULL),
    FANOUT_PARAM_ONE_OF("device", FANOUT_PARAM_STRING, "auto", "where training computes: auto (CUDA if libtorch has it, else CPU), cpu, cuda, or emulated: a simulated accelerator per training process whose iterations take launch + 6 x MACs x batch / tflops on a timer, using no CPU core", kDevices),
    FANOUT_PARAM_RANGE_FLAGS("device_tflops", FANOUT_PARAM_FLOAT, "10", "emulated device: sustained 10^12 FLOP/s", "0", NULL, FANOUT_PARAM_MIN_EXCLUSIVE),
    FANOUT_PARAM_RANGE("device_launch_us", FANOUT_PARAM_FLOAT, "200", "emulated device: fixed microseconds per iteration (launches, synchronisation)", "0", NULL),
    FANOUT_PARAM_ONE_OF("resize", FANOUT_PARAM_STRING, "restart", "how a running application gets a new worker count: restart (the seed: pause, checkpoint, relaunch; only where it pays) or live (fanout: its loaders grow or shrink in place, no pause)", kResizings),
    FANOUT_PARAM_ONE_OF("loader", FANOUT_PARAM_STRING, "real", "real: loader workers do the CPU work; emulated: each delivers batches at the rate the TPM profiled for its application (a/workers + b seconds per sample), on timers", kLoaders),
    FANOUT_PARAM_RANGE("loader_error", FANOUT_PARAM_FLOAT, "0", "emulated loader: how wrong the TPM's loader model is: each application's a and b scaled by 1 + e, e drawn per application and coefficient from [-loader_error, loader_error]; WAA still plans with the model (0: loaders follow it exactly)", "0", "0.9"),
    FANOUT_PARAM_RANGE("loader_error_seed", FANOUT_PARAM_INT, "1", "emulated loader: the seed of loader_error's draws (the same draws on every node and restart)", "0", NULL),
    FANOUT_PARAM_RANGE("loader_contention", FANOUT_PARAM_FLOAT, "0", "emulated loader: how much slower every worker loads when all loader cores of its node are busy (a batch takes 1 + c times its time alone; linear in the workers loading on the node, across applications); WAA still plans without it (0: none)", "0", "10"),
    FANOUT_PARAM_RANGE("loader_noise", FANOUT_PARAM_FLOAT, "0", "emulated loader: coefficient of variation of each batch's time (a lognormal factor of mean 1 per batch)", "0", "2"),
};

std::vector<AppSpec> load_workload(fanout_sdk::Host& host) {
  const std::string file = host.param("workload");
  std::string text = kSeedWorkload;
  if (file != "seed") {
    std::ifstream f(file);
    if (!f) throw std::runtime_error("workload: cannot read " + file);
    text.assign(std::istreambuf_iterator<char>(f), {});
  }
  std::vector<AppSpec> apps = parse_workload(text, file == "seed" ? "seed workload" : file);
  const int64_t max_it = host.param_int("max_iterations"), max_batch = host.param_int("max_batch");
  for (auto& a : apps) {
    if (max_it > 0 && total_iterations(a) > max_it) a.end_iter = int(max_it + a.start_iter), a.end_epoch = a.start_epoch;
    if (max_batch > 0 && a.batch > max_batch) a.batch = int(max_batch);
  }
  return apps;
}

// "KEY a=1 b=2" -> value of `name`, or fallback.
double field(const std::string& line, const std::string& name, double fallback = 0) {
  const auto at = line.find(" " + name + "=");
  return at == std::string::npos ? fallback : std::atof(line.c_str() + at + name.size() + 2);
}

std::vector<std::string> train_args(fanout_sdk::Host& host, const std::string& arch, int depth, int batch, int workers,
                                    int64_t iterations) {
  return {fanout_sdk::companion_program("fanout-torchloader-train"), "--arch", arch, "--depth", std::to_string(depth), "--batch", std::to_string(batch),
          "--workers", std::to_string(workers), "--end_iter", std::to_string(iterations), "--cost",
          std::to_string(host.param_int("cost")), "--threads", std::to_string(host.param_int("threads")),
          "--device", host.param("device"), "--device_tflops", host.param("device_tflops"), "--device_launch_us", host.param("device_launch_us")};
}

// --- TPM: profiling runs, fit, file ---------------------------------------------------------------------

struct AppProfile {
  double compute_s = 0, flops = 0, params = 0;
  LoaderModel loader;
};

// An application's entry in the TPM file: model, depth, batch per process, and for an emulated device its model
// (a real device's compute time is another entry's).
std::string app_key(fanout_sdk::Host& host, const AppSpec& a) {
  std::string key = a.arch + "-" + std::to_string(a.depth) + "-" + std::to_string(a.batch / std::max(1, a.node_size));
  if (host.param("device") == "emulated") key += "@emulated-" + host.param("device_tflops") + "tf-" + host.param("device_launch_us") + "us";
  return key;
}

// PROFILE line of one profiling run.
std::string profile_run(fanout_sdk::Host& host, const AppSpec& a, int batch, int workers) {
  auto args = train_args(host, a.arch, a.depth, batch, workers, 1);
  args.push_back("--profile");
  args.push_back(std::to_string(host.param_int("profile_iterations")));
  fanout_sdk::Child c = fanout_sdk::spawn_program(args, true);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(c.out, buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  ::close(c.out);
  const int rc = fanout_sdk::wait_exit(c.pid);
  const auto at = out.find("PROFILE ");
  if (rc != 0 || at == std::string::npos) throw std::runtime_error("profiling " + app_key(host, a) + " failed (exit " + std::to_string(rc) + "): " + out);
  return out.substr(at, out.find('\n', at) - at);
}

// A data-parallel profiling run on 2 devices of this node: process 0 first (it says where it listens), then process
// 1; their gradient exchange is what the compute model's (devices-1) x params term fits. PROFILE line of process 0.
std::string profile_run_dp(fanout_sdk::Host& host, const AppSpec& a, int batch) {
  if (!std::getenv(kTokenVariable)) ::setenv(kTokenVariable, fanout_sdk::channel_token().c_str(), 1);
  auto args = train_args(host, a.arch, a.depth, batch, 1, 1);
  args.insert(args.end(), {"--profile", std::to_string(host.param_int("profile_iterations")), "--dp_world", "2"});
  auto first = args, second = args;
  first.insert(first.end(), {"--dp_rank", "0", "--dp_address", "127.0.0.1"});
  fanout_sdk::Child c0 = fanout_sdk::spawn_program(first, true);
  FILE* in = ::fdopen(c0.out, "r");
  std::string out;
  char line[1024];
  int port = 0;
  while (in && !port && std::fgets(line, sizeof line, in)) {
    out += line;
    if (std::strncmp(line, "LISTENING port=", 15) == 0) port = std::atoi(line + 15);
  }
  fanout_sdk::Child c1;
  if (port > 0) {
    second.insert(second.end(), {"--dp_rank", "1", "--dp_address", "127.0.0.1:" + std::to_string(port)});
    c1 = fanout_sdk::spawn_program(second, false);
  }
  while (in && std::fgets(line, sizeof line, in)) out += line;
  if (in) std::fclose(in);
  const int rc0 = fanout_sdk::wait_exit(c0.pid), rc1 = c1.pid > 0 ? fanout_sdk::wait_exit(c1.pid) : -1;
  const auto at = out.find("PROFILE ");
  if (rc0 != 0 || rc1 != 0 || at == std::string::npos)
    throw std::runtime_error("2-device profiling of " + app_key(host, a) + " failed (exits " + std::to_string(rc0) + ", " + std::to_string(rc1) + "): " + out);
  return out.substr(at, out.find('\n', at) - at);
}

// Profiles every distinct application not in `j` yet (compute time at its batch and half of it, loader
// throughput with 1 and 2 workers), fits the TPM's models, and writes them to `path` (write, then rename).
nlohmann::json profile_workload(fanout_sdk::Host& host, const std::vector<AppSpec>& apps, const std::string& path,
                                nlohmann::json j = nlohmann::json::object()) {
  std::vector<std::pair<std::string, ComputeObs>> obs;  // by application key
  for (const auto& a : apps) {
    const std::string key = app_key(host, a);
    if (j.contains("apps") && j["apps"].contains(key)) continue;
    const int batch = std::max(1, a.batch / std::max(1, a.node_size));
    std::vector<std::pair<int, double>> loader_obs;
    AppProfile p;
    for (int workers : {1, 2}) {
      const std::string line = profile_run(host, a, batch, workers);
      loader_obs.push_back({workers, field(line, "loader_samples_per_s")});
      if (workers == 1) p.compute_s = field(line, "compute_s"), p.flops = field(line, "flops"), p.params = field(line, "params");
      host.record(("profile_loader_samples_per_s." + key + ".w" + std::to_string(workers)).c_str(), 0, host.now_ns(),
                  field(line, "loader_samples_per_s"), "samples/s", false);
    }
    const std::string half = profile_run(host, a, std::max(1, batch / 2), 1);
    const double two_devices = field(profile_run_dp(host, a, batch), "compute_s");
    obs.push_back({key, {double(batch), p.flops, p.params, 1, p.compute_s}});
    obs.push_back({key, {double(std::max(1, batch / 2)), p.flops, p.params, 1, field(half, "compute_s")}});
    obs.push_back({key, {double(batch), p.flops, p.params, 2, two_devices}});
    p.loader = fit_loader(loader_obs);
    host.record(("profile_compute_s." + key).c_str(), 0, host.now_ns(), p.compute_s, "s", false);
    host.record(("profile_compute_s_2dev." + key).c_str(), 0, host.now_ns(), two_devices, "s", false);
    j["apps"][key] = {{"compute_s", p.compute_s}, {"compute_s_2dev", two_devices}, {"flops", p.flops}, {"params", p.params},
                      {"loader_a", p.loader.a}, {"loader_b", p.loader.b}};
  }
  try {
    std::vector<ComputeObs> all;
    for (auto& [key, o] : obs) all.push_back(o);
    ComputeModel m = fit_compute(all);
    j["compute_model"] = nlohmann::json::parse(to_json(m, LoaderModel{}));
    j.erase("compute_model_error");
    // How well the fitted model reproduces each application's own measurements: the largest relative error.
    std::map<std::string, double> worst;
    for (auto& [key, o] : obs) {
      const double predicted = m.iteration_seconds(o.batch_per_device, o.flops, o.params, o.devices);
      worst[key] = std::max(worst[key], std::abs(predicted - o.iteration_seconds) / o.iteration_seconds);
    }
    for (auto& [key, err] : worst) {
      j["apps"][key]["fit_error"] = err;
      host.record(("tpm_fit_error." + key).c_str(), 0, host.now_ns(), err, "ratio", false);
    }
  } catch (const std::exception& e) {
    j["compute_model_error"] = e.what();  // too few distinct observations: the measured times are used
  }
  fanout_sdk::write_file_atomic(path, j.dump(2) + "\n");  // checked: a full disk is an error, not a short TPM
  host.log(FANOUT_LOG_INFO, "TPM written to " + path);
  return j;
}

std::string tpm_path(fanout_sdk::Host& host) {
  const std::string p = host.param("tpm");
  return p == "auto" || p.empty() ? host.experiment_dir() + "/tpm.json" : p;
}

// Each application's demand per device from the TPM: compute throughput of one process on a device alone over
// one worker's loader throughput (the reference's rule: floor + 2, the fraction is the overload). Emulated
// devices shared as the workload's cuda_device says divide it by the sharing (the Scheduler, at every event).
std::vector<Demand> demands(fanout_sdk::Host& host, const nlohmann::json& tpm, const std::vector<AppSpec>& apps) {
  std::vector<Demand> out;
  for (size_t i = 0; i < apps.size(); ++i) {
    const AppSpec& a = apps[i];
    const auto& p = tpm.at("apps").at(app_key(host, a));
    LoaderModel loader{p.at("loader_a").get<double>(), p.at("loader_b").get<double>()};
    const double batch = double(a.batch) / std::max(1, a.node_size);
    const double compute = batch / std::max(1e-9, p.at("compute_s").get<double>());
    const double need = compute / std::max(1e-9, loader.samples_per_second(1));
    out.push_back({need, int(std::floor(need)) + 2, need - std::floor(need), compute});
  }
  return out;
}

int run_profile(fanout_context* ctx, const fanout_host_ops* ops) {
  fanout_sdk::Host host(ctx, ops);
  return host.run([&] {
    profile_workload(host, load_workload(host), tpm_path(host));
    return 0;
  });
}

// --- the Master ------------------------------------------------------------------------------------------

class Master {
 public:
  Master(fanout_sdk::Host& host) : host_(host) {}

  int run() {
    if (host_.param("loader") != "emulated" &&
        (host_.param_double("loader_error") > 0 || host_.param_double("loader_noise") > 0 || host_.param_double("loader_contention") > 0))
      throw std::runtime_error("loader_error, loader_noise and loader_contention shape emulated loaders (--loader=emulated); real loaders are what they are");
    apps_ = load_workload(host_);
    if (host_.param("device") == "emulated")  // refused here, not by each trainer once the run is under way
      for (size_t a = 0; a < apps_.size(); ++a)
        for (const auto& node : apps_[a].cuda_device)
          for (int d : node)
            if (d >= SharedDevices::kMaxDevices)
              throw std::runtime_error("application " + std::to_string(a) + " (" + apps_[a].arch + std::to_string(apps_[a].depth) + "): cuda_device " +
                                       std::to_string(d) + " is beyond the emulated devices 0.." + std::to_string(SharedDevices::kMaxDevices - 1));
    // Published before profiling: the nodes connect (and wait) while it runs.
    const std::string token = fanout_sdk::channel_token();
    LineServer server(fanout_sdk::interface_ipv4("auto"), token);
    server_ = &server;
    if (!host_.put("torchloader.master", fanout_sdk::interface_ipv4("auto") + ":" + std::to_string(server.port()) + " " + token))
      throw std::runtime_error("rendezvous put failed");
    // The TPM file, completed by profiling the applications it does not cover yet (another workload or batch).
    const std::string path = tpm_path(host_);
    nlohmann::json tpm = nlohmann::json::object();
    if (std::ifstream f(path); f) {
      try {
        tpm = nlohmann::json::parse(f);
      } catch (const std::exception& e) {
        throw std::runtime_error("tpm: " + path + " is not a TPM file: " + e.what());
      }
    }
    bool covered = tpm.contains("apps");
    for (const auto& a : apps_) covered = covered && tpm["apps"].contains(app_key(host_, a));
    if (!covered) tpm = profile_workload(host_, apps_, path, tpm);
    const int nodes = int(host_.param_int("nodes"));
    int cores = int(host_.param_int("cores"));
    register_nodes(nodes, cores);
    const Mode mode = Mode(host_.param_int("mode"));  // one of 1, 2, 3: the driver checked
    const std::vector<Demand> demand = demands(host_, tpm, apps_);
    const bool shared = host_.param("device") == "emulated";
    for (size_t a = 0; a < demand.size(); ++a) {  // the TPM's need per device, unrounded, with every application in
      const int sharing = shared ? apps_sharing_busiest_device(apps_, a, std::vector<bool>(apps_.size(), true)) : 1;
      host_.record(("demand.app" + std::to_string(a)).c_str(), 0, host_.now_ns(), shared_demand(demand[a], sharing).workers_per_device, "workers", false);
    }
    Scheduler scheduler(apps_, demand, mode, nodes, cores, shared, host_.param("resize") == "live" ? Resizing::Live : Resizing::Restart);
    sched_ = &scheduler;
    t0_ = host_.now_ns();
    while (!scheduler.all_finished()) {
      if (host_.should_stop()) throw std::runtime_error("stopped before every application finished");
      send(scheduler.arrive(now()));
      const double wait = std::min(0.2, std::max(0.0, scheduler.next_arrival() - now()));
      for (const auto& l : server.poll(int(wait * 1000) + 1)) handle_checked(l);
    }
    for (int c : node_conn_) server.send(c, "EXIT");
    if (server.refused()) host_.log(FANOUT_LOG_WARN, std::to_string(server.refused()) + " connection(s) without the job's token were refused");
    report(scheduler);
    return failures_ ? 1 : 0;
  }

 private:
  double now() const { return double(host_.now_ns() - t0_) / 1e9; }

  void register_nodes(int nodes, int& cores) {
    const auto deadline = host_.now_ns() + int64_t(kSetupTimeoutMs) * 1000000;
    std::map<int, int> conn_of;  // node rank -> connection, in whatever order they register
    std::map<int, std::string> ip_of;
    while (int(conn_of.size()) < nodes) {
      if (host_.now_ns() > deadline)
        throw std::runtime_error("only " + std::to_string(conn_of.size()) + " of " + std::to_string(nodes) + " nodes registered");
      for (const auto& l : server_->poll(200)) {
        auto w = words(l.text);
        if (w.size() != 4 || w[0] != "REGISTER") continue;
        const auto node = whole_number(w[1], 0, nodes - 1), node_cores = whole_number(w[2], 1, std::numeric_limits<int>::max());
        if (!node || !node_cores) {
          host_.log(FANOUT_LOG_WARN, "ignored a malformed registration: " + l.text.substr(0, 80));
          continue;
        }
        conn_of[int(*node)] = l.conn;
        ip_of[int(*node)] = w[3];
        if (cores <= 0) cores = int(*node_cores);  // the first node's CPUs when not given
      }
    }
    for (auto [node, conn] : conn_of) node_conn_.push_back(conn), node_ip_.push_back(ip_of[node]);
    host_.log(FANOUT_LOG_INFO, std::to_string(nodes) + " node(s) registered, " + std::to_string(cores) + " data-loading cores each");
  }

  void send(const std::vector<Command>& commands, const std::string& dp_address = "") {
    for (const auto& c : commands) {
      const AppSpec& a = apps_[size_t(c.app)];
      const int world = sched_->processes(c.app);
      std::string msg;
      const std::string id = std::to_string(c.app) + " " + std::to_string(c.process);
      if (c.kind == Command::Kind::Pause) {
        msg = "PAUSE " + id;
        ++pauses_;
      } else if (c.kind == Command::Kind::Resize) {
        ++resizes_;
        record_workers(c.app);
        const auto& held = deferred_[c.app];
        if (std::any_of(held.begin(), held.end(), [&](const Command& d) { return d.process == c.process; }))
          continue;  // not started yet: its launch, once process 0 listens, takes the new count
        msg = "RESIZE " + id + " " + std::to_string(c.workers);
      } else {
        if (world > 1 && c.process > 0 && dp_address.empty()) {
          deferred_[c.app].push_back(c);  // started once process 0 says where it listens
          continue;
        }
        const std::string address = world == 1 ? "-" : c.process == 0 ? node_ip_[size_t(c.node)] : dp_address;
        // The scheduler's count now: a held launch may have been resized (resize=live) while process 0 started.
        msg = std::string(c.kind == Command::Kind::Launch ? "LAUNCH " : "RESUME ") + id + " " + std::to_string(sched_->workers(c.app, c.process)) + " " +
              a.arch + " " + std::to_string(a.depth) + " " + std::to_string(std::max(1, a.batch / world)) + " " +
              std::to_string(total_iterations(a)) + " " + std::to_string(world) + " " + address;
        record_workers(c.app);
      }
      host_.log(FANOUT_LOG_INFO, "t=" + std::to_string(now()) + " " + msg);
      server_->send(node_conn_[size_t(c.node)], msg);
    }
  }

  // Workers of an application over time: the sum over its processes, at the moment it changes.
  void record_workers(int app) {
    int total = 0;
    for (int p = 0; p < sched_->processes(app); ++p) total += sched_->workers(app, p);
    host_.record(("workers.app" + std::to_string(app)).c_str(), changes_[app]++, host_.now_ns(), total, "workers", false);
  }

  // The workers a process's loader reports running, when that changes (after a launch, a resume or a live
  // resize): what the processes did, beside workers.app<a>, what the master asked.
  void record_loader_workers(int app, int proc, int workers) {
    int& last = loader_workers_[{app, proc}];
    if (workers < 1 || workers == last) return;
    last = workers;
    host_.record(("loader_workers.app" + std::to_string(app) + ".p" + std::to_string(proc)).c_str(), loader_changes_[{app, proc}]++,
                 host_.now_ns(), workers, "workers", false);
  }

  // A peer's line that does not parse (agent_message.h), or names an application or process that does not
  // exist, is logged and dropped; it never ends the run.
  void handle_checked(const Line& l) {
    if (l.closed) throw std::runtime_error("a node agent went away before the workload finished");
    const auto m = parse_agent_message(l.text);
    if (!m || size_t(m->app) >= apps_.size() || m->process >= sched_->processes(m->app)) {
      host_.log(FANOUT_LOG_WARN, "ignored a malformed message: " + l.text.substr(0, 80));
      return;
    }
    handle(*m, l.text);
  }

  void handle(const AgentMessage& m, const std::string& text) {
    const int app = m.app, proc = m.process;
    switch (m.kind) {
      case AgentMessage::Kind::Listening: {
        if (proc != 0) return;
        auto deferred = std::move(deferred_[app]);
        deferred_.erase(app);
        send(deferred, node_ip_[size_t(sched_->node(app, 0))] + ":" + std::to_string(m.port));
        break;
      }
      case AgentMessage::Kind::Heartbeat:
        host_.record(("samples_per_s.app" + std::to_string(app)).c_str(), hb_[app]++, host_.now_ns(), m.samples_per_s, "samples/s", false);
        record_loader_workers(app, proc, m.loader_workers);
        break;
      case AgentMessage::Kind::Paused:
        send(sched_->paused(app, proc));
        break;
      case AgentMessage::Kind::Finished:
        // The iteration it stopped at: with pauses and resumes on the way, still the application's last.
        host_.record("finished_iteration", app * 1000 + proc, host_.now_ns(), double(m.iteration), "iteration", false);
        samples_[app] += double(total_iterations(apps_[size_t(app)])) * std::max(1, apps_[size_t(app)].batch / std::max(1, apps_[size_t(app)].node_size));
        send(sched_->finished(app, proc, now()));
        break;
      case AgentMessage::Kind::Failed:
        host_.log(FANOUT_LOG_ERROR, "application " + std::to_string(app) + " process " + std::to_string(proc) + " failed: " + text);
        ++failures_;
        send(sched_->finished(app, proc, now()));
        // Processes waiting for this process 0 to listen will never start: they count as failed too.
        for (const auto& c : std::exchange(deferred_[app], {})) send(sched_->finished(c.app, c.process, now()));
        break;
    }
  }

  // aggregate_throughput: the sum of the applications' training throughputs, each over its own time in the system
  // (arrival to completion), as co-located jobs' throughput is counted (the paper's +23.5 % throughput beside
  // +10 % makespan cannot both be samples over makespan); cluster_throughput: every sample over the makespan.
  void report(const Scheduler& s) {
    double makespan = 0, aggregate = 0, samples = 0;
    for (size_t a = 0; a < apps_.size(); ++a) {
      const double done = s.completed_at(int(a)) - std::min(apps_[a].arrival_time, s.completed_at(int(a)));
      makespan = std::max(makespan, s.completed_at(int(a)));
      aggregate += samples_[int(a)] / std::max(1e-9, done);
      samples += samples_[int(a)];
      host_.record(("completion_s.app" + std::to_string(a)).c_str(), 0, host_.now_ns(), done, "s", false);
    }
    host_.record("makespan", 0, t0_, makespan, "s", false);
    host_.record("aggregate_throughput", 0, t0_, aggregate, "samples/s", false);
    host_.record("cluster_throughput", 0, t0_, samples / std::max(1e-9, makespan), "samples/s", false);
    host_.record("pauses", 0, t0_, pauses_, "count", false);
    host_.record("resizes", 0, t0_, resizes_, "count", false);
    record_loader_error();
  }

  // How far each application's emulated loaders were from the model WAA planned with (loader_error's draws).
  void record_loader_error() {
    const double error = host_.param_double("loader_error");
    if (host_.param("loader") != "emulated" || error <= 0) return;
    std::ifstream f(tpm_path(host_));
    const nlohmann::json tpm = nlohmann::json::parse(f);
    for (size_t a = 0; a < apps_.size(); ++a) {
      const auto& p = tpm.at("apps").at(app_key(host_, apps_[a]));
      const LoaderModel model{p.at("loader_a").get<double>(), p.at("loader_b").get<double>()};
      const LoaderModel real = loader_with_error(model, error, uint64_t(host_.param_int("loader_error_seed")), int(a));
      host_.record(("loader_error_a.app" + std::to_string(a)).c_str(), 0, t0_, model.a > 0 ? real.a / model.a - 1 : 0, "ratio", false);
      host_.record(("loader_error_b.app" + std::to_string(a)).c_str(), 0, t0_, model.b > 0 ? real.b / model.b - 1 : 0, "ratio", false);
    }
  }

  fanout_sdk::Host& host_;
  std::vector<AppSpec> apps_;
  LineServer* server_ = nullptr;
  Scheduler* sched_ = nullptr;
  std::vector<int> node_conn_;
  std::vector<std::string> node_ip_;
  std::map<int, std::vector<Command>> deferred_;  // processes > 0 of multi-node applications, until process 0 listens
  std::map<int, int64_t> hb_, changes_;  // sample numbers of each application's heartbeats and worker changes
  int64_t t0_ = 0;
  std::map<int, double> samples_;  // per application, counted as its processes finish
  int pauses_ = 0, resizes_ = 0, failures_ = 0;
  std::map<std::pair<int, int>, int> loader_workers_, loader_changes_;  // per (app, process)
};

int run_master(fanout_context* ctx, const fanout_host_ops* ops) {
  fanout_sdk::Host host(ctx, ops);
  return host.run([&] { return Master(host).run(); });
}

// --- a node: Worker + Application Master -----------------------------------------------------------------

class NodeAgent {
 public:
  NodeAgent(fanout_sdk::Host& host) : host_(host) {}

  int run() {
    std::string announced;
    if (!host_.get("torchloader.master", announced, kSetupTimeoutMs)) throw std::runtime_error("the master never announced itself");
    const auto space = announced.find(' ');
    if (space == std::string::npos) throw std::runtime_error("the master's announcement has no token: " + announced);
    const std::string token = announced.substr(space + 1);
    // The training processes of a multi-node application present it to each other (gradient_exchange.h);
    // set before any thread starts.
    ::setenv(kTokenVariable, token.c_str(), 1);
    LineClient link(announced.substr(0, space), token, kSetupTimeoutMs);
    link_ = &link;
    if (host_.param("device") == "emulated") {
      apps_ = load_workload(host_);  // each application's devices on this node
      // A fresh device file: a count left by a trainer killed inside a step (an earlier attempt of this run)
      // would slow every later step on that device.
      ::unlink(device_file().c_str());
    }
    ::unlink(loader_file().c_str());  // the same for a count of loading workers (loader_contention)
    ::mkdir((host_.run_dir() + "/checkpoints").c_str(), 0700);
    // The master applies --cores.
    link.send("REGISTER " + std::to_string(host_.rank()) + " " + std::to_string(node_cpus()) + " " + fanout_sdk::interface_ipv4("auto"));
    try {
      for (bool running = true, master_gone = false; running && !master_gone;) {
        for (const auto& line : link.poll(500, master_gone)) {
          auto w = words(line);
          if (w.empty()) continue;
          if (w[0] == "EXIT") running = false;
          else if ((w[0] == "LAUNCH" || w[0] == "RESUME") && w.size() == 10) start(w, w[0] == "RESUME");
          else if (w[0] == "PAUSE" && w.size() == 3) signal(std::stoi(w[1]), std::stoi(w[2]), true, 0);
          else if (w[0] == "RESIZE" && w.size() == 4) signal(std::stoi(w[1]), std::stoi(w[2]), false, std::stoi(w[3]));
        }
      }
    } catch (...) {
      stop_all();  // the reader threads use the link: they end before it does
      throw;
    }
    stop_all();
    return 0;
  }

 private:
  // What the reader thread and the agent share about a training process. A pause or a resize is only signalled
  // once the trainer has printed a line (its handlers are installed by then; before, the signal would kill it):
  // until then it is pending, and deliver() sends what is pending once the process is ready.
  struct Shared {
    std::mutex mu;
    pid_t pid = -1;  // -1 once it has exited
    bool ready = false, pause_pending = false;
    int resize_pending = 0;  // workers, 0: none
  };

  // st.mu held. The resize first: a process told both resumes with its count anyway.
  static void deliver(Shared& st) {
    if (!st.ready || st.pid <= 0) return;
    if (const int workers = std::exchange(st.resize_pending, 0)) {
      union sigval v {};
      v.sival_int = workers;
      if (::sigqueue(st.pid, SIGRTMIN + 1, v) != 0)  // to the node's log (stderr); also called from reader threads
        std::fprintf(stderr, "torchloader node: resize of process %d to %d workers not sent: %s\n", int(st.pid), workers, std::strerror(errno));
    }
    if (std::exchange(st.pause_pending, false)) ::kill(st.pid, SIGUSR1);
  }
  struct Process {
    std::shared_ptr<Shared> state = std::make_shared<Shared>();
    std::thread reader;
  };

  std::string device_file() const { return host_.run_dir() + "/emulated_devices.node" + std::to_string(host_.rank()); }
  std::string loader_file() const { return host_.run_dir() + "/emulated_loaders.node" + std::to_string(host_.rank()); }
  // --cores, or this node's CPUs. The master, without --cores, plans with the first node's CPUs for every node: the
  // same count on nodes alike (the emulated cluster gives --cores).
  int loader_cores() const {
    const int asked = int(host_.param_int("cores"));
    return asked > 0 ? asked : node_cpus();
  }
  static int node_cpus() { return int(std::max<long>(1, ::sysconf(_SC_NPROCESSORS_ONLN))); }

  std::string checkpoint(int app, int proc) const {
    return host_.run_dir() + "/checkpoints/app" + std::to_string(app) + "." + std::to_string(proc) + ".pt";
  }

  // A training process that cannot start is reported FAILED to the master (which decides), not thrown here.
  void start(const std::vector<std::string>& w, bool resume) {
    try {
      start_process(w, resume);
    } catch (const std::exception& e) {
      host_.log(FANOUT_LOG_ERROR, std::string("cannot start a training process: ") + e.what());
      link_->send("FAILED " + w[1] + " " + w[2] + " cannot start: " + e.what());
    }
  }

  void start_process(const std::vector<std::string>& w, bool resume) {
    const int app = std::stoi(w[1]), proc = std::stoi(w[2]);
    auto args = train_args(host_, w[4], std::stoi(w[5]), std::stoi(w[6]), std::stoi(w[3]), std::stoll(w[7]));
    args.insert(args.end(), {"--checkpoint", checkpoint(app, proc), "--seed", std::to_string(app)});
    if (std::stoi(w[8]) > 1) args.insert(args.end(), {"--dp_rank", w[2], "--dp_world", w[8], "--dp_address", w[9]});
    if (resume) args.push_back("--resume");
    if (host_.param("device") == "emulated") {  // the devices the workload gives it on this node, time-sliced
      const auto& devices = apps_.at(size_t(app)).cuda_device;
      if (size_t(proc) < devices.size() && !devices[size_t(proc)].empty()) {
        std::string ids;
        for (int d : devices[size_t(proc)]) ids += (ids.empty() ? "" : ",") + std::to_string(d);
        args.insert(args.end(), {"--device_share", device_file(), "--device_ids", ids});
      }
    }
    if (host_.param("loader") == "emulated") {  // the TPM's loader model of this application (batch per process)
      AppSpec a;
      a.arch = w[4], a.depth = std::stoi(w[5]), a.batch = std::stoi(w[6]), a.node_size = 1;
      std::ifstream f(tpm_path(host_));
      const nlohmann::json tpm = nlohmann::json::parse(f);
      const auto& model = tpm.at("apps").at(app_key(host_, a));
      // What the loaders really do: the model, wrong by up to loader_error (the Master plans with the model).
      const LoaderModel real = loader_with_error({model.at("loader_a").get<double>(), model.at("loader_b").get<double>()},
                                                 host_.param_double("loader_error"), uint64_t(host_.param_int("loader_error_seed")), app);
      args.insert(args.end(), {"--loader_a", nlohmann::json(real.a).dump(), "--loader_b", nlohmann::json(real.b).dump(), "--loader_noise",
                               nlohmann::json(host_.param_double("loader_noise")).dump()});
      if (const double c = host_.param_double("loader_contention"); c > 0)
        args.insert(args.end(), {"--loader_contention", nlohmann::json(c).dump(), "--loader_share", loader_file(), "--loader_cores",
                                 std::to_string(loader_cores())});
    }
    std::lock_guard<std::mutex> g(mu_);
    auto& p = procs_[{app, proc}];
    if (p.reader.joinable()) p.reader.join();  // the paused run's reader has ended
    fanout_sdk::Child c = fanout_sdk::spawn_program(args, true);
    p.state = std::make_shared<Shared>();
    p.state->pid = c.pid;
    const std::string id = std::to_string(app) + " " + std::to_string(proc);
    // Relays the trainer's lines; its exit status decides PAUSED (75), FINISHED (0) or FAILED.
    p.reader = std::thread([this, c, id, st = p.state] {
      FILE* in = ::fdopen(c.out, "r");
      char line[1024];
      std::string last;
      while (in && std::fgets(line, sizeof line, in)) {
        std::string s(line);
        if (!s.empty() && s.back() == '\n') s.pop_back();
        {
          std::lock_guard<std::mutex> g(st->mu);
          if (!st->ready) {
            st->ready = true;
            deliver(*st);
          }
        }
        if (s.rfind("LISTENING ", 0) == 0) link_->send("LISTENING " + id + " " + std::to_string(int(field(s, "port"))));
        if (s.rfind("HEARTBEAT ", 0) == 0)
          link_->send("HB " + id + " " + std::to_string(int64_t(field(s, "iter"))) + " " + std::to_string(field(s, "samples_per_s")) +
                      " " + std::to_string(field(s, "iter_s")) + " " + std::to_string(field(s, "loader_wait_s")) +
                      (s.find(" workers=") == std::string::npos ? "" : " " + std::to_string(int(field(s, "workers")))));
        last = s;
      }
      if (in) std::fclose(in);
      {
        std::lock_guard<std::mutex> g(st->mu);
        st->pid = -1;  // before the reap: a pid must not be signalled once it can be reused
      }
      const int rc = fanout_sdk::wait_exit(c.pid);
      if (rc == 75) link_->send("PAUSED " + id + " " + std::to_string(int64_t(field(last, "iter"))));
      else if (rc == 0) link_->send("FINISHED " + id + " " + std::to_string(int64_t(field(last, "iter"))) + " " + std::to_string(field(last, "seconds")));
      else link_->send("FAILED " + id + " exit " + std::to_string(rc) + " (see the node's log)");
    });
  }

  // A pause (PAUSE) or a new loader size (RESIZE, workers > 0) for a training process of this node: sent now if it
  // is ready, else when it is (deliver); nothing for a process that has exited.
  void signal(int app, int proc, bool pause, int workers) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = procs_.find({app, proc});
    if (it == procs_.end()) return;
    Shared& st = *it->second.state;
    std::lock_guard<std::mutex> l(st.mu);
    if (st.pid <= 0) return;
    st.pause_pending = st.pause_pending || pause;
    if (workers > 0) st.resize_pending = workers;
    deliver(st);
  }

  void stop_all() {
    std::lock_guard<std::mutex> g(mu_);
    for (auto& [key, p] : procs_) {
      {
        std::lock_guard<std::mutex> l(p.state->mu);
        if (p.state->pid > 0) ::kill(p.state->pid, SIGTERM);
      }
      if (p.reader.joinable()) p.reader.join();
    }
  }

  fanout_sdk::Host& host_;
  LineClient* link_ = nullptr;
  std::vector<AppSpec> apps_;  // the workload, for each application's devices on this node
  std::mutex mu_;
  std::map<std::pair<int, int>, Process> procs_;
};

int run_node(fanout_context* ctx, const fanout_host_ops* ops) {
  fanout_sdk::Host host(ctx, ops);
  return host.run([&] { return NodeAgent(host).run(); });
}

const fanout_role kRoles[] = {
    FANOUT_ROLE("master", "the Submitter and Scheduler: arrivals, TPM demands, WAA allocations, pauses and resumes", run_master),
    FANOUT_ROLE("node", "a node's Worker and Application Master: runs, pauses and resumes training processes", run_node),
    FANOUT_ROLE("profile", "TPM profiling runs: compute time per iteration and loader throughput per application", run_profile),
};

// The seed's placement: the master runs beside the first node's agent, on one of the allocated nodes. The older
// layout, the master on a node of its own, stays as torchloader_master_apart.
const fanout_step_spec kSteps[] = {FANOUT_STEP("node", "{nodes}", "1", "disjoint"), FANOUT_STEP("master", "1", "1", "colocated")};
const fanout_step_spec kMasterApartSteps[] = {FANOUT_STEP("master", "1", "1", "disjoint"), FANOUT_STEP("node", "{nodes}", "1", "disjoint")};
const fanout_step_spec kProfileSteps[] = {FANOUT_STEP("profile", "1", "1", "disjoint")};
const fanout_param_default kProfileDefaults[] = {FANOUT_DEFAULT("mode", "1")};

const fanout_experiment_spec kExperiments[] = {
    FANOUT_EXPERIMENT("torchloader", "concurrent training applications with data-loading workers allocated by TPM + WAA (modes 1-3); the master on the first node, as the seed", FANOUT_ARRAY(kSteps), FANOUT_NO_ARRAY, nullptr, nullptr, nullptr),
    FANOUT_EXPERIMENT("torchloader_master_apart", "the same with the master on a node of its own", FANOUT_ARRAY(kMasterApartSteps), FANOUT_NO_ARRAY, nullptr, nullptr, nullptr),
    // Profiling runs each application alone on one process: no modes, nodes or core budget.
    FANOUT_EXPERIMENT_USING("torchloader_profile", "TPM profiling of a workload's applications; writes the model file torchloader reads", FANOUT_ARRAY(kProfileSteps), FANOUT_ARRAY(kProfileDefaults), nullptr, nullptr, nullptr,
                            "workload,max_iterations,max_batch,cost,threads,tpm,profile_iterations,device,device_tflops,device_launch_us"),
};

// Which way each metric is better (a verdict never guesses it) and which are once-per-run setup costs.
const fanout_metric_spec kMetrics[] = {
    FANOUT_SETUP_METRIC("profile_loader_samples_per_s.*", FANOUT_BETTER_HIGHER, "profiled loader rate"),
    FANOUT_SETUP_METRIC("profile_compute_s.*", FANOUT_BETTER_LOWER, "profiled compute time"),
    FANOUT_SETUP_METRIC("profile_compute_s_2dev.*", FANOUT_BETTER_LOWER, "profiled compute time on 2 devices"),
    FANOUT_SETUP_METRIC("tpm_fit_error.*", FANOUT_BETTER_LOWER, "loader model fit error"),
    FANOUT_METRIC("demand.app*", FANOUT_BETTER_NONE, "planned workers per device"),
    FANOUT_METRIC("workers.app*", FANOUT_BETTER_NONE, "workers given"),
    FANOUT_METRIC("loader_workers.app*", FANOUT_BETTER_NONE, "loader workers per process"),
    FANOUT_METRIC("samples_per_s.app*", FANOUT_BETTER_HIGHER, "an application's rate"),
    FANOUT_METRIC("finished_iteration", FANOUT_BETTER_NONE, "iteration reached"),
    FANOUT_METRIC("completion_s.app*", FANOUT_BETTER_LOWER, "an application's completion"),
    FANOUT_METRIC("makespan", FANOUT_BETTER_LOWER, "until the last application ended"),
    FANOUT_METRIC("aggregate_throughput", FANOUT_BETTER_HIGHER, "sum of the applications' rates"),
    FANOUT_METRIC("cluster_throughput", FANOUT_BETTER_HIGHER, "samples over the makespan"),
    FANOUT_METRIC("pauses", FANOUT_BETTER_NONE, "applications paused"),
    FANOUT_METRIC("resizes", FANOUT_BETTER_NONE, "worker resizes"),
    FANOUT_METRIC("loader_error_a.app*", FANOUT_BETTER_NONE, "drawn loader model error (a)"),
    FANOUT_METRIC("loader_error_b.app*", FANOUT_BETTER_NONE, "drawn loader model error (b)"),
};

const fanout_plugin kPlugin = FANOUT_PLUGIN_WITH_METRICS("torchloader", "A-Dloader: data-loading worker allocation across concurrent training jobs", "0.1.0", FANOUT_ARRAY(kParams), FANOUT_ARRAY(kRoles), FANOUT_ARRAY(kExperiments), nullptr, nullptr, nullptr, FANOUT_ARRAY(kMetrics));

}  // namespace
}  // namespace torchloader

extern "C" FANOUT_PLUGIN_EXPORT const fanout_plugin* fanout_plugin_entry(void) { return &torchloader::kPlugin; }
