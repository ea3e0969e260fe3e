#include "results/staged_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <string>

#include "common/error.h"

namespace fanout {

namespace fs = std::filesystem;

StagedFile::StagedFile(fs::path path, bool gzip, uint64_t direct_after)
    : path_(std::move(path)), tmp_(path_.string() + ".tmp." + std::to_string(::getpid())), direct_after_(direct_after) {
  if (gzip) gz_ = gzopen(tmp_.c_str(), "wb6");
  else fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (!gz_ && fd_ < 0) fail();
  void* mem = nullptr;
  if (posix_memalign(&mem, kAlign, kChunk + kMaxSpill) != 0) throw std::bad_alloc();
  buf_.reset(static_cast<char*>(mem));
}

StagedFile::~StagedFile() {
  if (fd_ >= 0 || gz_) {
    close();
    std::error_code ec;
    fs::remove(tmp_, ec);
  }
}

void StagedFile::line(std::string_view s) {
  while (s.size() + 1 > kChunk + kMaxSpill - used_) {  // longer than the room left: the buffer filled, then out
    const size_t n = kChunk + kMaxSpill - used_;
    std::memcpy(buf_.get() + used_, s.data(), n);
    used_ += n;
    s.remove_prefix(n);
    drain_chunks();
  }
  std::memcpy(buf_.get() + used_, s.data(), s.size());
  used_ += s.size();
  buf_[used_++] = '\n';
  if (used_ >= kChunk) drain_chunks();
}

void StagedFile::commit() {
  drain_chunks();
  if (used_ > 0) {  // the tail, less than a chunk: through the cache
    if (direct_) set_direct(false);
    write_out(used_);
    used_ = 0;
  }
  errno = 0;
  if (!close()) fail();
  std::error_code ec;
  fs::rename(tmp_, path_, ec);
  if (ec) throw UserError("cannot rename " + tmp_.string() + " to " + path_.filename().string() + ": " + ec.message());
}

// Whole chunks out, the rest moved to the front: the file's offset stays a multiple of kChunk, as O_DIRECT needs.
void StagedFile::drain_chunks() {
  size_t done = 0;
  while (used_ - done >= kChunk) {
    if (fd_ >= 0 && !direct_ && !direct_refused_ && written_ >= direct_after_) set_direct(true);
    write_out(kChunk, done);
    done += kChunk;
  }
  if (done) std::memmove(buf_.get(), buf_.get() + done, used_ - done), used_ -= done;
}

void StagedFile::write_out(size_t n, size_t from) {
  if (gz_) {
    if (gzwrite(gz_, buf_.get() + from, unsigned(n)) != int(n)) fail();
    written_ += n;
    return;
  }
  for (size_t off = 0; off < n;) {
    const ssize_t w = ::write(fd_, buf_.get() + from + off, n - off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EINVAL && direct_) {  // the filesystem took the flag but not the write: through the cache
      set_direct(false);
      direct_refused_ = true;
      continue;
    }
    if (w <= 0) fail();
    if (direct_) went_direct_ = true;
    off += size_t(w);
  }
  written_ += n;
}

void StagedFile::set_direct(bool on) {
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags < 0 || ::fcntl(fd_, F_SETFL, on ? flags | O_DIRECT : flags & ~O_DIRECT) != 0) {
    direct_refused_ = true;
    direct_ = false;
    return;
  }
  direct_ = on;
}

// With the system's reason (ENOSPC, EACCES, ...): "cannot write <file>" alone leaves the user guessing.
void StagedFile::fail() {
  const int e = errno;
  throw UserError("cannot write " + tmp_.string() + ": " + (e ? std::strerror(e) : "write failed"));
}

bool StagedFile::close() {
  bool ok = true;
  if (gz_) ok = gzclose(gz_) == Z_OK;
  if (fd_ >= 0) ok = ::close(fd_) == 0;
  gz_ = nullptr;
  fd_ = -1;
  return ok;
}

}  // namespace fanout
