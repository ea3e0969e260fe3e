#include "scheduler.h"

#include "handshakes.h"

#include "fanout_sdk.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <stdexcept>

namespace pslite {

uint32_t server_id(int rank) { return uint32_t(8 + 2 * rank); }
uint32_t worker_id(int rank) { return uint32_t(9 + 2 * rank); }

bool read_message(Link& link, Header& h, std::string& payload, int timeout_ms, std::string& error) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  // Exactly the bytes of one message: nothing after it is read ahead (and lost).
  auto read_exact = [&](char* into, size_t len) {
    for (size_t got = 0; got < len;) {
      ssize_t n = link.read_some(into + got, len - got);
      if (n < 0) return error = "connection closed by " + link.describe(), false;
      if (n == 0) {
        if (std::chrono::steady_clock::now() > until) return error = "timed out waiting for " + link.describe(), false;
        link.wait_readable(100);
        continue;
      }
      got += size_t(n);
    }
    return true;
  };
  unsigned char raw[kHeaderBytes];
  if (!read_exact(reinterpret_cast<char*>(raw), kHeaderBytes)) return false;
  if (std::string why = decode(raw, kHeaderBytes, h); !why.empty()) return error = link.describe() + ": " + why, false;
  if (h.len > (64u << 20)) return error = link.describe() + ": a control message of " + std::to_string(h.len) + " bytes", false;
  payload.assign(size_t(h.len), '\0');
  return read_exact(payload.data(), payload.size());
}

Scheduler::Scheduler(const std::string& host, int port, std::string token) : token_(std::move(token)) {
  listen_fd_ = tcp_listen(host, port, port_);
}

Scheduler::~Scheduler() {
  if (listen_fd_ >= 0) close(listen_fd_);
}

constexpr int kRegisterMs = 5000;        // a connection's AddNode must come within this
constexpr uint64_t kMaxAddNodeBytes = 4096;  // "role host port hostid token": far less

void Scheduler::run(int servers_, int workers_, int register_timeout_ms) {
  struct Node {
    std::unique_ptr<Link> link;
    NodeInfo info;
    bool final_barrier = false, at_barrier = false;
  };
  std::vector<Node> nodes;
  const size_t expected = size_t(servers_ + workers_);
  // Registration: each node connects and sends AddNode, all of them read at once (handshakes.h).
  int next_server = 0, next_worker = 0;
  auto register_node = [&](const Header&, const std::string& payload, std::unique_ptr<Link> link) {
    Node n{std::move(link), {}};
    std::string token;
    std::istringstream in(payload);
    in >> n.info.role >> n.info.host >> n.info.port >> n.info.host_id >> token;
    if ((!token_.empty() && !fanout_sdk::token_matches(token, token_)) || n.info.host.empty() || n.info.port < 0 || n.info.port > 65535)
      return void(++refused_);
    if (n.info.role == "server" && next_server < servers_) n.info.rank = next_server++, n.info.id = server_id(n.info.rank);
    else if (n.info.role == "worker" && next_worker < workers_) n.info.rank = next_worker++, n.info.id = worker_id(n.info.rank);
    else return void(++refused_);  // a role it does not expect (or one too many): not one of this job's nodes
    nodes.push_back(std::move(n));
  };
  Handshakes handshakes(listen_fd_, MsgType::AddNode, kMaxAddNodeBytes, kRegisterMs, register_node);
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(register_timeout_ms);
  while (nodes.size() < expected) {
    if (std::chrono::steady_clock::now() > until)
      throw std::runtime_error("only " + std::to_string(nodes.size()) + " of " + std::to_string(expected) + " nodes registered");
    handshakes.poll_once(100);
  }
  handshakes.drop_all();  // strangers still silent when every node is in
  refused_ += handshakes.refused();
  std::string list;
  for (auto& n : nodes)
    list += std::to_string(n.info.id) + " " + n.info.role + " " + n.info.host + " " + std::to_string(n.info.port) + " " + n.info.host_id + " " +
            std::to_string(n.info.rank) + "\n";
  for (auto& n : nodes) {
    Header h{MsgType::NodeList};
    h.key = n.info.id;  // the receiver's own id
    h.len = list.size();
    n.link->send(h, list.data());
  }
  // Barriers until every node has passed its final one.
  auto broadcast = [&](MsgType type, const std::string& text) {
    for (auto& n : nodes) {
      Header h{type};
      h.len = text.size();
      try {
        n.link->send(h, text.data());
      } catch (const std::exception&) {  // that node has gone too
      }
    }
  };
  size_t finished = 0;
  while (finished < nodes.size()) {
    std::vector<pollfd> fds;
    for (auto& n : nodes) fds.push_back({n.link->poll_fd(), short(n.final_barrier ? 0 : POLLIN), 0});
    if (poll(fds.data(), fds.size(), 1000) <= 0) continue;
    for (size_t i = 0; i < nodes.size(); ++i) {
      Node& n = nodes[i];
      if (n.final_barrier || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Header h{};
      std::string payload, err;
      if (!read_message(*n.link, h, payload, 5000, err)) {
        std::string why = n.info.role + " " + std::to_string(n.info.rank) + " (node id " + std::to_string(n.info.id) + " on " + n.info.host +
                          ") left before the end: " + err;
        broadcast(MsgType::Error, why);
        throw std::runtime_error(why);
      }
      if (h.type != MsgType::Barrier) continue;
      n.at_barrier = true;
      if (h.flags & 1) n.final_barrier = true;
    }
    size_t waiting = 0;
    for (auto& n : nodes) waiting += n.at_barrier;
    if (waiting == nodes.size()) {
      broadcast(MsgType::BarrierDone, "");
      finished = 0;
      for (auto& n : nodes) n.at_barrier = false, finished += n.final_barrier;
    }
  }
}

SchedulerClient::SchedulerClient(const std::string& host, int port, const std::string& role, const std::string& my_host, int my_port,
                                 int timeout_ms, const std::string& token) {
  link_ = tcp_link(tcp_connect(host, port, timeout_ms), "scheduler " + host + ":" + std::to_string(port));
  std::string text = role + " " + my_host + " " + std::to_string(my_port) + " " + host_identity() + (token.empty() ? "" : " " + token);
  Header h{MsgType::AddNode};
  h.len = text.size();
  link_->send(h, text.data());
  std::string payload, err;
  if (!read_message(*link_, h, payload, timeout_ms, err)) throw std::runtime_error("no node list from the scheduler: " + err);
  if (h.type == MsgType::Error) throw std::runtime_error("scheduler: " + payload);
  std::istringstream in(payload);
  NodeInfo n;
  while (in >> n.id >> n.role >> n.host >> n.port >> n.host_id >> n.rank) {
    nodes_.push_back(n);
    if (n.id == h.key) me_ = n;
  }
}

std::vector<NodeInfo> SchedulerClient::servers() const {
  std::vector<NodeInfo> out(nodes_.size());
  size_t count = 0;
  for (auto& n : nodes_)
    if (n.role == "server") out[size_t(n.rank)] = n, ++count;
  out.resize(count);
  return out;
}

void SchedulerClient::barrier(bool final, int timeout_ms) {
  Header h{MsgType::Barrier};
  h.flags = final ? 1 : 0;
  link_->send(h, nullptr);
  std::string payload, err;
  if (!read_message(*link_, h, payload, timeout_ms, err)) throw std::runtime_error("barrier: " + err);
  if (h.type == MsgType::Error) throw std::runtime_error("scheduler: " + payload);
}

}  // namespace pslite
