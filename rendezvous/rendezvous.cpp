#include "rendezvous/rendezvous.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>

#include "common/error.h"
#include "common/text.h"
#include "plugins/sdk/fanout_socket.hpp"
#include "rendezvous/pmix.h"

namespace fanout {

namespace {

bool valid_key(const std::string& key) {
  if (key.empty() || key.size() > 256) return false;
  for (unsigned char c : key)
    if (c <= ' ' || c == 0x7f) return false;
  return true;
}

// Client of rendezvous/kv_service.h over one blocking TCP connection.
class KvRendezvous : public Rendezvous {
 public:
  KvRendezvous(const std::string& address, const std::string& token) {
    std::pair<std::string, int> endpoint;
    try {
      endpoint = fanout_sdk::split_host_port(address);
    } catch (const std::runtime_error&) {
      throw UserError("FANOUT_KV: malformed address '" + address + "'");
    }
    try {
      fd_ = fanout_sdk::tcp_connect(endpoint.first, endpoint.second, 0);  // the service is up before any rank starts
    } catch (const std::runtime_error& e) {
      throw UserError("cannot reach the rendezvous service: " + std::string(e.what()));
    }
    fanout_sdk::set_nodelay(fd_);
    std::string reply;
    if (auto err = request("AUTH " + token + "\n", reply); !err.empty())
      throw UserError("rendezvous service at " + address + " refused this rank: " + err);
  }
  ~KvRendezvous() override {
    if (fd_ >= 0) ::close(fd_);
  }
  std::string name() const override { return "fanout-kv"; }

  std::string put(const std::string& key, const std::string& value) override {
    if (!valid_key(key)) return "invalid key '" + key + "' (1-256 bytes, no white space)";
    std::string reply;
    return request("PUT " + key + " " + std::to_string(value.size()) + "\n" + value, reply);
  }
  std::string get(const std::string& key, int timeout_ms, std::string& value) override {
    if (!valid_key(key)) return "invalid key '" + key + "' (1-256 bytes, no white space)";
    return request("GET " + key + " " + std::to_string(timeout_ms) + "\n", value);
  }
  std::string fence(int timeout_ms) override {
    std::string reply;
    return request("FENCE " + std::to_string(timeout_ms) + "\n", reply);
  }

 private:
  // Sends a request and reads one reply: "OK", "VAL <len>\n<bytes>" (into value) or "ERR <why>".
  std::string request(const std::string& req, std::string& value) {
    if (!fanout_sdk::send_all(fd_, req.data(), req.size())) return std::string("rendezvous connection lost: ") + std::strerror(errno);
    std::string line;
    if (!read_line(line)) return "rendezvous connection closed";
    if (line == "OK") return "";
    if (starts_with(line, "ERR ")) return line.substr(4);
    if (starts_with(line, "VAL ")) {
      auto len = parse_int(line.substr(4));
      if (!len || *len < 0) return "malformed rendezvous reply";
      value.clear();
      while (int64_t(value.size()) < *len) {
        if (!fill()) return "rendezvous connection closed";
        size_t take = std::min(buf_.size(), size_t(*len) - value.size());
        value.append(buf_, 0, take);
        buf_.erase(0, take);
      }
      return "";
    }
    return "malformed rendezvous reply '" + line + "'";
  }
  bool fill() {
    if (!buf_.empty()) return true;
    char tmp[65536];
    for (;;) {
      ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      buf_.append(tmp, size_t(n));
      return true;
    }
  }
  bool read_line(std::string& line) {
    for (;;) {
      auto nl = buf_.find('\n');
      if (nl != std::string::npos) {
        line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return true;
      }
      char tmp[4096];
      ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      buf_.append(tmp, size_t(n));
    }
  }
  int fd_ = -1;
  std::string buf_;
};

// A job of one rank needs no service: keys live in this process.
class SoloRendezvous : public Rendezvous {
 public:
  std::string name() const override { return "solo"; }
  std::string put(const std::string& key, const std::string& value) override {
    kv_[key] = value;
    return "";
  }
  std::string get(const std::string& key, int, std::string& value) override {
    auto it = kv_.find(key);
    if (it == kv_.end()) return "timeout (key '" + key + "' was never put and this rank is alone)";
    value = it->second;
    return "";
  }
  std::string fence(int) override { return ""; }

 private:
  std::map<std::string, std::string> kv_;
};

}  // namespace

std::unique_ptr<Rendezvous> make_rendezvous(int job_ranks, int step_ranks, bool leave_pmix) {
  const char* addr = std::getenv("FANOUT_KV");
  const char* token = std::getenv("FANOUT_KV_TOKEN");
  if (addr && *addr) return std::make_unique<KvRendezvous>(addr, token ? token : "");
  // A one-step job under srun --mpi=pmix / mpirun: the PMIx namespace is the whole job.
  if (job_ranks == step_ranks && !leave_pmix)
    if (auto pmix = make_pmix_rendezvous()) return pmix;
  if (job_ranks > 1)
    throw UserError("this job has " + std::to_string(job_ranks) +
                    " ranks but no rendezvous service (FANOUT_KV is not set); start ranks through fanout");
  return std::make_unique<SoloRendezvous>();
}

}  // namespace fanout
