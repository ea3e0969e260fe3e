// Optional C++ conveniences over the C ABI in fanout_plugin.h (header-only; depends on nothing else of ours).
#pragma once
#include <arpa/inet.h>
#include <netdb.h>
#include <unistd.h>

#include <cstdint>
#include <string>

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

// Thin wrapper over the context and host ops that a role function receives.
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
  std::string param(const char* name, const std::string& fallback = "") const {
    const char* v = ops_->param(ctx_, name);
    return v ? v : fallback;
  }
  int64_t param_int(const char* name, int64_t fallback = 0) const { return ops_->param_int(ctx_, name, fallback); }
  double param_double(const char* name, double fallback = 0) const { return ops_->param_double(ctx_, name, fallback); }
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

 private:
  fanout_context* ctx_;
  const fanout_host_ops* ops_;
};

}  // namespace fanout_sdk
