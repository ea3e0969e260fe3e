// Two single-producer single-consumer byte rings in one POSIX shared-memory segment, one per direction.
// Messages stream through them in pieces (a 16 MiB value through a smaller ring). A side that must wait (no
// data, or no room) sleeps on a futex in the segment; the other side wakes it only when it said it sleeps.
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "link.h"

namespace pslite {

namespace {

constexpr uint64_t kSegMagic = 0x314d48534c535046ull;  // "FPSLSHM1"

struct alignas(64) RingCtl {
  std::atomic<uint64_t> head{0};  // bytes written, ever
  char pad1[56];
  std::atomic<uint64_t> tail{0};  // bytes read, ever
  char pad2[56];
  std::atomic<uint32_t> data_seq{0}, space_seq{0};  // futex words
  std::atomic<uint32_t> reader_waiting{0}, writer_waiting{0};
  std::atomic<uint32_t> closed{0};
};

struct Segment {
  uint64_t magic;
  uint64_t ring_bytes;
  RingCtl ring[2];  // ring 0: creator -> opener; ring 1: opener -> creator
};

size_t data_offset() { return (sizeof(Segment) + 4095) & ~size_t(4095); }

void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, int timeout_ms) {
  timespec ts{timeout_ms / 1000, long(timeout_ms % 1000) * 1000000};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}
void futex_wake(std::atomic<uint32_t>& word) { syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, 1, nullptr, nullptr, 0); }

}  // namespace

class ShmSegment {
 public:
  ShmSegment(std::string name, void* base, size_t bytes) : name(std::move(name)), base(base), bytes(bytes) {}
  ~ShmSegment() { munmap(base, bytes); }
  std::string name;
  void* base;
  size_t bytes;
};

namespace {

class ShmLink : public Link {
 public:
  ShmLink(std::unique_ptr<Link> control, std::shared_ptr<ShmSegment> segment, bool creator)
      : control_(std::move(control)), segment_(std::move(segment)), seg_(static_cast<Segment*>(segment_->base)) {
    cap_ = seg_->ring_bytes;
    char* data = static_cast<char*>(segment_->base) + data_offset();
    out_ = &seg_->ring[creator ? 0 : 1];
    in_ = &seg_->ring[creator ? 1 : 0];
    out_data_ = data + (creator ? 0 : cap_);
    in_data_ = data + (creator ? cap_ : 0);
    peer_id = control_->peer_id;
  }
  ~ShmLink() override { close(); }

  void send(const Header& h, const void* payload) override {
    unsigned char raw[kHeaderBytes];
    encode(h, raw);
    std::lock_guard<std::mutex> lock(send_mu_);
    write(reinterpret_cast<const char*>(raw), kHeaderBytes);
    if (h.len && payload) write(static_cast<const char*>(payload), size_t(h.len));
  }

  ssize_t read_some(void* buf, size_t want) override {
    const uint64_t tail = in_->tail.load(std::memory_order_relaxed), head = in_->head.load(std::memory_order_acquire);
    if (head == tail) return in_->closed.load() || closed_ || dead_ ? -1 : 0;
    size_t n = std::min<size_t>(want, size_t(head - tail)), off = size_t(tail % cap_), first = std::min(n, cap_ - off);
    std::memcpy(buf, in_data_ + off, first);
    std::memcpy(static_cast<char*>(buf) + first, in_data_, n - first);
    in_->tail.store(tail + n, std::memory_order_release);
    in_->space_seq.fetch_add(1, std::memory_order_seq_cst);
    if (in_->writer_waiting.exchange(0)) futex_wake(in_->space_seq);
    return ssize_t(n);
  }

  void wait_readable(int timeout_ms) override {
    const uint32_t seq = in_->data_seq.load(std::memory_order_seq_cst);
    in_->reader_waiting.store(1, std::memory_order_seq_cst);
    if (in_->head.load(std::memory_order_seq_cst) != in_->tail.load(std::memory_order_relaxed) || peer_gone()) return;
    futex_wait(in_->data_seq, seq, timeout_ms);
    peer_gone();  // a peer that died while we slept: noticed after at most timeout_ms
  }

  int poll_fd() const override { return -1; }
  std::string describe() const override { return "shm (" + control_->describe() + ")"; }
  void close() override {
    if (closed_.exchange(true)) return;
    out_->closed.store(1);
    in_->closed.store(1);
    out_->data_seq.fetch_add(1), futex_wake(out_->data_seq);
    in_->data_seq.fetch_add(1), futex_wake(in_->data_seq);
    control_->close();
  }

 private:
  // The peer has gone when it closed the rings, or its process died (its end of the control socket closed).
  bool peer_gone() {
    if (in_->closed.load() || closed_ || dead_) return true;
    char c;
    if (control_->read_some(&c, 1) < 0) dead_ = true;
    return dead_;
  }

  void write(const char* src, size_t len) {
    while (len > 0) {
      const uint64_t head = out_->head.load(std::memory_order_relaxed), tail = out_->tail.load(std::memory_order_acquire);
      const size_t space = cap_ - size_t(head - tail);
      if (space == 0) {
        const uint32_t seq = out_->space_seq.load(std::memory_order_seq_cst);
        out_->writer_waiting.store(1, std::memory_order_seq_cst);
        if (out_->tail.load(std::memory_order_seq_cst) != tail) continue;
        if (out_->closed.load() || peer_gone()) throw std::runtime_error("send over " + describe() + ": the peer has gone");
        futex_wait(out_->space_seq, seq, 200);
        continue;
      }
      size_t n = std::min(space, len), off = size_t(head % cap_), first = std::min(n, cap_ - off);
      std::memcpy(out_data_ + off, src, first);
      std::memcpy(out_data_, src + first, n - first);
      out_->head.store(head + n, std::memory_order_release);
      out_->data_seq.fetch_add(1, std::memory_order_seq_cst);
      if (out_->reader_waiting.exchange(0)) futex_wake(out_->data_seq);
      src += n, len -= n;
    }
  }

  std::unique_ptr<Link> control_;
  std::shared_ptr<ShmSegment> segment_;
  Segment* seg_;
  size_t cap_;
  RingCtl *out_, *in_;
  char *out_data_, *in_data_;
  std::mutex send_mu_;
  std::atomic<bool> closed_{false}, dead_{false};
};

void* map_segment(int fd, size_t bytes, const std::string& name) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) throw std::runtime_error("cannot map shared memory " + name + ": " + std::strerror(errno));
  return p;
}

}  // namespace

std::shared_ptr<ShmSegment> create_shm_segment(size_t ring_bytes) {
  uint64_t r = 0;
  while (getrandom(&r, sizeof r, 0) != sizeof r) {
  }
  std::string name = "/fanout-pslite-" + std::to_string(getpid()) + "-" + std::to_string(r);
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  const size_t bytes = data_offset() + 2 * ring_bytes;
  if (fd < 0 || ftruncate(fd, off_t(bytes)) != 0) {
    int e = errno;
    if (fd >= 0) ::close(fd), shm_unlink(name.c_str());
    throw std::runtime_error("cannot create shared memory " + name + " of " + std::to_string(bytes) + " bytes: " + std::strerror(e));
  }
  void* p = map_segment(fd, bytes, name);
  auto* seg = new (p) Segment{};
  seg->magic = kSegMagic;
  seg->ring_bytes = ring_bytes;
  return std::make_shared<ShmSegment>(name, p, bytes);
}

std::shared_ptr<ShmSegment> open_shm_segment(const std::string& name) {
  if (name.rfind("/fanout-pslite-", 0) != 0 || name.find('/', 1) != std::string::npos)
    throw std::runtime_error("'" + name + "' is not a fanout ps-lite segment name");
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot open shared memory " + name + ": " + std::strerror(errno));
  struct stat st {};
  fstat(fd, &st);
  if (size_t(st.st_size) < data_offset()) {
    ::close(fd);
    throw std::runtime_error("shared memory " + name + " is too small");
  }
  auto segment = std::make_shared<ShmSegment>(name, map_segment(fd, size_t(st.st_size), name), size_t(st.st_size));
  auto* seg = static_cast<Segment*>(segment->base);
  if (seg->magic != kSegMagic || data_offset() + 2 * seg->ring_bytes != segment->bytes)
    throw std::runtime_error("shared memory " + name + " is not a fanout ps-lite segment");
  return segment;
}

const std::string& shm_segment_name(const ShmSegment& s) { return s.name; }
void unlink_shm_segment(const ShmSegment& s) { shm_unlink(s.name.c_str()); }

std::unique_ptr<Link> shm_link(std::unique_ptr<Link> control, std::shared_ptr<ShmSegment> segment, bool creator) {
  return std::make_unique<ShmLink>(std::move(control), std::move(segment), creator);
}

}  // namespace pslite
