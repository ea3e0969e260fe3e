#include "redis_server.h"

#include <hiredis/hiredis.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>

#include <cstdlib>
#include <sys/stat.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "fanout_process.hpp"

extern char** environ;

namespace smartsim {

namespace {

using Clock = std::chrono::steady_clock;

// Why a server stopped, from its log: Redis writes the reason at warning level ("1234:M 27 Nov 2026 03:07:03.741
// # Module ... failed to load: ..."), beside warning-level lines that say nothing about a stop: its start banner
// and advisory warnings (memory overcommit, transparent huge pages: "# WARNING ..."). The last of the others,
// whole; else the log's last lines.
std::string log_tail(const std::string& file) {
  std::ifstream in(file);
  if (!in) return "(no log at " + file + ")";
  std::vector<std::string> lines, reasons;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  for (auto& l : lines) {
    // The level is the sixth word: pid:role, day, month, year, time, level.
    std::istringstream words(l);
    std::string w[6];
    for (auto& x : w) words >> x;
    if (w[5] != "#") continue;
    std::string message;
    std::getline(words >> std::ws, message);
    const bool said_at_every_start = message.rfind("WARNING", 0) == 0 || message.find("Redis is starting") != std::string::npos ||
                                     message.rfind("Redis version=", 0) == 0 || message.rfind("Configuration loaded", 0) == 0;
    if (!said_at_every_start) reasons.push_back(message);
  }
  const std::vector<std::string>& from = reasons.empty() ? lines : reasons;
  std::string out;
  for (size_t i = from.size() > 3 ? from.size() - 3 : 0; i < from.size(); ++i) out += (out.empty() ? "" : " | ") + from[i];
  return out.empty() ? "(its log " + file + " is empty)" : out;
}

// One command to one server; the reply's text (status, string or error) or "" when unreachable.
std::string ask(const std::string& host, int port, const std::string& password, const std::vector<std::string>& argv) {
  timeval tv{1, 0};
  redisContext* c = redisConnectWithTimeout(host.c_str(), port, tv);
  std::string out;
  if (c && !c->err) {
    redisSetTimeout(c, tv);
    if (!password.empty()) freeReplyObject(redisCommand(c, "AUTH %b", password.data(), password.size()));
    std::vector<const char*> a;
    std::vector<size_t> l;
    for (auto& s : argv) a.push_back(s.c_str()), l.push_back(s.size());
    auto* r = static_cast<redisReply*>(redisCommandArgv(c, int(a.size()), a.data(), l.data()));
    if (r && r->str) out.assign(r->str, r->len);
    if (r) freeReplyObject(r);
  }
  if (c) redisFree(c);
  return out;
}

std::pair<std::string, int> split_address(const std::string& a) {
  auto colon = a.rfind(':');
  return {a.substr(0, colon), std::atoi(a.c_str() + colon + 1)};
}

}  // namespace

std::string redis_conf_quote(std::string_view word) {
  std::string out = "\"";
  for (unsigned char c : word) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

RedisServer::RedisServer(RedisServerConfig cfg) : cfg_(std::move(cfg)) {
  mkdir(cfg_.dir.c_str(), 0700);
  for (int attempt = 0; attempt < 20; ++attempt, cfg_.port += 100)
    if (start()) return;
  throw std::runtime_error("redis-server: no free port from " + std::to_string(cfg_.port - 2000) + " in 20 tries");
}

bool RedisServer::start() {
  const std::string conf = cfg_.dir + "/redis.conf", log = cfg_.dir + "/redis.log";
  ::unlink(log.c_str());
  {
    // Never an open server: bound to the given address, protected, with a per-experiment password.
    // Every path and secret quoted: a results folder with a space (or any byte) stays one argument.
    std::ofstream c(conf);
    const auto q = redis_conf_quote;
    c << "bind " << q(cfg_.bind) << "\nport " << cfg_.port << "\nprotected-mode yes\nrequirepass " << q(cfg_.password) << "\n"
      << "masterauth " << q(cfg_.password) << "\nsave \"\"\nappendonly "
      << (cfg_.persistence == RedisServerConfig::Persistence::None ? "no" : "yes")
      << (cfg_.persistence == RedisServerConfig::Persistence::AofWithoutPreamble ? "\naof-use-rdb-preamble no" : "") << "\ndaemonize no\ndir " << q(cfg_.dir) << "\nlogfile " << q(log)
      << "\nloadmodule " << q(cfg_.module);
    for (const auto& a : cfg_.module_args) c << " " << q(a);
    c << "\nproto-max-bulk-len 1gb\nclient-output-buffer-limit normal 0 0 0\n";
    // Debian's redis-server runs the module's libtorch on its jemalloc: the background purge thread woke ~2,800
    // times a second behind every forward's freed activations and preempted the forward's OpenMP team (the server's
    // forward 1-3 % slower than a plain process's; with it off, 0.96-0.99x: bench/why.txt). Purging then happens
    // on the freeing thread, amortized by jemalloc's decay, as in Redis before 6.0.
    c << "jemalloc-bg-thread no\n";
    if (cfg_.cpus > 1) c << "io-threads " << std::min(cfg_.cpus, 8) << "\nio-threads-do-reads yes\n";
    if (!cfg_.unix_socket.empty()) c << "unixsocket " << q(cfg_.unix_socket) << "\nunixsocketperm 700\n";
    if (cfg_.cluster) c << "cluster-enabled yes\ncluster-config-file " << q(cfg_.dir + "/nodes.conf") << "\ncluster-node-timeout 5000\n";
  }
  chmod(conf.c_str(), 0600);
  // The server program: Debian's, or the site's (FANOUT_REDIS_SERVER, e.g. from a site profile's [roles.db] env:
  // a Redis built elsewhere, or KeyDB).
  const char* program = std::getenv("FANOUT_REDIS_SERVER");
  std::vector<std::string> args = {program && *program ? program : "/usr/bin/redis-server", conf};
  // A rank killed outright (wall time, scancel, a failed peer's srun) runs no destructor: the server must die with
  // it, or it keeps its port and memory for every later run (seen: 36 orphans after a failed 16-shard step).
  // PR_SET_PDEATHSIG is tied to the spawning thread, so only from the rank's main thread (util-linux's setpriv
  // sets it and execs the server: same pid).
  if (::gettid() == ::getpid() && ::access("/usr/bin/setpriv", X_OK) == 0)
    args.insert(args.begin(), {"/usr/bin/setpriv", "--pdeathsig", "KILL", "--"});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // libtorch's OpenMP workers spin between runs by default: on a node shared with clients (colocated) or other
  // queues they take the CPUs those need. PASSIVE makes them sleep (the user's own setting wins).
  std::vector<char*> env;
  for (char** e = environ; *e; ++e) env.push_back(*e);
  std::string passive = "OMP_WAIT_POLICY=PASSIVE";
  if (!std::getenv("OMP_WAIT_POLICY")) env.push_back(passive.data());
  env.push_back(nullptr);
  if (int rc = posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), env.data()); rc != 0)
    throw std::runtime_error("cannot start " + args[0] + ": " + std::strerror(rc));
  // Pin to db_cpus of the CPUs this rank may use (what the step's binding gave it, e.g. Slurm's --cpus-per-task
  // under task/affinity; else the node's): the server and its io threads stay off the others.
  cpu_set_t allowed, set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    CPU_ZERO(&allowed);
    for (long i = 0; i < sysconf(_SC_NPROCESSORS_ONLN) && i < CPU_SETSIZE; ++i) CPU_SET(int(i), &allowed);
  }
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && int(cpus.size()) < std::max(1, cfg_.cpus); ++c)
    if (CPU_ISSET(c, &allowed)) CPU_SET(c, &set), cpus.push_back(c);
  if (sched_setaffinity(pid_, sizeof set, &set) == 0) pinned_ = cpus;
  // Ready when OUR server answers (INFO names its pid: another server on a taken port does not count),
  // or stopped: then its log says why.
  // A deadline, not a wait: ready returns at once. Sixteen servers loading libtorch at once on a busy 2-core node
  // took more than 20 s (the 16-shard Slurm test), so the limit is generous.
  constexpr int kStartSeconds = 90;
  auto deadline = Clock::now() + std::chrono::seconds(kStartSeconds);
  const std::string me = "process_id:" + std::to_string(pid_) + "\r\n";
  while (ask(cfg_.bind, cfg_.port, cfg_.password, {"INFO", "server"}).find(me) == std::string::npos) {
    int st = 0;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      std::string tail = log_tail(log);
      if (tail.find("Address already in use") != std::string::npos) return false;
      const std::string how = WIFSIGNALED(st) ? "killed by signal " + std::to_string(WTERMSIG(st)) : "exit status " + std::to_string(WEXITSTATUS(st));
      throw std::runtime_error("redis-server on " + address() + " stopped at start (" + how + "): " + tail);
    }
    if (Clock::now() > deadline) {
      // The constructor throws, so no destructor will stop it: a server left running would hold its port (and a
      // node's memory) for every later run.
      (void)fanout_sdk::wait_exit_within(pid_, 0);
      pid_ = -1;
      throw std::runtime_error("redis-server on " + address() + " did not answer PING in " + std::to_string(kStartSeconds) + " s: " + log_tail(log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

std::string RedisServer::pinned() const {
  std::string list;
  for (int c : pinned_) list += (list.empty() ? "" : ",") + std::to_string(c);
  return list;
}

RedisServer::~RedisServer() {
  if (pid_ <= 0) return;
  ask(cfg_.bind, cfg_.port, cfg_.password, {"SHUTDOWN", "NOSAVE"});
  (void)fanout_sdk::wait_exit_within(pid_, 5000);  // SHUTDOWN NOSAVE ends it at once; a wedged one is killed
}

double create_cluster(const std::vector<std::string>& addresses, const std::string& password, int timeout_s) {
  auto t0 = Clock::now();
  // Each shard takes an even share of the 16384 slots; the first introduces itself to the others (the cluster
  // bus spreads the rest). Done with the servers' own commands: redis-cli --cluster would refuse 2 shards.
  const size_t n = addresses.size();
  for (size_t i = 0; i < n; ++i) {
    auto [host, port] = split_address(addresses[i]);
    std::string lo = std::to_string(i * 16384 / n), hi = std::to_string((i + 1) * 16384 / n - 1);
    std::string r = ask(host, port, password, {"CLUSTER", "ADDSLOTSRANGE", lo, hi});
    if (r != "OK") throw std::runtime_error("CLUSTER ADDSLOTSRANGE on " + addresses[i] + ": " + (r.empty() ? "no answer" : r));
    // A distinct config epoch per node, as redis-cli --cluster create gives them. Left at 0, the nodes settle
    // their epoch collisions by gossip after the cluster already says ok; a slot moved meanwhile (a reshard)
    // could be claimed back by its old owner at a newly higher epoch, and each node then sends its clients to
    // the other for good.
    r = ask(host, port, password, {"CLUSTER", "SET-CONFIG-EPOCH", std::to_string(i + 1)});
    if (r != "OK") throw std::runtime_error("CLUSTER SET-CONFIG-EPOCH on " + addresses[i] + ": " + (r.empty() ? "no answer" : r));
  }
  auto [host0, port0] = split_address(addresses[0]);
  for (size_t i = 1; i < n; ++i) {
    auto [host, port] = split_address(addresses[i]);
    std::string r = ask(host0, port0, password, {"CLUSTER", "MEET", host, std::to_string(port)});
    if (r != "OK") throw std::runtime_error("CLUSTER MEET " + addresses[i] + ": " + (r.empty() ? "no answer" : r));
  }
  // Ready when every node sees all the others and the whole slot range as ok.
  auto deadline = t0 + std::chrono::seconds(timeout_s);
  const std::string known = "cluster_known_nodes:" + std::to_string(n) + "\r\n";
  for (auto& a : addresses) {
    auto [host, port] = split_address(a);
    for (;;) {
      std::string info = ask(host, port, password, {"CLUSTER", "INFO"});
      if (info.find("cluster_state:ok") != std::string::npos && info.find("cluster_slots_assigned:16384") != std::string::npos &&
          info.find(known) != std::string::npos)
        break;
      if (Clock::now() > deadline) throw std::runtime_error("Redis Cluster not ok on " + a + " after " + std::to_string(timeout_s) + " s");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace smartsim
