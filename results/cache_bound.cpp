#include "results/cache_bound.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <cstdlib>

namespace fanout {

namespace {

// A descriptor of this process open on the file `st` describes, or -1. Whoever opened it keeps it: it is never
// closed here.
int open_descriptor_of(const struct stat& st) {
  DIR* fds = ::opendir("/proc/self/fd");
  if (!fds) return -1;
  int found = -1;
  while (dirent* e = ::readdir(fds)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end || fd == ::dirfd(fds)) continue;
    struct stat of {};
    if (::fstat(int(fd), &of) == 0 && of.st_dev == st.st_dev && of.st_ino == st.st_ino) {
      found = int(fd);
      break;
    }
  }
  ::closedir(fds);
  return found;
}

}  // namespace

CacheBound::CacheBound(const std::filesystem::path& file, uint64_t large, uint64_t every) : file_(file), large_(large), every_(every) {}

void CacheBound::shed() const {
  struct stat st {};
  if (::stat(file_.c_str(), &st) != 0 || uint64_t(st.st_size) <= large_) return;
  if (const int fd = open_descriptor_of(st); fd >= 0) ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
}

void CacheBound::passed(size_t bytes) {
  if ((since_ += bytes) < every_) return;
  since_ = 0;
  shed();
}

}  // namespace fanout
