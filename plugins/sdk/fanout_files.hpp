// Writing a file so that readers see the old content or all of the new, never a part: the one write-then-rename
// every plugin uses (header-only; part of the SDK, so it depends on nothing of fanout's). The temporary name is
// unique per process and thread, so two ranks or threads writing the same file never collide on it.
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

namespace fanout_sdk {

// "<path>.tmp.<pid>.<thread>": beside the file (same file system, so the rename is atomic), and different for
// every concurrent writer (a fixed "<path>.tmp" let two writers interleave their bytes, then rename a mix).
inline std::string temp_name_for(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
}

// Lets write_to(tmp) create the file under a temporary name, then renames it to path. Any failure (write_to
// throwing, the rename failing) removes the temporary file and throws std::runtime_error naming the path.
template <typename WriteTo>
void replace_file_atomic(const std::string& path, WriteTo&& write_to) {
  const std::string tmp = temp_name_for(path);
  try {
    write_to(tmp);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot rename " + tmp + " to " + path + ": " + std::strerror(err));
  }
}

// Writes bytes to path atomically with the given mode (created so, whatever the umask). Every write and the
// close are checked: a full disk is an error naming the path, never a short file under the real name.
inline void write_file_atomic(const std::string& path, std::string_view bytes, mode_t mode = 0644) {
  replace_file_atomic(path, [&](const std::string& tmp) {
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) throw std::runtime_error("cannot create " + tmp + ": " + std::strerror(errno));
    ::fchmod(fd, mode);
    for (size_t at = 0; at < bytes.size();) {
      const ssize_t n = ::write(fd, bytes.data() + at, bytes.size() - at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int err = errno;
        ::close(fd);
        throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(err));
      }
      at += size_t(n);
    }
    if (::close(fd) != 0) throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
  });
}

}  // namespace fanout_sdk
