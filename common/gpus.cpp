#include "common/gpus.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "common/text.h"

namespace fanout {

std::vector<std::string> visible_gpus() {
  std::vector<std::string> out;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) {  // set but empty: no GPU (as CUDA reads it)
    for (auto& g : split(v, ','))
      if (!trim(g).empty()) out.push_back(trim(g));
    return out;
  }
  std::vector<int64_t> numbers;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/dev", ec)) {
    const std::string name = e.path().filename().string();
    if (starts_with(name, "nvidia"))
      if (auto n = parse_int(name.substr(6))) numbers.push_back(*n);
  }
  std::sort(numbers.begin(), numbers.end());
  for (auto n : numbers) out.push_back(std::to_string(n));
  return out;
}

std::optional<std::string> task_gpus(const std::vector<std::string>& gpus, int local_rank, int per_task) {
  const size_t first = size_t(local_rank) * size_t(per_task);
  if (per_task < 1 || local_rank < 0 || first + size_t(per_task) > gpus.size()) return std::nullopt;
  std::vector<std::string> mine(gpus.begin() + long(first), gpus.begin() + long(first + size_t(per_task)));
  return join(mine, ",");
}

}  // namespace fanout
