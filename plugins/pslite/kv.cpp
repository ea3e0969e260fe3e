#include "kv.h"

#include "fanout_sdk.hpp"
#include "handshakes.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <stdexcept>

#ifdef FANOUT_HAVE_IBVERBS
#include <infiniband/verbs.h>
#endif

namespace pslite {

Transport parse_transport(const std::string& text) {
  if (text == "auto") return Transport::Auto;
  if (text == "tcp" || text == "zmq" || text == "0") return Transport::Tcp;
  if (text == "shm" || text == "ipc") return Transport::Shm;
  if (text == "ibverbs" || text == "1") return Transport::Ibverbs;
  throw std::runtime_error("transport '" + text + "' is not one of auto, tcp, shm, ibverbs");
}

std::string transport_name(Transport t) {
  switch (t) {
    case Transport::Auto: return "auto";
    case Transport::Tcp: return "tcp";
    case Transport::Shm: return "shm";
    case Transport::Ibverbs: return "ibverbs";
  }
  return "?";
}

std::string rdma_unavailable_reason() {
#ifdef FANOUT_HAVE_IBVERBS
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list) ibv_free_device_list(list);
  if (n == 0) return "no RDMA device on this node (ibv_get_device_list found none); use DMLC_ENABLE_RDMA=0 or --transport=tcp";
  return "the ibverbs transport's data path is not part of this build (an RDMA device was found; use tcp or shm)";
#else
  return "this build has no RDMA support (rdma-core headers, libibverbs-dev, were missing at build time); use tcp or shm";
#endif
}

// Server s owns [ceil(2^64 s / n), ceil(2^64 (s+1) / n)): exactly the keys with floor(key * n / 2^64) = s.
uint64_t range_begin(int server, int servers) {
  const unsigned __int128 span = (unsigned __int128)1 << 64;
  return uint64_t((span * unsigned(server) + unsigned(servers) - 1) / unsigned(servers));
}

int server_of(uint64_t key, int servers) {
  int s = int(((unsigned __int128)key * unsigned(servers)) >> 64);
  return s < servers ? s : servers - 1;
}

// ---------------------------------------------------------------------------------------------- server

struct KVServer::Peer {
  std::shared_ptr<Link> link;
  std::shared_ptr<ValueBuffer> spare;  // where the next pushed value is received
  uint64_t max_value = 0;              // the largest value the worker declared it pushes
  bool refused = false;                // it pushed more: its link is closing, nothing of it is stored
};

namespace {
constexpr uint64_t kMaxHelloBytes = 4096;  // "token max_value host_id tcp|shm segment": far less
constexpr int kHelloMs = 30000;            // a connection's Hello must come within this
}  // namespace

KVServer::KVServer(const std::string& host, int port, Transport transport, int spin_us, std::string token)
    : transport_(transport), token_(std::move(token)) {
  if (transport == Transport::Ibverbs)
    if (std::string why = rdma_unavailable_reason(); !why.empty()) throw std::runtime_error("DMLC_ENABLE_RDMA=ibverbs: " + why);
  listen_fd_ = tcp_listen(host, port, port_);
  receiver_ = std::make_unique<Receiver>([](Link&, const std::string&) {
    // A worker that leaves is the scheduler's business: it fails the job when that was early.
  }, spin_us);
}

KVServer::~KVServer() {
  stop();
  if (listen_fd_ >= 0) close(listen_fd_);
}

void KVServer::start(uint32_t my_id) {
  id_ = my_id;
  acceptor_ = std::thread([this] { accept_loop(); });
}

void KVServer::stop() {
  if (stopping_.exchange(true)) return;
  if (acceptor_.joinable()) acceptor_.join();
  receiver_->stop();
  std::lock_guard<std::mutex> lock(peers_mu_);
  for (auto& p : peers_) p->link->close();
}

std::vector<std::string> KVServer::link_descriptions() {
  std::lock_guard<std::mutex> lock(peers_mu_);
  std::vector<std::string> out;
  for (auto& p : peers_) out.push_back(p->link->describe());
  return out;
}

void KVServer::accept_loop() {
  Handshakes handshakes(listen_fd_, MsgType::Hello, kMaxHelloBytes, kHelloMs,
                        [this](const Header& h, const std::string& payload, std::unique_ptr<Link> tcp) { hello(h, payload, std::move(tcp)); });
  while (!stopping_) handshakes.poll_once(200);
  handshakes.drop_all();
  refused_ += handshakes.refused();
}

// Hello payload: "<token or -> <largest value> <host id> tcp" or "... shm <segment name>".
void KVServer::hello(const Header& h, const std::string& payload, std::unique_ptr<Link> tcp) {
  std::istringstream in(payload);
  std::string token, host, kind, segment_name;
  uint64_t max_value = 0;
  in >> token >> max_value >> host >> kind >> segment_name;
  auto refuse = [&](const std::string& why) {
    ++refused_;
    Header e{MsgType::Error};
    e.len = why.size();
    try {
      tcp->send(e, why.data());
    } catch (const std::exception&) {
    }
  };
  if (!token_.empty() && !fanout_sdk::token_matches(token, token_)) return refuse("wrong token: not a worker of this job");
  if (max_value == 0 || max_value > kMaxPayload || host.empty() || (kind != "tcp" && kind != "shm"))
    return refuse("malformed hello (token, largest value 1 to " + std::to_string(kMaxPayload) + " bytes, host id, tcp or shm)");
  try {
    std::shared_ptr<Link> link;
    Header ok{MsgType::HelloOk};
    ok.sender = id_;
    ok.len = 3;
    if (kind == "shm") {
      if (host != host_identity() || transport_ == Transport::Tcp)
        return refuse(transport_ == Transport::Tcp ? "this server uses tcp only" : "the worker is on another host");
      auto segment = open_shm_segment(segment_name);
      tcp->send(ok, "shm");
      link = shm_link(std::move(tcp), segment, false);
    } else {
      tcp->send(ok, "tcp");
      link = std::move(tcp);
    }
    link->peer_id = h.sender;
    serve(link, max_value);
  } catch (const std::exception&) {
    // A worker that failed its handshake does not stop the others; it fails on its side with the reason.
  }
}

void KVServer::serve(std::shared_ptr<Link> link, uint64_t max_value) {
  auto peer = std::make_shared<Peer>();
  peer->link = link;
  peer->max_value = max_value;
  {
    std::lock_guard<std::mutex> lock(peers_mu_);
    peers_.push_back(peer);
  }
  Link* l = link.get();
  auto on_header = [this, peer](const Header& h) -> char* {
    if (h.type != MsgType::Push && h.type != MsgType::PushPull) return nullptr;
    if (h.len > peer->max_value) {  // more than it declared: close before allocating (the read then ends)
      if (!peer->refused) ++refused_;
      peer->refused = true;
      peer->link->close();
      return nullptr;
    }
    if (!peer->spare || peer->spare.use_count() > 1) peer->spare = std::make_shared<ValueBuffer>();
    peer->spare->resize(size_t(h.len));
    return peer->spare->data();
  };
  auto on_message = [this, peer, l](const Header& h) {
    if (peer->refused) return;
    ++messages_;
    std::shared_ptr<ValueBuffer> value;
    if (h.type == MsgType::Push || h.type == MsgType::PushPull) {
      std::lock_guard<std::mutex> lock(store_mu_);
      auto& slot = store_[h.key];
      std::swap(slot, peer->spare);  // the old value becomes the next receive buffer unless a pull still sends it
      value = slot;
    } else if (h.type == MsgType::Pull) {
      std::lock_guard<std::mutex> lock(store_mu_);
      auto it = store_.find(h.key);
      if (it != store_.end()) value = it->second;
    } else {
      return;
    }
    Header r{h.type == MsgType::Push ? MsgType::Ack : MsgType::Value};
    r.sender = id_;
    r.request = h.request;
    r.key = h.key;
    r.len = h.type == MsgType::Push || !value ? 0 : value->size();
    try {
      l->send(r, r.len ? value->data() : nullptr);
    } catch (const std::exception&) {  // the worker has gone; the receiver notices its link closing
    }
  };
  receiver_->add(link, on_header, on_message);
}

// ---------------------------------------------------------------------------------------------- worker

KVWorker::KVWorker(const std::vector<NodeInfo>& servers, uint32_t my_id, Transport transport, size_t shm_ring_bytes, int timeout_ms,
                   int spin_us, const std::string& token, uint64_t max_value)
    : id_(my_id),
      receiver_([this](Link& link, const std::string& why) {
        std::lock_guard<std::mutex> lock(mu_);
        if (failure_.empty()) failure_ = why;
        cv_.notify_all();
      }, spin_us),
      spin_ns_(int64_t(spin_us) * 1000) {
  if (transport == Transport::Ibverbs)
    if (std::string why = rdma_unavailable_reason(); !why.empty()) throw std::runtime_error("DMLC_ENABLE_RDMA=ibverbs: " + why);
  const std::string me = host_identity();
  for (auto& s : servers) {
    std::unique_ptr<Link> tcp = tcp_link(tcp_connect(s.host, s.port, timeout_ms), s.host + ":" + std::to_string(s.port));
    const bool same_host = s.host_id == me;
    if (transport == Transport::Shm && !same_host)
      throw std::runtime_error("transport shm: server " + std::to_string(s.rank) + " runs on another host (" + s.host + ")");
    std::shared_ptr<ShmSegment> segment;
    const std::string intro = (token.empty() ? "-" : token) + " " + std::to_string(max_value) + " " + me;
    std::string hello = intro + " tcp";
    if (same_host && transport != Transport::Tcp) {
      segment = create_shm_segment(shm_ring_bytes);
      hello = intro + " shm " + shm_segment_name(*segment);
    }
    Header h{MsgType::Hello};
    h.sender = my_id;
    h.len = hello.size();
    tcp->send(h, hello.data());
    std::string payload, err;
    bool ok = read_message(*tcp, h, payload, timeout_ms, err);
    if (segment) unlink_shm_segment(*segment);  // mapped on both sides (or refused): the name is not needed
    if (!ok) throw std::runtime_error("handshake with server " + std::to_string(s.rank) + " at " + s.host + ": " + err);
    if (h.type == MsgType::Error) throw std::runtime_error("server " + std::to_string(s.rank) + " refused: " + payload);
    std::shared_ptr<Link> link;
    if (payload == "shm") link = shm_link(std::move(tcp), segment, true);
    else link = std::move(tcp);
    link->peer_id = h.sender;
    links_.push_back(link);
  }
  for (auto& link : links_) {
    auto on_header = [this](const Header& h) -> char* {
      if (h.type != MsgType::Value || h.len == 0) return nullptr;
      std::lock_guard<std::mutex> lock(mu_);
      auto it = pending_.find(h.request);
      if (it == pending_.end()) return nullptr;
      if (h.len > it->second.cap) {
        if (failure_.empty()) failure_ = "the value of key " + std::to_string(h.key) + " has " + std::to_string(h.len) +
                                         " bytes, more than the " + std::to_string(it->second.cap) + "-byte buffer given to pull";
        return nullptr;
      }
      return it->second.out;
    };
    auto on_message = [this](const Header& h) {
      bool answered = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = pending_.find(h.request);
        if (it == pending_.end()) return;
        if (it->second.out_len) *it->second.out_len = size_t(h.len);
        uint64_t ts = it->second.ts;
        pending_.erase(it);
        answered = --remaining_[ts] == 0;
      }
      // Woken after the lock is let go: a waiter woken under it would find the lock held and sleep once more.
      if (answered) cv_.notify_all();
    };
    receiver_.add(link, on_header, on_message);
  }
}

KVWorker::~KVWorker() {
  receiver_.stop();
  for (auto& l : links_) l->close();
}

uint64_t KVWorker::request(MsgType type, const std::vector<KVItem>& items) {
  uint64_t ts, first;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.empty()) throw std::runtime_error(failure_);
    ts = next_ts_++;
    first = next_request_;
    next_request_ += items.size();
    remaining_[ts] = items.size();
    for (size_t i = 0; i < items.size(); ++i) pending_[first + i] = {ts, items[i].out, items[i].cap, items[i].out_len};
    last_depth_ = pending_.size();
  }
  // Each server's share of the request in one batch (one sendmsg over TCP, not one per key).
  const int n = int(links_.size());
  std::vector<std::vector<Link::Outgoing>> per_server(links_.size());
  for (size_t i = 0; i < items.size(); ++i) {
    Header h{type};
    h.sender = id_;
    h.request = first + i;
    h.key = items[i].key;
    h.len = type == MsgType::Pull ? 0 : items[i].len;
    per_server[size_t(server_of(items[i].key, n))].push_back({h, type == MsgType::Pull ? nullptr : items[i].value});
  }
  for (size_t s = 0; s < links_.size(); ++s)
    if (!per_server[s].empty()) links_[s]->send_batch(per_server[s]);
  return ts;
}

void KVWorker::wait(uint64_t ts) {
  std::unique_lock<std::mutex> lock(mu_);
  auto answered = [&] { return remaining_[ts] == 0 || !failure_.empty(); };
  // Poll for a while first (a wake-up through the condition variable costs more than a short round trip).
  for (const int64_t until = spin_ns_ > 0 ? now_ns() + spin_ns_ : 0; spin_ns_ > 0 && !answered() && now_ns() < until;) {
    lock.unlock();
    cpu_relax();
    lock.lock();
  }
  cv_.wait(lock, answered);
  if (!failure_.empty()) throw std::runtime_error(failure_);
  remaining_.erase(ts);
}

size_t KVWorker::depth_at_last_request() {
  std::lock_guard<std::mutex> lock(mu_);
  return last_depth_;
}

}  // namespace pslite
