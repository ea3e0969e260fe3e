// Data parallelism of a multi-node training application (torchloader's node_size > 1): after every backward,
// the processes average their gradients through process 0 (a star over TCP: each sends its gradients, process 0
// sums, divides and sends the mean back), so every process applies the same update and the replicas stay equal.
// The same exchange carries the pause decision: a process that was asked to pause says so, process 0 decides for
// all, and every replica stops after the same iteration (a lone pause would leave the others waiting).
// Peers present the job's channel token before their rank; process 0 drops (and counts) any connection that
// does not, within a short handshake deadline, so a stranger can neither join nor stall the exchange.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace torchloader {

// The environment variable that carries the job's channel token to a training process (not argv: any local user
// can read that).
inline constexpr const char* kTokenVariable = "FANOUT_TORCHLOADER_TOKEN";

class GradientExchange {
 public:
  // Process 0: listens on bind_ip (an ephemeral port, told to on_listening before waiting) for world - 1 peers.
  // Process r > 0: connects to address ("ip:port"), retrying until timeout_ms, and presents token.
  GradientExchange(int rank, int world, const std::string& address, const std::string& token,
                   const std::function<void(int port)>& on_listening, int timeout_ms = 120000);
  ~GradientExchange();
  GradientExchange(const GradientExchange&) = delete;
  GradientExchange& operator=(const GradientExchange&) = delete;

  // Replaces data[0..n) with the mean over all processes; returns true when any process wants to pause.
  // Throws std::runtime_error when a peer is gone or silent for the timeout.
  bool average(float* data, size_t n, bool want_pause);
  int rank() const { return rank_; }
  int world() const { return world_; }
  int refused() const { return refused_; }  // process 0: connections dropped for a wrong token or rank

 private:
  int rank_, world_;
  int refused_ = 0;
  std::vector<int> peers_;  // process 0: fds of ranks 1..world-1, in rank order; others: [fd to process 0]
  std::vector<float> scratch_;
};

}  // namespace torchloader
