// Rendezvous for the ranks of one job: put/get/fence. Which implementation a rank uses depends on how it
// was started: the local launcher's key-value service (FANOUT_KV), or none for a lone rank. (PMIx under
// srun/mpirun comes with the Slurm launcher.)
#pragma once
#include <memory>
#include <string>

namespace fanout {

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;
  virtual std::string name() const = 0;
  // Each returns an empty string on success, else what went wrong.
  virtual std::string put(const std::string& key, const std::string& value) = 0;
  virtual std::string get(const std::string& key, int timeout_ms, std::string& value) = 0;
  virtual std::string fence(int timeout_ms) = 0;
};

// Chooses from the environment: the key-value service named by FANOUT_KV, else PMIx when the step is the
// whole job (unless the step's MPI program is to have PMIx: leave_pmix), else in-process for a lone rank. Throws
// UserError when none fits or the service is unreachable.
std::unique_ptr<Rendezvous> make_rendezvous(int job_ranks, int step_ranks, bool leave_pmix = false);

}  // namespace fanout
