#include "fluid_sharing.h"

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

// The counters are shared by processes: only a lock-free atomic is one there.
static_assert(std::atomic_ref<int32_t>::is_always_lock_free);

NodeCounters::NodeCounters(const std::string& path, int count, const std::string& what) : bytes_(sizeof(int32_t) * size_t(std::max(1, count))) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("torchloader: cannot open the " + what + " file " + path + ": " + std::strerror(errno));
  // ftruncate to the same size is a no-op, so concurrent openers agree; a new file's bytes are zeros.
  if (::ftruncate(fd, off_t(bytes_)) != 0) {
    const int e = errno;
    ::close(fd);
    throw std::runtime_error("torchloader: cannot size the " + what + " file " + path + ": " + std::strerror(e));
  }
  void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  if (p == MAP_FAILED) throw std::runtime_error("torchloader: cannot map the " + what + " file " + path + ": " + std::strerror(map_errno));
  counters_ = static_cast<int32_t*>(p);
}

NodeCounters::~NodeCounters() {
  if (counters_) ::munmap(counters_, bytes_);
}

int32_t NodeCounters::add(int i, int32_t delta) { return std::atomic_ref<int32_t>(counters_[i]).fetch_add(delta) + delta; }

int32_t NodeCounters::get(int i) const { return std::atomic_ref<int32_t>(counters_[i]).load(); }

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void progress_until_done(double seconds, int64_t started_ns, const std::function<double()>& slowdown, double slice_s) {
  // Progress is integrated over slices: elapsed wall time / the larger of the slowdowns seen at the slice's start and
  // at its end. A slice that woke late may have outlived a change of sharing (another step arriving): counted at the
  // rate from before it, the step ran ahead of the model; counted at the slower of the two, it never does.
  double remaining = seconds;
  for (int64_t t = started_ns; remaining > 0;) {
    const double by = std::max(1.0, slowdown());
    const double slice = std::min(remaining * by, slice_s);
    std::this_thread::sleep_until(std::chrono::steady_clock::time_point(std::chrono::nanoseconds(t)) +
                                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(slice)));
    const int64_t now = steady_now_ns();
    remaining -= double(now - t) * 1e-9 / std::max(by, slowdown());
    t = now;
  }
}

}  // namespace torchloader
