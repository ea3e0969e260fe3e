// Where a rank sits: its rank and size within its step, its place on the node, the node itself, and how
// many ranks the whole job has (for fences). Read from the launcher's environment.
#pragma once
#include <string>

namespace fanout {

struct RankPlace {
  int rank = 0, size = 1, local_rank = 0, local_size = 1, node_index = 0, job_ranks = 1;
  std::string node;
  std::string source;  // which environment it came from: "fanout", "slurm", "openmpi", "pmi", "solo"
};

// FANOUT_* (local launcher) first, then SLURM_*, OMPI_COMM_WORLD_*, PMI_*, else a lone rank.
RankPlace detect_place();

}  // namespace fanout
