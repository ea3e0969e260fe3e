// fn(0) .. fn(n-1) spread over the CPUs this process may use: the caller's thread and helpers take the next index
// until none is left. The first exception ends the work (indexes not yet taken are skipped) and is rethrown to the
// caller, not left to end the process in a helper thread. For independent, similar-sized pieces of work (files,
// plots). Callers that report errors by position catch inside fn (which exception comes first is timing's).
#pragma once
#include <cstddef>
#include <functional>

namespace fanout {

void parallel_for(size_t n, const std::function<void(size_t)>& fn);

// The CPUs this process may run on (its affinity mask: a cgroup or taskset on a shared node), at least 1.
size_t usable_cpus();

}  // namespace fanout
