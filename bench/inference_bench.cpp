// ResNet-50 batch 1 through the database (AI.MODELEXECUTE on our RedisAI module, timed by the client) against
// the same forward called directly in libtorch, same model file, same intra-op threads, in one invocation,
// interleaved round by round so that drift of the machine hits both alike. The direct forward runs in a worker
// process started fresh for each pair with a fresh server: a process's forward speed differs from the next one's by
// a few per cent (bench/why.txt), so both paths are sampled over several process starts. Then run_model latency
// percentiles and throughput against the number of concurrent clients, without and with batching.
//   inference_bench [threads=nproc] [rounds=30] [clients=1,2,4] [pairs=5]
// Goal: the median over this invocation's rounds of run_model / direct forward <= 1.03, in every bench/run-all
// round (bench/goals.txt: every-round). Warmup rounds (3 per pair) are run and not counted.
#include <hiredis/hiredis.h>
#include <torch/script.h>
#include <torch/torch.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "bench/figures.h"
#include "fanout_socket.hpp"
#include "plugins/smartsim/redis_server.h"
#include "plugins/smartsim/resnet50.h"
#include "plugins/smartsim/tensor_client.h"
#include "results/statistics.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kWarmup = 3;
constexpr size_t kInput = 3 * 224 * 224;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

std::vector<int> parse_list(const char* text) {
  std::vector<int> v;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) v.push_back(std::atoi(item.c_str()));
  return v;
}

void print_row(const char* what, std::vector<double> ms, double per_second = 0) {
  fanout::Summary s = fanout::summarize(ms);
  std::printf("%-34s %6zu %9.2f %9.2f %9.2f %9.2f", what, s.count, s.median, s.p90, s.p99, s.mean);
  if (per_second > 0) std::printf(" %10.2f", per_second);
  std::printf("\n");
}

// The module's own account of a model's runs (AI.INFO's `duration`: microseconds spent running it, summed), in ms.
// Read around each timed run_model, it splits the database path into the run the module timed (its executor's
// round trip and the forward) and the rest.
double model_duration_ms(redisContext* c, const char* key) {
  auto* r = static_cast<redisReply*>(redisCommand(c, "AI.INFO %s", key));
  if (!r || r->type != REDIS_REPLY_ARRAY) {
    std::fprintf(stderr, "inference_bench: AI.INFO %s failed: %s\n", key, r && r->str ? r->str : c->errstr);
    std::exit(1);
  }
  double ms = -1;
  for (size_t i = 0; i + 1 < r->elements; i += 2)
    if (std::string(r->element[i]->str) == "duration") ms = double(r->element[i + 1]->integer) / 1000.0;
  freeReplyObject(r);
  return ms;
}

// The same input in both paths: a fixed pattern in [-1, 1).
std::vector<float> bench_input() {
  std::vector<float> input(kInput);
  for (size_t i = 0; i < kInput; ++i) input[i] = float((i * 2654435761u) % 1000) / 500.0f - 1.0f;
  return input;
}

smartsim::ClientOptions options(const smartsim::RedisServer& server) {
  smartsim::ClientOptions o;
  o.addresses = {server.address()};
  o.password = "bench";
  o.command_timeout_ms = 600000;
  return o;
}

}  // namespace

// The direct path's process: loads the model file with the threads asked, then per request byte on its socket
// (fd 0) runs one forward and sends back its time (ms, a double); 'l' also sends the 1000 logits. Started for each pair
// exactly as the server is (a fresh process, same environment), so neither side keeps one process's luck.
int direct_worker(const char* model_file, int threads) {
  torch::set_num_threads(threads);
  torch::jit::Module model = torch::jit::load(model_file);
  model.eval();
  std::vector<float> input = bench_input();
  const torch::Tensor x = torch::from_blob(input.data(), {1, 3, 224, 224});
  for (char request; fanout_sdk::recv_all(0, &request, 1);) {
    torch::InferenceMode guard;
    const auto t0 = Clock::now();
    torch::Tensor y = model.forward({x}).toTensor();
    const double ms = ms_since(t0);
    if (!fanout_sdk::send_all(0, &ms, sizeof ms)) return 1;
    if (request == 'l' && !fanout_sdk::send_all(0, y.contiguous().data_ptr<float>(), 1000 * sizeof(float))) return 1;
  }
  return 0;
}

// The parent's end of one direct worker.
class DirectWorker {
 public:
  DirectWorker(const std::string& model_file, int threads) {
    const std::string t = std::to_string(threads);  // before fork: the child only calls async-signal-safe functions
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) throw std::runtime_error("inference_bench: socketpair failed");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("inference_bench: fork failed");
    if (pid_ == 0) {
      dup2(sv[1], 0);  // without CLOEXEC: the only descriptor the worker keeps
      execl("/proc/self/exe", "inference_bench", "--direct-worker", model_file.c_str(), t.c_str(), nullptr);
      _exit(127);
    }
    close(sv[1]);
    fd_ = sv[0];
  }
  ~DirectWorker() {
    close(fd_);
    waitpid(pid_, nullptr, 0);
  }
  double forward(float* logits = nullptr) {
    const char request = logits ? 'l' : 'f';
    double ms = -1;
    if (!fanout_sdk::send_all(fd_, &request, 1) || !fanout_sdk::recv_all(fd_, &ms, sizeof ms) ||
        (logits && !fanout_sdk::recv_all(fd_, logits, 1000 * sizeof(float))))
      throw std::runtime_error("inference_bench: the direct worker died");
    return ms;
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
};

int main(int argc, char** argv) {
  // libgomp reads OMP_WAIT_POLICY when it loads: set it (as fanout does for redis-server) and start again.
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execv("/proc/self/exe", argv);
  }
  if (argc == 4 && std::string(argv[1]) == "--direct-worker") return direct_worker(argv[2], std::atoi(argv[3]));
  const int threads = argc > 1 ? std::atoi(argv[1]) : int(std::thread::hardware_concurrency());
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 30;
  const std::vector<int> clients = parse_list(argc > 3 ? argv[3] : "1,2,4");
  const int pairs = std::max(1, std::min(rounds, argc > 4 ? std::atoi(argv[4]) : 5));
  const fs::path dir = fs::temp_directory_path() / ("fanout-inference-bench-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string model_file = (dir / "resnet50.pt").string();
  smartsim_model::write_resnet50(model_file, "CPU", 0);
  std::ifstream f(model_file, std::ios::binary);
  const std::string blob((std::istreambuf_iterator<char>(f)), {});
  std::vector<float> input = bench_input();

  smartsim::RedisServerConfig cfg;
  cfg.bind = "127.0.0.1";
  cfg.password = "bench";
  cfg.module = (fs::read_symlink("/proc/self/exe").parent_path() / "plugins" / "redisai.so").string();
  cfg.module_args = {"THREADS_PER_QUEUE", "1", "INTRA_OP_PARALLELISM", std::to_string(threads), "INTER_OP_PARALLELISM", "1"};
  cfg.cpus = int(std::thread::hardware_concurrency());
  auto start_server = [&](int k) {
    cfg.dir = (dir / ("db" + std::to_string(k))).string();
    cfg.port = 26479 + k;
    return std::make_unique<smartsim::RedisServer>(cfg);
  };

  std::printf("ResNet-50 (25,557,032 parameters, seeded weights), batch 1, %d intra-op thread(s) in both paths, "
              "%d rounds in %d pairs of fresh processes (a server, a direct one), %d warmup rounds each, interleaved\n",
              threads, rounds, pairs, kWarmup);
  // How fast one process runs the forward differs from process to process by a few per cent (bench/why.txt), so
  // both paths are sampled over several process starts, in pairs.
  std::vector<double> direct_ms, db_ms, forward_ms;  // forward_ms: as the module timed it (AI.INFO): executor round trip and forward
  std::vector<double> pair_ratio;
  double max_difference = 0;
  for (int k = 0; k < pairs; ++k) {
    auto server = start_server(k);
    DirectWorker direct(model_file, threads);
    smartsim::Client client(options(*server));
    client.set_model("resnet", blob, "CPU");
    client.put_tensor("x", smartsim::DType::Float, {1, 3, 224, 224}, input.data(), kInput * 4);
    redisContext* info = redisConnect(cfg.bind.c_str(), server->port());
    if (!info || info->err) return std::fprintf(stderr, "inference_bench: cannot connect for AI.INFO\n"), 1;
    freeReplyObject(redisCommand(info, "AUTH %s", cfg.password.c_str()));
    const int own_rounds = rounds / pairs + (k < rounds % pairs);
    std::vector<double> own;
    std::vector<float> direct_logits(1000), out(1000);
    for (int r = -kWarmup; r < own_rounds; ++r) {
      const double before = model_duration_ms(info, "resnet");
      // The two sides take turns going first (a cache or frequency state left by one lands on both alike).
      double d = 0, m = 0;
      auto via_database = [&] {
        const auto t0 = Clock::now();
        client.run_model("resnet", {"x"}, {"y"});
        m = ms_since(t0);
      };
      if (r % 2 != 0) via_database();
      d = direct.forward(r == -kWarmup ? direct_logits.data() : nullptr);
      if (r % 2 == 0) via_database();
      if (r >= 0) {
        direct_ms.push_back(d), db_ms.push_back(m), forward_ms.push_back(model_duration_ms(info, "resnet") - before);
        own.push_back(m / d);
      }
      if (r == -kWarmup) {  // the two paths compute the same logits
        client.unpack_tensor("y", smartsim::DType::Float, {1, 1000}, out.data(), out.size() * 4);
        for (size_t i = 0; i < 1000; ++i) max_difference = std::max(max_difference, double(std::abs(out[i] - direct_logits[i])));
      }
    }
    redisFree(info);
    pair_ratio.push_back(fanout::summarize(own).median);
  }
  std::printf("%-34s %6s %9s %9s %9s %9s %10s\n", "path (ms)", "n", "p50", "p90", "p99", "mean", "infer/s");
  print_row("direct libtorch forward", direct_ms);
  print_row("run_model through the database", db_ms);
  print_row("  of which the forward (AI.INFO)", forward_ms);
  std::printf("each pair's median ratio:");
  for (double r : pair_ratio) std::printf(" %.3f", r);
  std::printf("\n");
  bench::figure("pair_median_min", *std::min_element(pair_ratio.begin(), pair_ratio.end()), "x");
  bench::figure("pair_median_max", *std::max_element(pair_ratio.begin(), pair_ratio.end()), "x");
  std::vector<double> a = direct_ms, b = db_ms;
  // The two paths run back to back in every round, so each round's ratio cancels the machine's drift between
  // rounds; their median over all pairs is the comparison (as tensor_bench's per-round ratios). The ratio of the
  // two medians is printed too: it mixes rounds the machine ran at different speeds.
  std::vector<double> paired;
  for (size_t i = 0; i < a.size(); ++i) paired.push_back(b[i] / a[i]);
  const double ratio = fanout::summarize(paired).median;
  // Where the ratio comes from, round by round: the run the module timed against the direct forward, and the time
  // the database adds outside the forward (the request's round trip, the queue, the copies).
  std::vector<double> forward_ratio, outside_ms;
  for (size_t i = 0; i < a.size(); ++i) forward_ratio.push_back(forward_ms[i] / a[i]), outside_ms.push_back(b[i] - forward_ms[i]);
  const double forward_vs_direct = fanout::summarize(forward_ratio).median, outside = fanout::summarize(outside_ms).median;
  const double ratio_of_medians = fanout::summarize(b).median / fanout::summarize(a).median;
  bench::figure("direct_p50_ms", fanout::summarize(a).median, "ms");
  bench::figure("direct_p99_ms", fanout::summarize(a).p99, "ms");
  bench::figure("database_p50_ms", fanout::summarize(b).median, "ms");
  bench::figure("database_p99_ms", fanout::summarize(b).p99, "ms");
  bench::figure("database_vs_direct", ratio, "x");
  bench::figure("database_vs_direct_of_medians", ratio_of_medians, "x");
  bench::figure("server_forward_vs_direct", forward_vs_direct, "x");
  bench::figure("outside_forward_p50_ms", outside, "ms");
  std::printf("database / direct: median of the rounds' ratios %.3fx (ratio of the medians %.3fx)  goal <= 1.03x: %s; "
              "largest logit difference %.2e\n", ratio, ratio_of_medians, ratio <= 1.03 ? "MET" : "NOT MET", max_difference);
  std::printf("of which: the run the module timed (executor round trip and forward) / the direct forward %.3fx (median of the rounds), the rest outside "
              "the forward %.2f ms (median)\n", forward_vs_direct, outside);

  auto server_box = start_server(pairs);
  const smartsim::RedisServer& server = *server_box;
  smartsim::Client client(options(server));

  std::printf("\nthroughput vs concurrent clients (run_model on its own key each; BATCHSIZE = clients when batched)\n");
  std::printf("%-34s %6s %9s %9s %9s %9s %10s\n", "clients / model (ms)", "n", "p50", "p90", "p99", "mean", "infer/s");
  for (int c : clients) {
    for (int batched = 0; batched < 2; ++batched) {
      if (batched && c == 1) continue;
      smartsim::ModelOptions mo;
      mo.batch_size = batched ? c : 0;
      const std::string name = "resnet_c" + std::to_string(c) + "_b" + std::to_string(batched);
      client.set_model(name, blob, "CPU", mo);
      std::mutex mu;
      std::vector<double> lat;
      std::atomic<int> ready{0};
      std::atomic<bool> go{false};
      std::vector<std::thread> workers;
      const int per_client = std::max(2, rounds / c);
      for (int k = 0; k < c; ++k)
        workers.emplace_back([&, k] {
          smartsim::Client mine(options(server));
          const std::string in = "x" + std::to_string(k), out_key = "y" + std::to_string(k);
          mine.put_tensor(in, smartsim::DType::Float, {1, 3, 224, 224}, input.data(), kInput * 4);
          mine.run_model(name, {in}, {out_key});  // warmup
          ++ready;
          while (!go) std::this_thread::yield();
          std::vector<double> own;
          for (int i = 0; i < per_client; ++i) {
            auto t0 = Clock::now();
            mine.run_model(name, {in}, {out_key});
            own.push_back(ms_since(t0));
          }
          std::lock_guard<std::mutex> lock(mu);
          lat.insert(lat.end(), own.begin(), own.end());
        });
      while (ready < c) std::this_thread::yield();
      const auto t0 = Clock::now();
      go = true;
      for (auto& w : workers) w.join();
      const double seconds = ms_since(t0) / 1000;
      const std::string label = std::to_string(c) + (batched ? " clients, BATCHSIZE " + std::to_string(c) : c == 1 ? " client" : " clients, unbatched");
      print_row(label.c_str(), lat, double(lat.size()) / seconds);
    }
  }
  fs::remove_all(dir);
  return 0;  // the goal line says met or not; bench/run-all judges goals from the figures (a non-zero exit is a crash)
}
