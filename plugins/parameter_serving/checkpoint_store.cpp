#include "checkpoint_store.h"

#include "fanout_sdk.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace parameter_serving {

namespace {

constexpr char kMagic[8] = {'F', 'P', 'S', 'C', 'K', 'P', 'T', '1'};
constexpr const char* kPrefix = "v";
constexpr const char* kSuffix = ".ckpt";

std::string errno_text(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

void write_all(int fd, const void* data, size_t len, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = ::write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(errno_text("cannot write", path));
    p += n, len -= size_t(n);
  }
}

// "v00000000000000000042.ckpt" -> 42; 0 for anything else (temporaries start with '.').
uint64_t version_of(const char* name) {
  size_t len = std::strlen(name), pl = std::strlen(kPrefix), sl = std::strlen(kSuffix);
  if (len != pl + 20 + sl || std::strncmp(name, kPrefix, pl) != 0 || std::strcmp(name + len - sl, kSuffix) != 0) return 0;
  uint64_t v = 0;
  for (size_t i = pl; i < pl + 20; ++i) {
    if (name[i] < '0' || name[i] > '9') return 0;
    v = v * 10 + uint64_t(name[i] - '0');
  }
  return v;
}

std::vector<uint64_t> versions_in(const std::string& dir) {
  std::vector<uint64_t> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (uint64_t v = version_of(e->d_name)) out.push_back(v);
    ::closedir(d);
  }
  return out;
}

}  // namespace

CheckpointStore::CheckpointStore(std::string dir, int keep_versions, bool fsync_each)
    : dir_(std::move(dir)), keep_(keep_versions < 1 ? 1 : keep_versions), fsync_(fsync_each) {
  if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) throw std::runtime_error(errno_text("cannot create", dir_));
}

std::string CheckpointStore::path_of(uint64_t version) const {
  char name[64];
  std::snprintf(name, sizeof name, "%s%020llu%s", kPrefix, static_cast<unsigned long long>(version), kSuffix);
  return dir_ + "/" + name;
}

size_t CheckpointStore::publish(uint64_t version, const std::vector<char>& payload, int64_t publish_wall_ns) {
  CheckpointHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = version;
  h.payload_bytes = payload.size();
  h.publish_wall_ns = publish_wall_ns;
  h.checksum = fanout_sdk::checksum64(payload.data(), payload.size());
  const std::string final_path = path_of(version);
  const std::string tmp = dir_ + "/.tmp." + std::to_string(::getpid()) + "." + std::to_string(version);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error(errno_text("cannot create", tmp));
  try {
    write_all(fd, &h, sizeof h, tmp);
    write_all(fd, payload.data(), payload.size(), tmp);
    if (fsync_ && ::fsync(fd) != 0) throw std::runtime_error(errno_text("cannot fsync", tmp));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw std::runtime_error(errno_text("cannot close", tmp));
  }
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    throw std::runtime_error(errno_text("cannot rename into", final_path));
  }
  for (uint64_t v : versions_in(dir_))
    if (v + uint64_t(keep_) <= version) ::unlink(path_of(v).c_str());
  return sizeof h + payload.size();
}

uint64_t CheckpointStore::newest_version() const {
  uint64_t newest = 0;
  for (uint64_t v : versions_in(dir_)) newest = v > newest ? v : newest;
  return newest;
}

ReadStatus CheckpointStore::read(uint64_t version, std::vector<char>& payload, CheckpointHeader& header) const {
  const std::string path = path_of(version);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return ReadStatus::Gone;
    throw std::runtime_error(errno_text("cannot open", path));
  }
  auto read_all = [&](void* into, size_t len) {
    char* p = static_cast<char*>(into);
    while (len > 0) {
      ssize_t n = ::read(fd, p, len);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      p += n, len -= size_t(n);
    }
    return true;
  };
  ReadStatus status = ReadStatus::Torn;
  struct stat st {};
  if (read_all(&header, sizeof header) && std::memcmp(header.magic, kMagic, sizeof kMagic) == 0 && header.version == version &&
      ::fstat(fd, &st) == 0 && uint64_t(st.st_size) == sizeof header + header.payload_bytes) {
    payload.resize(header.payload_bytes);
    if (read_all(payload.data(), payload.size()) && fanout_sdk::checksum64(payload.data(), payload.size()) == header.checksum)
      status = ReadStatus::Ok;
  }
  ::close(fd);
  return status;
}

uint64_t free_bytes(const std::string& path) {
  std::string p = path;
  struct statvfs s {};
  while (::statvfs(p.c_str(), &s) != 0) {
    size_t slash = p.find_last_of('/');
    if (p == "/" || p == ".") return 0;
    p = slash == std::string::npos ? "." : slash == 0 ? "/" : p.substr(0, slash);
  }
  return uint64_t(s.f_bavail) * s.f_frsize;
}

}  // namespace parameter_serving
