#include "shared_device.h"

#include <algorithm>
#include <stdexcept>

namespace torchloader {
namespace {

std::vector<int> checked_ids(std::vector<int> ids) {
  for (int id : ids)
    if (id < 0 || id >= SharedDevices::kMaxDevices)
      throw std::runtime_error("torchloader: device id " + std::to_string(id) + " is outside 0.." + std::to_string(SharedDevices::kMaxDevices - 1));
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace

SharedDevices::SharedDevices(const std::string& path, std::vector<int> ids)
    : ids_(checked_ids(std::move(ids))), counters_(path, kMaxDevices, "shared-device") {}

int SharedDevices::sharing() const {
  int most = 0;
  for (int id : ids_) most = std::max(most, int(counters_.get(id)));
  return most;
}

void SharedDevices::run_step(double seconds, int64_t started_ns) {
  for (int id : ids_) counters_.add(id, 1);
  struct Leave {  // the step's devices are given back however it ends
    SharedDevices& d;
    ~Leave() {
      for (int id : d.ids_) d.counters_.add(id, -1);
    }
  } leave{*this};
  progress_until_done(seconds, started_ns, [this] { return double(sharing()); });
}

}  // namespace torchloader
