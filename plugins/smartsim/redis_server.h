// One redis-server started by a database rank: configuration (password in a 0600 file, never on argv),
// the tensor module, CPU pinning, readiness by PING, Redis Cluster creation, and shutdown.
#pragma once
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace smartsim {

struct RedisServerConfig {
  std::string dir;          // working folder: redis.conf, redis.log, nodes.conf
  std::string bind;         // address to listen on ("127.0.0.1", or the node's address)
  int port = 6780;
  std::string unix_socket;  // also listen here when set
  std::string password;
  std::string module;       // path of the RedisAI module .so
  std::vector<std::string> module_args;  // its load options, e.g. {"THREADS_PER_QUEUE", "2"}
  bool cluster = false;
  int cpus = 1;             // pinned to CPUs 0..cpus-1 (as many as exist); io-threads follow
  // Persistence: none (a benchmark database), or an append-only file, with or without its RDB preamble.
  enum class Persistence { None, Aof, AofWithoutPreamble } persistence = Persistence::None;
};

class RedisServer {
 public:
  // Starts it; when the port is taken (another run on the same node), tries port + 100, + 200, ... (the
  // address actually used is address()). Throws std::runtime_error with the log's tail.
  explicit RedisServer(RedisServerConfig cfg);
  ~RedisServer();                              // SHUTDOWN NOSAVE, then SIGKILL if it lingers
  std::string address() const { return cfg_.bind + ":" + std::to_string(cfg_.port); }
  int port() const { return cfg_.port; }  // the port it got (may differ from the one asked for)
  std::string pinned() const;                                   // "0,1": the CPUs it was pinned to; empty if pinning failed
  const std::vector<int>& pinned_cpus() const { return pinned_; }
  pid_t pid() const { return pid_; }

 private:
  bool start();  // false when the port was taken
  RedisServerConfig cfg_;
  pid_t pid_ = -1;
  std::vector<int> pinned_;
};

// A word of a Redis configuration file, quoted as its parser (sdssplitargs) reads it back: "..." with \\, \"
// and \xHH escapes, so paths with spaces, quotes or any byte stay one argument.
std::string redis_conf_quote(std::string_view word);

// Joins standalone servers into a Redis Cluster (all 16384 slots, no replicas) and waits until every node
// reports cluster_state:ok. Returns the seconds it took.
double create_cluster(const std::vector<std::string>& addresses, const std::string& password, int timeout_s);

}  // namespace smartsim
