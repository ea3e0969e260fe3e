// fn(0) .. fn(n-1) spread over the machine's cores: the caller's thread and helpers take the next index until none
// is left. The first exception ends the work (indexes not yet taken are skipped) and is rethrown to the caller, not
// left to end the process in a helper thread. For independent, similar-sized pieces of work (files, plots).
#pragma once
#include <cstddef>
#include <functional>

namespace fanout {

void parallel_for(size_t n, const std::function<void(size_t)>& fn);

}  // namespace fanout
