#include "common/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace fanout {

namespace {

// Writes all of `content` to fd: 0, or the errno of the write that failed.
int write_all(int fd, std::string_view content) {
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;  // no progress: never loop on it
    off += static_cast<size_t>(n);
  }
  return 0;
}

// A descriptor on `path` opened with `flags`, and its stat, if it is a regular file; else a UserError naming it.
// O_NONBLOCK: opening a FIFO returns at once (or fails) instead of waiting for its other end. The file checked is the
// file used (one descriptor): nothing can be swapped in between.
int open_regular_file(const std::filesystem::path& path, int flags, const char* verb, struct stat& st) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw UserError("cannot " + std::string(verb) + " " + path.string() + ": " + std::strerror(errno));
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw UserError(path.string() + ": not a regular file");
  }
  return fd;
}

// A new file's write failed: it is closed and removed, and the error names it.
[[noreturn]] void discard_written(int fd, const std::string& written, int error) {
  ::close(fd);
  ::unlink(written.c_str());
  throw UserError("cannot write " + written + ": " + std::strerror(error));
}

}  // namespace

void write_file_atomic(const std::filesystem::path& path, std::string_view content, int mode, Durability durability) {
  std::string tmp = path.string() + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) throw UserError("cannot write " + tmp + ": " + std::strerror(errno));
  if (int e = write_all(fd, content)) discard_written(fd, tmp, e);
  if (durability == Durability::Now) ::fsync(fd);
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw UserError("cannot rename " + tmp + " to " + path.string() + ": " + std::strerror(e));
  }
}

void write_new_file(const std::filesystem::path& path, std::string_view content, int mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) throw UserError("cannot write " + path.string() + ": " + std::strerror(errno));
  if (int e = write_all(fd, content)) discard_written(fd, path.string(), e);
  ::close(fd);
}

void append_to_file(const std::filesystem::path& path, std::string_view content, Durability durability) {
  // Not through a link: a rename used to replace whatever stood there.
  struct stat st {};
  const int fd = open_regular_file(path, O_WRONLY | O_APPEND | O_NOFOLLOW, "append to", st);
  int e = write_all(fd, content);
  if (e != 0) {
    // A short write (a full disk) is cut back: the file is as it was. If even that fails, the error below stands.
    [[maybe_unused]] const int cut = ::ftruncate(fd, st.st_size);
  }
  if (e == 0 && durability == Durability::Now && ::fsync(fd) != 0) e = errno;
  ::close(fd);
  if (e != 0) throw UserError("cannot append to " + path.string() + ": " + std::strerror(e));
}

// read() into a string sized from fstat (a stream copied through an ostringstream cost more than decoding the
// samples it held); files that grow or report no size (pipes, /proc) are read to their end all the same.
namespace {

// Reads fd to its end, or to `limit` bytes, and closes it. `expected`: the size fstat gave (0: unknown).
std::string read_and_close(int fd, const std::filesystem::path& path, size_t expected, size_t limit) {
  std::string out;
  out.resize(std::min(limit, expected > 0 ? expected : size_t(4096)));
  size_t have = 0;
  char more[65536];  // past the expected size: read aside first, so that a whole file costs no extra zeroed copy
  while (have < limit) {
    const bool full = have == out.size();
    const size_t room = full ? std::min(sizeof more, limit - have) : out.size() - have;
    const ssize_t n = ::read(fd, full ? more : out.data() + have, room);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      throw UserError("cannot read " + path.string() + ": " + std::strerror(e));
    }
    if (n == 0) break;
    if (full) out.append(more, size_t(n));
    have += size_t(n);
  }
  ::close(fd);
  out.resize(have);
  return out;
}

}  // namespace

std::string read_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UserError("cannot read " + path.string() + ": " + std::strerror(errno));
  struct stat st {};
  return read_and_close(fd, path, ::fstat(fd, &st) == 0 && st.st_size > 0 ? size_t(st.st_size) : 0, SIZE_MAX);
}

std::string read_input_file(const std::filesystem::path& path, size_t max_bytes) {
  struct stat st {};
  const int fd = open_regular_file(path, O_RDONLY | O_NOCTTY, "read", st);
  if (size_t(st.st_size) > max_bytes) {
    ::close(fd);
    throw UserError(path.string() + ": " + std::to_string(st.st_size) + " bytes, more than the " + std::to_string(max_bytes) + " such a file may have");
  }
  // One byte past the cap: a file that grew past it meanwhile is seen to.
  std::string text = read_and_close(fd, path, size_t(st.st_size), max_bytes + 1);
  if (text.size() > max_bytes) throw UserError(path.string() + ": grew past " + std::to_string(max_bytes) + " bytes while read");
  return text;
}

void sync_filesystem(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ::sync();
  ::syncfs(fd);
  ::close(fd);
}

std::vector<FolderEntry> list_folder(const std::filesystem::path& dir, std::error_code& error) {
  error.clear();
  std::vector<FolderEntry> out;
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    error.assign(errno, std::generic_category());
    return out;
  }
  alignas(8) char buf[16384];
  for (;;) {
    const ssize_t n = ::getdents64(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error.assign(errno, std::generic_category());
      out.clear();
      break;
    }
    if (n == 0) break;
    for (ssize_t at = 0; at < n;) {
      const auto* e = reinterpret_cast<const struct dirent64*>(buf + at);
      at += e->d_reclen;
      const std::string_view name(e->d_name);
      if (name != "." && name != "..") out.push_back({std::string(name), e->d_type});
    }
  }
  ::close(fd);
  return out;
}

namespace {
// The umask never_group_or_world_writable() left, -1 before it ran (reading it otherwise means setting it, or /proc).
std::atomic<int> known_umask{-1};
}  // namespace

void make_private_dirs(const std::filesystem::path& dir) {
  // A run's folder is one new folder in one that is there: a mkdir, not create_directories' look at each part first
  // (three path walks more a run). A new folder the umask left 0755 needs no chmod (a path walk and an inode
  // dirtied again, a run).
  if (::mkdir(dir.c_str(), 0755) == 0) {
    const int mask = known_umask.load(std::memory_order_relaxed);
    if (mask >= 0 && (mode_t(mask) & 0755) == 0) return;
  } else {
    std::filesystem::create_directories(dir);
  }
  ::chmod(dir.c_str(), 0755);
}

void never_group_or_world_writable() {
  const mode_t old = ::umask(022);
  ::umask(old | 022);
  known_umask.store(int(old | 022), std::memory_order_relaxed);
}

bool plain_folder_name(std::string_view name) {
  if (name.empty() || name.size() > 255 || name == "." || name == "..") return false;
  for (unsigned char c : name)
    if (c == '/' || c < 0x20 || c == 0x7f) return false;
  return true;
}

}  // namespace fanout
