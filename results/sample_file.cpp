#include "results/sample_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common/clock.h"
#include "common/error.h"
#include "common/files.h"
#include "common/text.h"

namespace fanout {

static constexpr char kMagic[8] = {'F', 'O', 'S', 'A', 'M', 'P', '0', '1'};

SampleWriter::SampleWriter(const std::filesystem::path& path, int rank, const std::string& role, const std::string& node,
                           int64_t mono_anchor_ns, int64_t wall_anchor_ns) {
  f_ = std::fopen(path.c_str(), "wb");
  if (!f_) {
    error_ = "cannot create " + path.string() + ": " + std::strerror(errno);
    return;
  }
  put(kMagic, 8);
  put(&mono_anchor_ns, 8);
  put(&wall_anchor_ns, 8);
  int32_t r = rank;
  put(&r, 4);
  for (const std::string* s : {&role, &node}) {
    uint16_t len = uint16_t(std::min<size_t>(s->size(), 65535));
    put(&len, 2);
    put(s->data(), len);
  }
  // The header on disk at once: a rank stopped before its first sample (a service's, killed with its run) leaves a
  // file of no samples, not an empty one that reads as "not a fanout sample file". flushed_ns_ stays 0, so the
  // first sample is still written out as it comes.
  write_out();
}

SampleWriter::~SampleWriter() {
  flush();
  if (f_) std::fclose(f_);
}

std::string bad_metric_text(const std::string& metric, const std::string& unit) {
  // Every byte outside printable ASCII as \xHH: the text is not to be trusted as UTF-8 on a terminal either.
  auto shown = [](const std::string& t) {
    std::string out;
    for (unsigned char c : t) {
      if (c >= 0x20 && c < 0x7f) {
        out += char(c);
      } else {
        char buf[5];
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        out += buf;
      }
    }
    return out;
  };
  for (const std::string* t : {&metric, &unit}) {
    const char* what = t == &metric ? "metric name" : "unit";
    if (!valid_utf8(*t)) return std::string(what) + " '" + shown(*t) + "' is not valid UTF-8 text";
    for (unsigned char c : *t)
      if (c < 0x20 || c == 0x7f) return std::string(what) + " '" + printable(*t) + "' holds a control character";
  }
  return "";
}

bool SampleWriter::record(const std::string& metric, const std::string& unit, int64_t iteration, int64_t t_start_ns,
                          double value, bool warmup) {
  if (!f_) return false;
  auto key = std::make_pair(metric, unit);
  auto it = ids_.find(key);
  if (it == ids_.end()) {
    if (ids_.size() >= 65535 || metric.size() > 65535 || unit.size() > 65535) {
      error_ = "too many distinct metrics or a name too long";
      return false;
    }
    if (std::string why = bad_metric_text(metric, unit); !why.empty()) {
      error_ = why;
      return false;
    }
    if (on_new_metric_ && names_.insert(metric).second) on_new_metric_(metric);
    uint16_t id = uint16_t(ids_.size());
    it = ids_.emplace(key, id).first;
    uint16_t nl = uint16_t(metric.size()), ul = uint16_t(unit.size());
    put("M", 1);
    put(&id, 2);
    put(&nl, 2);
    put(metric.data(), nl);
    put(&ul, 2);
    put(unit.data(), ul);
  }
  uint8_t w = warmup ? 1 : 0;
  put("S", 1);
  put(&it->second, 2);
  put(&w, 1);
  put(&iteration, 8);
  put(&t_start_ns, 8);
  put(&value, 8);
  ++count_;
  // Written out at 64 KiB, or when a sample starts a second after the last write: the file's modification time
  // then tells the driver that the rank still records (--stall_timeout). The sample's own start time (the
  // rank's monotonic clock) saves a clock read per sample.
  if (buf_.size() < (1u << 16) && t_start_ns - flushed_ns_ < 1000000000) return true;
  return flush();
}

void SampleWriter::resources(const std::string& cpus, const std::string& gpus) {
  put("R", 1);
  for (const std::string* s : {&cpus, &gpus}) {
    uint16_t len = uint16_t(std::min<size_t>(s->size(), 65535));
    put(&len, 2);
    put(s->data(), len);
  }
}

bool SampleWriter::declare(const std::string& metric, uint8_t better, uint32_t flags) {
  if (!f_) return false;
  if (metric.empty() || metric.size() > 65535 || better < 1 || better > 3) {
    error_ = "a metric declaration needs a name and a direction of 1 to 3";
    return false;
  }
  uint16_t len = uint16_t(metric.size());
  put("D", 1);
  put(&len, 2);
  put(metric.data(), len);
  put(&better, 1);
  put(&flags, 4);
  return true;
}

const char* better_text(uint8_t better) {
  switch (better) {
    case 1: return "lower";
    case 2: return "higher";
    case 3: return "none";
    default: return "";
  }
}

bool SampleWriter::write_out() {
  const bool ok = std::fwrite(buf_.data(), 1, buf_.size(), f_) == buf_.size() && std::fflush(f_) == 0;
  if (!ok) error_ = std::string("cannot write samples: ") + std::strerror(errno);
  buf_.clear();
  return ok;
}

bool SampleWriter::flush() {
  if (!f_ || buf_.empty()) return f_ != nullptr;
  if (!write_out()) return false;
  flushed_ns_ = monotonic_ns();  // the same clock as the samples' start times (rank/main.cpp's now_ns)
  return true;
}

SampleDecoder::SampleDecoder(std::string what, std::function<void(const Sample&)> on_sample)
    : what_(std::move(what)), on_sample_(std::move(on_sample)) {}

UserError SampleDecoder::corrupt(size_t at, const std::string& why) const {
  return UserError(what_ + ": corrupt sample file at byte " + std::to_string(base_ + at) + ": " + why);
}

void SampleDecoder::feed(std::string_view bytes) {
  // Records are decoded from the bytes as they come; only a record cut by the chunk's end is kept for the next.
  std::string_view data = bytes;
  if (!pending_.empty()) {
    pending_.append(bytes.data(), bytes.size());
    data = pending_;
  }
  size_t pos = 0;
  while (pos < data.size()) {
    const size_t used = header_done_ ? record(data, pos) : header(data, false);
    if (used == 0) break;  // the rest of a record is still to come
    if (!header_done_) header_done_ = true;
    pos += used;
  }
  std::string rest(data.substr(pos));
  base_ += pos;
  pending_ = std::move(rest);
}

SampleFileInfo SampleDecoder::finish() {
  if (!header_done_) header(pending_, true);  // throws: a file that ends inside its header is no sample file
  info_.truncated = !pending_.empty();
  return std::move(info_);
}

// The header: its size once whole, 0 while bytes are missing (`last`: none will come, so say what is wrong).
size_t SampleDecoder::header(std::string_view d, bool last) {
  if (d.size() >= 8 && std::memcmp(d.data(), kMagic, 8) != 0) throw UserError(what_ + ": not a fanout sample file (bad header)");
  constexpr size_t fixed = 8 + 8 + 8 + 4 + 2;
  if (d.size() < fixed) {
    if (last) throw UserError(what_ + ": not a fanout sample file (bad header)");
    return 0;
  }
  std::memcpy(&mono0_, d.data() + 8, 8);
  std::memcpy(&wall0_, d.data() + 16, 8);
  int32_t rank = 0;
  std::memcpy(&rank, d.data() + 24, 4);
  uint16_t rl = 0, nl = 0;
  std::memcpy(&rl, d.data() + 28, 2);
  if (d.size() < fixed + rl) {
    if (last) throw corrupt(fixed, "role name runs past the end");
    return 0;
  }
  if (d.size() < fixed + rl + 2) {
    if (last) throw corrupt(fixed + rl, "header ends before the node name");
    return 0;
  }
  std::memcpy(&nl, d.data() + fixed + rl, 2);
  if (d.size() < fixed + rl + 2 + nl) {
    if (last) throw corrupt(fixed + rl + 2, "node name runs past the end");
    return 0;
  }
  info_.rank = rank;
  info_.role = std::string(d.substr(fixed, rl));
  info_.node = std::string(d.substr(fixed + rl + 2, nl));
  return fixed + rl + 2 + nl;
}

// One record at d[at]: its size once whole, 0 while bytes are missing.
size_t SampleDecoder::record(std::string_view d, size_t at) {
  size_t pos = at;
  auto has = [&](size_t n) { return pos + n <= d.size(); };
  auto get = [&](auto& v) {
    std::memcpy(&v, d.data() + pos, sizeof v);
    pos += sizeof v;
  };
  auto bytes = [&](size_t n) {
    std::string_view v = d.substr(pos, n);
    pos += n;
    return v;
  };
  const char type = d[pos++];
  if (type == 'M') {
    uint16_t id = 0, nl = 0, ul = 0;
    if (!has(4)) return 0;
    get(id), get(nl);
    if (!has(nl + 2u)) return 0;
    std::string name(bytes(nl));
    get(ul);
    if (!has(ul)) return 0;
    if (id != metrics_.size()) throw corrupt(at, "metric ids out of order");
    std::string unit(bytes(ul));
    if (std::string why = bad_metric_text(name, unit); !why.empty()) throw corrupt(at, why);
    metrics_.emplace_back(std::move(name), std::move(unit));
  } else if (type == 'S') {
    if (!has(2 + 1 + 8 + 8 + 8)) return 0;
    uint16_t id = 0;
    uint8_t w = 0;
    Sample s;
    int64_t t = 0;
    get(id), get(w), get(s.iteration), get(t), get(s.value);
    if (id >= metrics_.size()) throw corrupt(at, "sample names undefined metric " + std::to_string(id));
    if (w > 1) throw corrupt(at, "warmup flag " + std::to_string(w));
    int64_t since_anchor;  // t - mono0, which garbage can push past int64
    if (__builtin_sub_overflow(t, mono0_, &since_anchor)) throw corrupt(at, "sample time is out of range");
    s.rank = info_.rank;
    s.role = info_.role;
    s.metric = metrics_[id].first;
    s.metric_id = id;
    s.unit = metrics_[id].second;
    s.warmup = w == 1;
    s.t_start_s = double(wall0_) / 1e9 + double(since_anchor) / 1e9;
    on_sample_(s);
    ++info_.samples;
  } else if (type == 'R') {
    std::string cpus, gpus;
    for (std::string* out : {&cpus, &gpus}) {
      uint16_t len = 0;
      if (!has(2)) return 0;
      get(len);
      if (!has(len)) return 0;
      *out = std::string(bytes(len));
    }
    info_.cpus = std::move(cpus), info_.gpus = std::move(gpus);
  } else if (type == 'D') {
    uint16_t len = 0;
    if (!has(2)) return 0;
    get(len);
    if (!has(len + 1u + 4u)) return 0;
    MetricDeclaration decl;
    decl.metric = std::string(bytes(len));
    get(decl.better), get(decl.flags);
    if (decl.metric.empty() || decl.better < 1 || decl.better > 3)
      throw corrupt(at, "metric declaration without a name or with direction " + std::to_string(decl.better));
    info_.declarations.push_back(std::move(decl));
  } else {
    throw corrupt(at, std::string("unknown record type 0x") + "0123456789abcdef"[(type >> 4) & 15] + "0123456789abcdef"[type & 15]);
  }
  return pos - at;
}

SampleFileInfo decode_samples(std::string_view data, const std::string& what, const std::function<void(const Sample&)>& on_sample) {
  SampleDecoder d(what, on_sample);
  d.feed(data);
  return d.finish();
}

SampleFileInfo read_sample_file(const std::filesystem::path& path, const std::function<void(const Sample&)>& on_sample) {
  // 4 MiB at a time: a rank's file of any size (a 6 GiB one was read whole, 6.3 GB) costs a chunk and a record.
  // Read with the descriptor itself: stdio's own buffer, its fstat and a last read to find the end were a quarter
  // of a small file's system calls.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UserError("cannot read " + path.string() + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  SampleDecoder d(path.string(), on_sample);
  // A small file gets a chunk its size, not filled first: a zeroed 4 MiB chunk (mapped afresh each time) cost more
  // than the rest of a 10-sample run's ingest.
  struct stat st {};
  constexpr size_t kChunk = 4u << 20;
  const bool sized = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 0;
  const size_t chunk_size = std::clamp<size_t>(sized ? size_t(st.st_size) + 1 : kChunk, 4096, kChunk);
  std::unique_ptr<char[]> chunk(new char[chunk_size]);
  size_t total = 0;
  for (;;) {
    const ssize_t n = ::read(fd, chunk.get(), chunk_size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw UserError("cannot read " + path.string() + ": " + std::strerror(errno));
    }
    if (n == 0) break;
    d.feed(std::string_view(chunk.get(), size_t(n)));
    total += size_t(n);
    // A regular file that gave less than asked once it gave the size it had: at its end, without a read to say so.
    if (sized && size_t(n) < chunk_size && total >= size_t(st.st_size)) break;
  }
  return d.finish();
}

}  // namespace fanout
