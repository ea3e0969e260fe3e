#include "results/staged_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "common/error.h"

namespace fanout {

namespace fs = std::filesystem;

namespace {

// Writes n bytes whole, again after a signal cut a write short. A filesystem that took O_DIRECT but refuses a write
// with it (EINVAL) gets this write and the rest through the cache. Returns 0 or the errno; `direct` is set once some
// bytes went around the cache.
int write_whole(int fd, const char* p, size_t n, bool& direct) {
  int flags = ::fcntl(fd, F_GETFL);
  for (size_t off = 0; off < n;) {
    const ssize_t w = ::write(fd, p + off, n - off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EINVAL && flags >= 0 && (flags & O_DIRECT) && ::fcntl(fd, F_SETFL, flags & ~O_DIRECT) == 0) {
      flags &= ~O_DIRECT;
      continue;
    }
    if (w <= 0) return w < 0 ? errno : EIO;
    direct = direct || (flags >= 0 && (flags & O_DIRECT));
    off += size_t(w);
  }
  return 0;
}

}  // namespace

StagedFile::StagedFile(fs::path path, bool gzip, uint64_t direct_after)
    : path_(std::move(path)), tmp_(path_.string() + ".tmp." + std::to_string(::getpid())), direct_after_(direct_after) {
  buf_ = new_buffer();  // before the file: a failed allocation leaves no file behind
  if (gzip) gz_ = gzopen(tmp_.c_str(), "wb6");
  else fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (!gz_ && fd_ < 0) fail();
}

StagedFile::Buffer StagedFile::new_buffer() {
  void* mem = nullptr;
  if (posix_memalign(&mem, kAlign, kChunk + kMaxSpill) != 0) throw std::bad_alloc();
  return Buffer(static_cast<char*>(mem));
}

StagedFile::~StagedFile() {
  stop_writer();  // what it has not written yet is dropped with the file
  if (fd_ >= 0 || gz_) close();
  if (!committed_) {  // also after a commit whose close or rename failed
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
  wait_for_writer();
  throw_writer_error();
  stop_writer();
  if (used_ > 0) {  // the tail, less than a chunk: through the cache
    if (direct_) set_direct(false);
    write_out(buf_.get(), used_);
    used_ = 0;
  }
  errno = 0;
  if (!close()) fail();
  std::error_code ec;
  fs::rename(tmp_, path_, ec);
  if (ec) throw UserError("cannot rename " + tmp_.string() + " to " + path_.filename().string() + ": " + ec.message());
  committed_ = true;
}

// Whole chunks out, the rest moved to the front: the file's offset stays a multiple of kChunk, as O_DIRECT needs.
// Direct chunks go to the writer thread.
void StagedFile::drain_chunks() {
  throw_writer_error();
  size_t done = 0;
  while (used_ - done >= kChunk) {
    if (fd_ >= 0 && !direct_ && !direct_refused_ && written_ >= direct_after_) set_direct(true);
    if (direct_) {
      if (done) std::memmove(buf_.get(), buf_.get() + done, used_ - done), used_ -= done, done = 0;
      hand_over_chunk();
      continue;
    }
    write_out(buf_.get() + done, kChunk);
    done += kChunk;
  }
  if (done) std::memmove(buf_.get(), buf_.get() + done, used_ - done), used_ -= done;
}

// buf_'s first chunk to the writer thread (waiting while kInFlight are), what follows it into a buffer it wrote before.
void StagedFile::hand_over_chunk() {
  Buffer next;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!writer_.joinable()) writer_ = std::thread([this] { writer_loop(); });
    cv_.wait(lock, [&] { return queued_.size() + (writing_ ? 1 : 0) < kInFlight || writer_errno_ != 0; });
    if (!spare_.empty()) next = std::move(spare_.back()), spare_.pop_back();
  }
  throw_writer_error();
  if (!next) next = new_buffer();
  std::memcpy(next.get(), buf_.get() + kChunk, used_ - kChunk);
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued_.push_back(std::move(buf_));
    cv_.notify_all();
  }
  buf_ = std::move(next);
  used_ -= kChunk;
  written_ += kChunk;
}

// The writer thread: each chunk in turn, whole. After a failure, or once the file is abandoned, the rest is dropped.
void StagedFile::writer_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  spare_.reserve(kInFlight + 1);  // every buffer it hands back fits: nothing on this thread allocates after this
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queued_.empty(); });
    if (queued_.empty()) return;
    Buffer chunk = std::move(queued_.front());
    queued_.pop_front();
    const bool keep = writer_errno_ == 0 && !stopping_;
    writing_ = true;
    lock.unlock();
    bool direct = false;
    const int error = keep ? write_whole(fd_, chunk.get(), kChunk, direct) : 0;
    lock.lock();
    writing_ = false;
    if (error && !writer_errno_) writer_errno_ = error;
    writer_went_direct_ = writer_went_direct_ || direct;
    spare_.push_back(std::move(chunk));
    cv_.notify_all();
  }
}

void StagedFile::wait_for_writer() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return queued_.empty() && !writing_; });
  went_direct_ = went_direct_ || writer_went_direct_;
}

void StagedFile::stop_writer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (writer_.joinable()) writer_.join();
}

void StagedFile::throw_writer_error() {
  int error = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    error = writer_errno_;
  }
  if (error) {
    errno = error;
    fail();
  }
}

void StagedFile::write_out(const char* from, size_t n) {
  if (gz_) {
    if (gzwrite(gz_, from, unsigned(n)) != int(n)) fail();
    written_ += n;
    return;
  }
  bool direct = false;  // stays false: this thread writes only through the cache (direct chunks are the writer's)
  if (const int error = write_whole(fd_, from, n, direct)) {
    errno = error;
    fail();
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
