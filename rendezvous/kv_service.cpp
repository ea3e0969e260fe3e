#include "rendezvous/kv_service.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/error.h"
#include "common/text.h"
#include "plugins/sdk/fanout_net.hpp"
#include "plugins/sdk/fanout_socket.hpp"
#include "plugins/sdk/fanout_token.hpp"

namespace fanout {

namespace {

struct Conn {
  int fd = -1;
  std::string in, out;
  std::string token;  // empty until AUTH
  enum class Wait { None, Get, Fence } wait = Wait::None;
  std::string wait_key;
  int64_t deadline_ns = 0;
  int64_t accepted_ns = 0;
  bool closing = false;  // answered with an error: close once `out` is sent
};

// Bounds that keep one careless or hostile peer from taking the service (and with it the sweep) down: a
// connection must authenticate within kAuthTimeoutNs, and at most kMaxUnauthenticated wait to (the oldest makes
// room for a newcomer); a job holds at most 2 connections per rank (+ 8); past kMaxConnections in all (below the
// driver's open-file limit) newcomers are turned away.
constexpr size_t kMaxUnauthenticated = 256;
constexpr size_t kMaxConnections = 60000;
constexpr int64_t kAuthTimeoutNs = 10'000'000'000;
constexpr int64_t kMaxWaitMs = 365LL * 86'400'000;  // a GET or FENCE waits a year at most (longer is clamped: no ns overflow)

struct Job {
  int fence_size = 1;
  std::map<std::string, std::string> kv;
  std::vector<Conn*> fence_waiters;
};

}  // namespace

struct KvService::Impl {
  int listen_fd = -1;
  int wake_pipe[2] = {-1, -1};
  int port = 0;
  std::string advertised;
  std::atomic<bool> stop{false};
  std::mutex mu;  // guards jobs
  std::map<std::string, Job> jobs;
  std::list<Conn> conns;
  std::thread thread;

  void reply_value(Conn& c, const std::string& v) {
    c.out += "VAL " + std::to_string(v.size()) + "\n";
    c.out += v;
    c.wait = Conn::Wait::None;
  }
  void reply(Conn& c, const std::string& line) {
    c.out += line + "\n";
    c.wait = Conn::Wait::None;
  }

  void release_fence(Job& job) {
    for (Conn* w : job.fence_waiters) reply(*w, "OK");
    job.fence_waiters.clear();
  }

  // Consumes complete commands from c.in; returns false when the connection must be closed.
  bool handle(Conn& c) {
    while (c.wait == Conn::Wait::None) {
      size_t nl = c.in.find('\n');
      if (nl == std::string::npos) return c.in.size() < 4096;
      std::string line = c.in.substr(0, nl);
      std::istringstream ls(line);
      std::string cmd;
      ls >> cmd;
      if (cmd == "AUTH") {
        std::string token;
        ls >> token;
        c.in.erase(0, nl + 1);
        if (!jobs.count(token)) return reply(c, "ERR unknown job token"), false;
        const auto same_job = std::count_if(conns.begin(), conns.end(), [&](const Conn& o) { return o.token == token; });
        if (same_job >= 2 * jobs[token].fence_size + 8) return reply(c, "ERR too many connections for this job"), false;
        c.token = token;
        reply(c, "OK");
        continue;
      }
      if (c.token.empty() || !jobs.count(c.token)) return reply(c, "ERR not authenticated"), false;
      Job& job = jobs[c.token];
      if (cmd == "PUT") {
        std::string key;
        size_t len = 0;
        if (!(ls >> key >> len) || len > (64u << 20)) return reply(c, "ERR malformed PUT"), false;
        if (c.in.size() < nl + 1 + len) return true;  // wait for the payload
        job.kv[key] = c.in.substr(nl + 1, len);
        c.in.erase(0, nl + 1 + len);
        reply(c, "OK");
        for (Conn& other : conns)
          if (other.wait == Conn::Wait::Get && other.token == c.token && other.wait_key == key) reply_value(other, job.kv[key]);
      } else if (cmd == "GET") {
        std::string key;
        int64_t timeout_ms = 0;
        if (!(ls >> key >> timeout_ms) || timeout_ms < 0) return reply(c, "ERR malformed GET"), false;
        timeout_ms = std::min(timeout_ms, kMaxWaitMs);
        c.in.erase(0, nl + 1);
        auto it = job.kv.find(key);
        if (it != job.kv.end()) {
          reply_value(c, it->second);
        } else {
          c.wait = Conn::Wait::Get;
          c.wait_key = key;
          c.deadline_ns = monotonic_ns() + timeout_ms * 1000000;
        }
      } else if (cmd == "FENCE") {
        int64_t timeout_ms = 0;
        if (!(ls >> timeout_ms) || timeout_ms < 0) return reply(c, "ERR malformed FENCE"), false;
        timeout_ms = std::min(timeout_ms, kMaxWaitMs);
        c.in.erase(0, nl + 1);
        c.wait = Conn::Wait::Fence;
        c.deadline_ns = monotonic_ns() + timeout_ms * 1000000;
        job.fence_waiters.push_back(&c);
        if (int(job.fence_waiters.size()) >= job.fence_size) release_fence(job);
      } else {
        return reply(c, "ERR unknown command"), false;
      }
    }
    return true;
  }

  void expire(int64_t now) {
    for (Conn& c : conns) {
      if (c.token.empty() && !c.closing && now - c.accepted_ns > kAuthTimeoutNs) reply(c, "ERR no AUTH in time"), c.closing = true;
      if (c.wait == Conn::Wait::None || now < c.deadline_ns) continue;
      if (c.wait == Conn::Wait::Fence) {
        auto& w = jobs[c.token].fence_waiters;
        w.erase(std::remove(w.begin(), w.end(), &c), w.end());
      }
      reply(c, "ERR timeout");
    }
  }

  // Marks the oldest connection that has not authenticated for closing (the loop closes it).
  void make_room() {
    for (Conn& c : conns)
      if (c.token.empty() && !c.closing) {
        c.closing = true;
        c.out.clear();
        return;
      }
  }

  void drop(Conn& c) {
    if (!c.token.empty() && jobs.count(c.token)) {
      auto& w = jobs[c.token].fence_waiters;
      w.erase(std::remove(w.begin(), w.end(), &c), w.end());
    }
    ::close(c.fd);
  }

  void loop() {
    std::vector<pollfd> fds;
    while (!stop) {
      fds.clear();
      fds.push_back({listen_fd, POLLIN, 0});
      fds.push_back({wake_pipe[0], POLLIN, 0});
      for (Conn& c : conns) fds.push_back({c.fd, short(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
      // Woken every 20 ms only while a connection may time out (expire): idle, a sweep of one-rank jobs that never
      // connect, it sleeps until a connection or the stop (50 wake-ups a second on the driver's other CPU before).
      ::poll(fds.data(), fds.size(), conns.empty() ? -1 : 20);
      std::lock_guard<std::mutex> lock(mu);
      if (fds[0].revents & POLLIN) {
        int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        const auto waiting = size_t(std::count_if(conns.begin(), conns.end(), [](const Conn& c) { return c.token.empty() && !c.closing; }));
        if (fd >= 0 && waiting >= kMaxUnauthenticated) make_room();
        if (fd >= 0 && conns.size() >= kMaxConnections) {
          ::close(fd);  // every slot holds an authenticated rank: the newcomer is turned away, the service lives
        } else if (fd >= 0) {
          fanout_sdk::set_nodelay(fd);
          conns.push_back(Conn{});
          conns.back().fd = fd;
          conns.back().accepted_ns = monotonic_ns();
        }
      }
      if (fds[1].revents & POLLIN) {
        char b[64];
        (void)!::read(wake_pipe[0], b, sizeof b);
      }
      size_t i = 2;
      for (auto it = conns.begin(); it != conns.end(); ++i) {
        Conn& c = *it;
        // A connection that was answered with an error is closed once the answer is out; it reads no more.
        bool keep = !c.closing;
        if (keep && i < fds.size() && (fds[i].revents & (POLLIN | POLLHUP | POLLERR))) {
          char buf[65536];
          ssize_t n = ::read(c.fd, buf, sizeof buf);
          if (n > 0) {
            c.in.append(buf, size_t(n));
            keep = handle(c);
          } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            keep = false;
            c.out.clear();
          }
        }
        if (!c.out.empty()) {
          ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
          if (n > 0) c.out.erase(0, size_t(n));
          else if (n < 0 && errno != EAGAIN && errno != EINTR) keep = false, c.out.clear();
        }
        if (!keep && c.out.empty()) {
          drop(c);
          it = conns.erase(it);
        } else {
          if (!keep) c.closing = true;
          ++it;
        }
      }
      expire(monotonic_ns());
    }
    for (Conn& c : conns) ::close(c.fd);
    conns.clear();
  }
};

KvService::KvService(bool all_interfaces) : impl_(std::make_unique<Impl>()) {
  impl_->advertised = all_interfaces ? fanout_sdk::node_ipv4() : "127.0.0.1";
  try {
    impl_->listen_fd = fanout_sdk::tcp_listen(all_interfaces ? "*" : "127.0.0.1", 0, 1024, impl_->port, SOCK_NONBLOCK);
  } catch (const std::runtime_error& e) {
    throw UserError("rendezvous service on " + impl_->advertised + ": " + e.what());
  }
  if (::pipe2(impl_->wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw UserError("rendezvous service: pipe failed");
  impl_->thread = std::thread([this] { impl_->loop(); });
}

KvService::~KvService() {
  impl_->stop = true;
  (void)!::write(impl_->wake_pipe[1], "x", 1);
  impl_->thread.join();
  ::close(impl_->listen_fd);
  ::close(impl_->wake_pipe[0]);
  ::close(impl_->wake_pipe[1]);
}

std::string KvService::address() const { return impl_->advertised + ":" + std::to_string(impl_->port); }

std::string KvService::open_job(int fence_size) {
  std::string token = fanout_sdk::random_hex();
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->jobs[token].fence_size = fence_size;
  return token;
}

void KvService::close_job(const std::string& token) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->jobs.erase(token);
  for (Conn& c : impl_->conns)
    if (c.token == token) c.token.clear(), c.wait = Conn::Wait::None;
}

}  // namespace fanout
