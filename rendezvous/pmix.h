// PMIx, behind one small header: pmix_enabled.cpp (libpmix) or pmix_disabled.cpp, chosen by CMake.
// Under srun --mpi=pmix or mpirun, a rank learns its place from PMIx and rendezvouses through
// PMIx_Put/Commit/Fence/Get; elsewhere these return nothing and the launcher's environment is used.
#pragma once
#include <memory>
#include <optional>

#include "rendezvous/place.h"
#include "rendezvous/rendezvous.h"

namespace fanout {

bool pmix_compiled_in();
// The rank's place when a PMIx server started it (PMIX_RANK in the environment), else nullopt.
std::optional<RankPlace> pmix_place();
// Rendezvous among the ranks of this PMIx namespace (one step); nullptr without PMIx.
// Portable pattern for plugins: put, fence, get (PMIx makes peers' keys visible at the fence).
std::unique_ptr<Rendezvous> make_pmix_rendezvous();

}  // namespace fanout
