#include "results/cache_bound.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fanout {

CacheBound::CacheBound(const std::filesystem::path& file, uint64_t large, uint64_t every)
    : fd_(::open(file.c_str(), O_RDONLY | O_CLOEXEC)), large_(large), every_(every) {}

CacheBound::~CacheBound() {
  if (fd_ >= 0) ::close(fd_);
}

void CacheBound::shed() const {
  struct stat st {};
  if (fd_ >= 0 && ::fstat(fd_, &st) == 0 && uint64_t(st.st_size) > large_) ::posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED);
}

void CacheBound::passed(size_t bytes) {
  if ((since_ += bytes) < every_) return;
  since_ = 0;
  shed();
}

}  // namespace fanout
