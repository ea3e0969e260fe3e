#include "shared_device.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace torchloader {
namespace {

constexpr size_t kBytes = sizeof(int32_t) * SharedDevices::kMaxDevices;
// How often a step looks at the sharing: a finer slice follows arrivals and departures more closely, for more
// timer wake-ups (2 ms against device steps of tens of ms and more).
constexpr double kSliceSeconds = 0.002;

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

SharedDevices::SharedDevices(const std::string& path, std::vector<int> ids) : ids_(std::move(ids)) {
  for (int id : ids_)
    if (id < 0 || id >= kMaxDevices)
      throw std::runtime_error("torchloader: device id " + std::to_string(id) + " is outside 0.." + std::to_string(kMaxDevices - 1));
  std::sort(ids_.begin(), ids_.end());
  ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("torchloader: cannot open the shared-device file " + path + ": " + std::strerror(errno));
  // ftruncate to the same size is a no-op, so concurrent openers agree; a new file's bytes are zeros.
  if (::ftruncate(fd, off_t(kBytes)) != 0) {
    const int e = errno;
    ::close(fd);
    throw std::runtime_error("torchloader: cannot size the shared-device file " + path + ": " + std::strerror(e));
  }
  void* p = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) throw std::runtime_error("torchloader: cannot map the shared-device file " + path + ": " + std::strerror(errno));
  counters_ = static_cast<int32_t*>(p);
}

SharedDevices::~SharedDevices() {
  if (counters_) ::munmap(counters_, kBytes);
}

int SharedDevices::sharing() const {
  int most = 0;
  for (int id : ids_) most = std::max(most, int(std::atomic_ref<int32_t>(counters_[id]).load()));
  return most;
}

void SharedDevices::run_step(double seconds, int64_t started_ns) {
  for (int id : ids_) std::atomic_ref<int32_t>(counters_[id]).fetch_add(1);
  struct Leave {  // the step's devices are given back however it ends
    SharedDevices& d;
    ~Leave() {
      for (int id : d.ids_) std::atomic_ref<int32_t>(d.counters_[id]).fetch_sub(1);
    }
  } leave{*this};
  // Progress is integrated over slices: elapsed wall time / the sharing seen at the slice's start.
  double remaining = seconds;
  for (int64_t t = started_ns; remaining > 0;) {
    const int share = std::max(1, sharing());
    const double slice = std::min(remaining * share, kSliceSeconds);
    std::this_thread::sleep_until(std::chrono::steady_clock::time_point(std::chrono::nanoseconds(t)) +
                                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(slice)));
    const int64_t now = steady_ns();
    remaining -= double(now - t) * 1e-9 / share;
    t = now;
  }
}

}  // namespace torchloader
