#include "rendezvous/place.h"

#include <unistd.h>

#include <cstdlib>

#include "common/text.h"

namespace fanout {

namespace {

std::optional<int> env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return std::nullopt;
  auto i = parse_int(v);
  if (!i) return std::nullopt;
  return int(*i);
}

std::string env_str(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

}  // namespace

RankPlace detect_place() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  RankPlace p;
  p.node = host;
  struct Scheme {
    const char *source, *rank, *size, *local_rank, *local_size, *node_index;
  };
  static const Scheme schemes[] = {
      {"fanout", "FANOUT_RANK", "FANOUT_SIZE", "FANOUT_LOCAL_RANK", "FANOUT_LOCAL_SIZE", "FANOUT_NODE_INDEX"},
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_NODEID"},
      {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_NODE_RANK"},
      {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMI_NODEID"},
  };
  p.source = "solo";
  for (const auto& s : schemes) {
    auto r = env_int(s.rank), n = env_int(s.size);
    if (!r || !n) continue;
    p.source = s.source;
    p.rank = *r;
    p.size = *n;
    // Cray PALS speaks PMI but names the local rank its own way.
    p.local_rank = env_int(s.local_rank).value_or(env_int("PALS_LOCAL_RANKID").value_or(env_int("PMI_LOCAL_RANK").value_or(0)));
    p.local_size = env_int(s.local_size).value_or(1);
    p.node_index = env_int(s.node_index).value_or(0);
    break;
  }
  // Slurm's node name is the one that counts (virtual nodes share one host name).
  p.node = env_str(p.source == std::string("fanout") ? "FANOUT_NODE" : "SLURMD_NODENAME", p.node);
  p.job_ranks = env_int("FANOUT_JOB_RANKS").value_or(p.size);
  return p;
}

}  // namespace fanout
