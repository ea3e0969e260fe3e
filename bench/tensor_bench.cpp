// Our tensor client against redis-benchmark, in one invocation on one redis-server (with the tensor module):
// SET vs put_tensor and GET vs unpack_tensor, same value size, same number of connections. Prints a table
// of rates and ratios (goal: >= 0.9 of redis-benchmark's rate), each the median of alternating rounds.
// Usage: tensor_bench [connections=1]
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <thread>
#include <vector>

#include "common/subprocess.h"
#include "plugins/smartsim/redis_server.h"
#include "plugins/smartsim/tensor_client.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// "SET" and "GET" requests per second from redis-benchmark --csv.
std::pair<double, double> redis_benchmark(int port, const std::string& pw, size_t bytes, int conns, int n) {
  auto r = fanout::run_process({"redis-benchmark", "-h", "127.0.0.1", "-p", std::to_string(port), "-a", pw, "-t", "set,get",
                                "-d", std::to_string(bytes), "-c", std::to_string(conns), "-n", std::to_string(n), "--csv"},
                               {}, 600);
  double set = 0, get = 0;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    auto field = [&](int k) {
      size_t p = 0;
      for (int i = 0; i < k; ++i) p = line.find(',', p) + 1;
      std::string f = line.substr(p, line.find(',', p) - p);
      if (!f.empty() && f.front() == '"') f = f.substr(1, f.size() - 2);
      return f;
    };
    if (field(0) == "SET") set = std::atof(field(1).c_str());
    if (field(0) == "GET") get = std::atof(field(1).c_str());
  }
  return {set, get};
}

// put_tensor then unpack_tensor rates with `conns` clients (one thread and one connection each).
std::pair<double, double> ours(int port, const std::string& pw, size_t bytes, int conns, int n) {
  double rate[2];
  for (int phase = 0; phase < 2; ++phase) {
    std::vector<std::thread> threads;
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    auto t0 = Clock::now();
    for (int c = 0; c < conns; ++c)
      threads.emplace_back([&, c] {
        smartsim::ClientOptions o;
        o.addresses = {"127.0.0.1:" + std::to_string(port)};
        o.password = pw;
        smartsim::Client client(o);
        std::vector<char> buf(bytes, char(c));
        const std::string key = "bench_" + std::to_string(c);
        if (phase == 1) client.put_tensor(key, smartsim::DType::UInt8, {bytes}, buf.data(), bytes);
        ++ready;
        while (!go) std::this_thread::yield();
        for (int i = 0; i < n / conns; ++i) {
          if (phase == 0) client.put_tensor(key, smartsim::DType::UInt8, {bytes}, buf.data(), bytes);
          else client.unpack_tensor(key, smartsim::DType::UInt8, {bytes}, buf.data(), bytes);
        }
      });
    while (ready < conns) std::this_thread::yield();
    t0 = Clock::now();
    go = true;
    for (auto& t : threads) t.join();
    rate[phase] = double(n / conns * conns) / std::chrono::duration<double>(Clock::now() - t0).count();
  }
  return {rate[0], rate[1]};
}

constexpr int kRounds = 5;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int conns = argc > 1 ? std::atoi(argv[1]) : 1;
  fs::path dir = fs::temp_directory_path() / ("fanout-tensor-bench-" + std::to_string(getpid()));
  fs::create_directories(dir);
  smartsim::RedisServerConfig cfg;
  cfg.dir = dir.string();
  cfg.bind = "127.0.0.1";
  cfg.port = 26379;
  cfg.password = "bench";
  cfg.module = (fs::read_symlink("/proc/self/exe").parent_path() / "plugins" / "redisai.so").string();
  cfg.cpus = 1;
  smartsim::RedisServer server(cfg);
  std::printf("one redis-server (7.0, tensor module loaded, pinned to CPU 0), %d connection(s), loopback; "
              "medians of %d alternating rounds\n", conns, kRounds);
  std::printf("%-10s %14s %14s %7s %14s %14s %7s\n", "size", "SET/s", "put_tensor/s", "ratio", "GET/s", "unpack/s", "ratio");
  for (size_t bytes : {size_t(1) << 10, size_t(64) << 10, size_t(1) << 20, size_t(4) << 20}) {
    int n = int(std::clamp<size_t>((size_t(2) << 30) / bytes, 400, 20000));
    // Rounds alternate between the two clients and each rate is the median of its rounds: this machine's
    // noise moves single runs by 30 % and more.
    std::vector<double> sets, gets, puts, unpacks;
    for (int round = 0; round < kRounds; ++round) {
      auto [set, get] = redis_benchmark(cfg.port, cfg.password, bytes, conns, n);
      auto [put, unpack] = ours(cfg.port, cfg.password, bytes, conns, n);
      sets.push_back(set), gets.push_back(get), puts.push_back(put), unpacks.push_back(unpack);
    }
    const double set = median(sets), get = median(gets), put = median(puts), unpack = median(unpacks);
    std::printf("%-10s %14.0f %14.0f %6.2fx %14.0f %14.0f %6.2fx\n",
                bytes >= (1 << 20) ? (std::to_string(bytes >> 20) + " MiB").c_str() : (std::to_string(bytes >> 10) + " KiB").c_str(),
                set, put, put / set, get, unpack, unpack / get);
  }
  fs::remove_all(dir);
  return 0;
}
