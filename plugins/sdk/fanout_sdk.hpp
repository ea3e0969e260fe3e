// Optional C++ conveniences over the C ABI in fanout_plugin.h (header-only; depends on nothing else of ours).
#pragma once
#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "fanout_files.hpp"
#include "fanout_plugin.h"

namespace fanout_sdk {

// This host's IPv4 address as other nodes reach it (its name resolved), else 127.0.0.1.
inline std::string node_ipv4() {
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  std::string ip = "127.0.0.1";
  if (getaddrinfo(name, nullptr, &hints, &res) == 0 && res) {
    char buf[INET_ADDRSTRLEN];
    if (inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, buf, sizeof buf)) ip = buf;
    freeaddrinfo(res);
  }
  return ip;
}

// The IPv4 address to use for an interface setting: "auto" or "" (the host name's address), "lo", an interface
// name (its first IPv4 address), or an IPv4 address as it is. Throws std::runtime_error naming the interface.
inline std::string interface_ipv4(const std::string& name_or_ip) {
  in_addr probe{};
  if (inet_pton(AF_INET, name_or_ip.c_str(), &probe) == 1) return name_or_ip;
  if (name_or_ip == "lo") return "127.0.0.1";
  if (name_or_ip == "auto" || name_or_ip.empty()) return node_ipv4();
  ifaddrs* list = nullptr;
  std::string ip;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a && ip.empty(); a = a->ifa_next)
      if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET && name_or_ip == a->ifa_name) {
        char buf[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
        ip = buf;
      }
    freeifaddrs(list);
  }
  if (ip.empty()) throw std::runtime_error("interface '" + name_or_ip + "' has no IPv4 address on this node");
  return ip;
}

// Random hex text from the kernel's CSPRNG: 2 characters per byte (passwords, tokens).
inline std::string random_hex(size_t bytes = 16) {
  std::vector<unsigned char> raw(bytes);
  for (size_t got = 0; got < bytes;) {
    const ssize_t n = ::getrandom(raw.data() + got, bytes - got, 0);
    if (n > 0) got += size_t(n);
    else if (errno != EINTR) throw std::runtime_error(std::string("getrandom: ") + std::strerror(errno));
  }
  static const char* hex = "0123456789abcdef";
  std::string t;
  for (unsigned char c : raw) t += hex[c >> 4], t += hex[c & 15];
  return t;
}

// A plugin's own listening port (a scheduler, a master, a trainer) hears only its job's peers: the server makes
// a token, publishes it with its address through the rendezvous (already per-job and authenticated), and every
// peer presents it first. 32 hex characters.
inline std::string channel_token() { return random_hex(16); }

// Compares a presented token with the expected one in time independent of where they differ.
inline bool token_matches(const std::string& presented, const std::string& expected) {
  if (presented.size() != expected.size() || expected.empty()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < expected.size(); ++i) diff |= static_cast<unsigned char>(presented[i] ^ expected[i]);
  return diff == 0;
}

// A fast 64-bit checksum of a buffer (multiply-xor over 8-byte words, four lanes: near memory bandwidth), for
// benchmarks that verify the bytes they moved without the check dominating the measurement.
inline uint64_t checksum64(const void* data, size_t len) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0x9e3779b97f4a7c15ull ^ len;
  size_t i = 0;
  uint64_t a = h, b = h + 1, c = h + 2, d = h + 3;
  for (; i + 32 <= len; i += 32) {
    uint64_t w[4];
    std::memcpy(w, p + i, 32);
    a = (a ^ w[0]) * 0xff51afd7ed558ccdull;
    b = (b ^ w[1]) * 0xc4ceb9fe1a85ec53ull;
    c = (c ^ w[2]) * 0xff51afd7ed558ccdull;
    d = (d ^ w[3]) * 0xc4ceb9fe1a85ec53ull;
  }
  h = a ^ (b >> 1) ^ (c << 1) ^ (d >> 3);
  for (; i < len; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

// Thin wrapper over the context and host ops that a role function receives.
// The folder holding the plugin that calls this. Hidden, so that every plugin has its own copy and dladdr
// names that plugin's shared object.
__attribute__((visibility("hidden"))) inline std::string plugin_dir() {
  Dl_info info{};
  dladdr(reinterpret_cast<void*>(&plugin_dir), &info);
  const std::string self = info.dli_fname ? info.dli_fname : "";
  const auto slash = self.rfind('/');
  return slash == std::string::npos ? "." : self.substr(0, slash);
}

// A program shipped with the plugins: <build>/<name> (plugins in <build>/plugins), or <prefix>/bin/<name> (plugins
// in <prefix>/lib/fanout/plugins); else the bare name, found on PATH.
inline std::string companion_program(const std::string& name) {
  const std::string plugins = plugin_dir();
  const std::string parent = plugins.substr(0, plugins.rfind('/'));
  for (const std::string& p : {parent + "/" + name, parent + "/../../bin/" + name})
    if (::access(p.c_str(), X_OK) == 0) return p;
  return name;
}

// A program a role starts: argv only, never through a shell. With capture_stdout, `out` reads its standard output
// (the caller closes it); otherwise it writes to the rank's own output.
struct Child {
  pid_t pid = -1;
  int out = -1;
};
inline Child spawn_program(const std::vector<std::string>& args, bool capture_stdout) {
  int fds[2] = {-1, -1};
  if (capture_stdout && ::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("cannot start " + args.at(0) + ": no pipe");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (capture_stdout) posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  Child c;
  const int rc = posix_spawnp(&c.pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (capture_stdout) ::close(fds[1]);
  if (rc != 0) {
    if (capture_stdout) ::close(fds[0]);
    throw std::runtime_error("cannot start " + args[0] + ": " + std::strerror(rc));
  }
  c.out = fds[0];
  return c;
}
// Waits for a started program: its exit status, or 128 + the signal that killed it.
inline int wait_exit(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

class Host {
 public:
  Host(fanout_context* ctx, const fanout_host_ops* ops) : ctx_(ctx), ops_(ops) {}
  int rank() const { return ops_->rank(ctx_); }
  int size() const { return ops_->size(ctx_); }
  int local_rank() const { return ops_->local_rank(ctx_); }
  int local_size() const { return ops_->local_size(ctx_); }
  std::string node() const { return ops_->node_name(ctx_); }
  std::string role() const { return ops_->role(ctx_); }
  std::string run_dir() const { return ops_->run_dir(ctx_); }
  // The experiment's folder, shared by all its runs (run folders are <experiment>/run-<stamp>/<run>).
  std::string experiment_dir() const { return ops_->experiment_dir(ctx_); }
  std::string param(const char* name, const std::string& fallback = "") const {
    const char* v = ops_->param(ctx_, name);
    return v ? v : fallback;
  }
  int64_t param_int(const char* name, int64_t fallback = 0) const { return ops_->param_int(ctx_, name, fallback); }
  double param_double(const char* name, double fallback = 0) const { return ops_->param_double(ctx_, name, fallback); }
  // A FANOUT_PARAM_BOOL parameter: true, 1 or yes.
  bool param_bool(const char* name, bool fallback = false) const {
    const char* v = ops_->param(ctx_, name);
    if (!v) return fallback;
    const std::string s = v;
    return s == "true" || s == "1" || s == "yes";
  }
  int64_t now_ns() const { return ops_->now_ns(ctx_); }
  bool record(const char* metric, int64_t iteration, int64_t t_start_ns, double value, const char* unit, bool warmup) {
    return ops_->record(ctx_, metric, iteration, t_start_ns, value, unit, warmup ? 1 : 0) == 0;
  }
  bool put(const std::string& key, const std::string& value) {
    return ops_->kv_put(ctx_, key.c_str(), value.data(), value.size()) == 0;
  }
  // Waits up to timeout_ms for key; false on timeout or error.
  bool get(const std::string& key, std::string& value, int timeout_ms) {
    size_t len = 0;
    if (ops_->kv_get(ctx_, key.c_str(), nullptr, 0, &len, timeout_ms) != 0) return false;
    value.resize(len);
    return ops_->kv_get(ctx_, key.c_str(), value.data(), len, &len, timeout_ms) == 0;
  }
  bool fence(int timeout_ms) { return ops_->fence(ctx_, timeout_ms) == 0; }
  void log(fanout_log_level level, const std::string& msg) { ops_->log(ctx_, level, msg.c_str()); }
  bool should_stop() const { return ops_->should_stop(ctx_) != 0; }

  // Shared steps (fanout_plugin.h: experiment_spec.shared_step, host_ops.service_dir).
  enum class Service { None, Provider, User };
  Service service() const {
    int provider = 0;
    const char* dir = ops_->service_dir(ctx_, &provider);
    return !dir ? Service::None : provider ? Service::Provider : Service::User;
  }
  std::string service_dir() const {
    int provider = 0;
    const char* dir = ops_->service_dir(ctx_, &provider);
    return dir ? dir : "";
  }
  // Publishes key=value to the ranks of this job and, from a service, to the runs that use it too (the file
  // <service_dir>/<key>, 0600, written then renamed). Keys: letters, digits, '.', '_', '-'.
  bool share(const std::string& key, const std::string& value) {
    if (!put(key, value)) return false;
    return service() != Service::Provider || write_private(service_dir() + "/" + checked_key(key), value);
  }
  // What share() published: in a run that uses a service, from the service's folder (it exists before the
  // run starts); otherwise from this job, waiting up to timeout_ms.
  bool shared(const std::string& key, std::string& value, int timeout_ms) {
    if (service() != Service::User) return get(key, value, timeout_ms);
    FILE* f = std::fopen((service_dir() + "/" + checked_key(key)).c_str(), "rb");
    if (!f) return false;
    value.clear();
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) value.append(buf, n);
    std::fclose(f);
    return true;
  }
  // Rank 0 of a service, once it is usable: the runs of its group may start (creates <service_dir>/ready).
  bool service_ready() { return write_private(service_dir() + "/" FANOUT_SERVICE_READY_FILE, ""); }

  // A role's body: its exceptions are logged (the message names what failed) and make the role return 1.
  template <typename Body>
  int run(Body&& body) {
    try {
      return body();
    } catch (const std::exception& e) {
      log(FANOUT_LOG_ERROR, e.what());
      return 1;
    }
  }

 private:
  static const std::string& checked_key(const std::string& key) {
    for (char c : key)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
        throw std::invalid_argument("shared key '" + key + "' may hold only letters, digits, '.', '_' and '-'");
    if (key.empty() || key[0] == '.') throw std::invalid_argument("shared key '" + key + "' is empty or starts with '.'");
    return key;
  }
  // Written aside then renamed (fanout_files.hpp): a reader sees the whole value or nothing.
  static bool write_private(const std::string& path, const std::string& value) {
    try {
      write_file_atomic(path, value, 0600);
      return true;
    } catch (const std::runtime_error&) {
      return false;
    }
  }
  fanout_context* ctx_;
  const fanout_host_ops* ops_;
};

}  // namespace fanout_sdk
