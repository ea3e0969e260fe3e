// Optional C++ conveniences over the C ABI in fanout_plugin.h (header-only; depends on nothing else of ours): the
// Host wrapper a role works through, here, and one header per concept beside it, all included by this one:
//   fanout_files.hpp     write-then-rename            fanout_net.hpp       this node's addresses
//   fanout_token.hpp     tokens and passwords         fanout_checksum.hpp  a fast checksum of moved bytes
//   fanout_process.hpp   companion programs, spawning, waiting
//   fanout_socket.hpp    TCP listen/connect-with-retry/send_all   fanout_clock.hpp     monotonic and wall clocks
//   fanout_gate.hpp      the server side of a token-gated channel (accept, buffer, refuse strangers)
#pragma once
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "fanout_checksum.hpp"
#include "fanout_clock.hpp"
#include "fanout_files.hpp"
#include "fanout_gate.hpp"
#include "fanout_net.hpp"
#include "fanout_plugin.h"
#include "fanout_process.hpp"
#include "fanout_socket.hpp"
#include "fanout_token.hpp"

namespace fanout_sdk {

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
  // The experiment's folder, shared by all its runs (run folders are <experiment>/run-<stamp>/<run>).
  std::string experiment_dir() const { return ops_->experiment_dir(ctx_); }
  // The step's settings from an experiment file's [[steps]] table, a JSON object ("" when none, or the host
  // predates ABI 4.5).
  std::string step_settings() const {
    const char* s = FANOUT_HAS(ops_, fanout_host_ops, step_settings) && ops_->step_settings ? ops_->step_settings(ctx_) : nullptr;
    return s ? s : "";
  }
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
  // Which way a metric is better (fanout_better), for a metric the plugin's table cannot name; false when the host
  // predates ABI 4.6 (the verdict then reads the unit alone) or refused it.
  bool declare_metric(const char* metric, fanout_better better, uint32_t flags = 0) {
    if (!FANOUT_HAS(ops_, fanout_host_ops, declare_metric) || !ops_->declare_metric) return false;
    return ops_->declare_metric(ctx_, metric, int(better), flags) == 0;
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
