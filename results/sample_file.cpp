#include "results/sample_file.h"

#include <cstring>

#include "common/clock.h"
#include "common/error.h"
#include "common/files.h"

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

namespace {

class Cursor {
 public:
  Cursor(std::string_view d) : d_(d) {}
  bool has(size_t n) const { return pos_ + n <= d_.size(); }
  template <class T>
  T get() {
    T v;
    std::memcpy(&v, d_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  std::string_view bytes(size_t n) {
    auto s = d_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  size_t pos() const { return pos_; }
  bool done() const { return pos_ == d_.size(); }

 private:
  std::string_view d_;
  size_t pos_ = 0;
};

}  // namespace

SampleFileInfo decode_samples(std::string_view data, const std::string& what,
                              const std::function<void(const Sample&)>& on_sample) {
  SampleFileInfo info;
  Cursor c(data);
  auto corrupt = [&](const std::string& why) {
    return UserError(what + ": corrupt sample file at byte " + std::to_string(c.pos()) + ": " + why);
  };
  if (!c.has(8 + 8 + 8 + 4 + 2) || std::memcmp(data.data(), kMagic, 8) != 0)
    throw UserError(what + ": not a fanout sample file (bad header)");
  c.bytes(8);
  int64_t mono0 = c.get<int64_t>(), wall0 = c.get<int64_t>();
  info.rank = c.get<int32_t>();
  uint16_t rl = c.get<uint16_t>();
  if (!c.has(rl)) throw corrupt("role name runs past the end");
  info.role = std::string(c.bytes(rl));
  if (!c.has(2)) throw corrupt("header ends before the node name");
  uint16_t nl = c.get<uint16_t>();
  if (!c.has(nl)) throw corrupt("node name runs past the end");
  info.node = std::string(c.bytes(nl));
  std::vector<std::pair<std::string, std::string>> metrics;
  while (!c.done()) {
    size_t start = c.pos();
    char type = c.get<char>();
    if (type == 'M') {
      if (!c.has(4)) return info.truncated = true, info;
      uint16_t id = c.get<uint16_t>(), nl = c.get<uint16_t>();
      if (!c.has(nl + 2u)) return info.truncated = true, info;
      std::string name(c.bytes(nl));
      uint16_t ul = c.get<uint16_t>();
      if (!c.has(ul)) return info.truncated = true, info;
      if (id != metrics.size()) throw corrupt("metric ids out of order");
      metrics.emplace_back(std::move(name), std::string(c.bytes(ul)));
    } else if (type == 'S') {
      if (!c.has(2 + 1 + 8 + 8 + 8)) return info.truncated = true, info;
      uint16_t id = c.get<uint16_t>();
      uint8_t w = c.get<uint8_t>();
      Sample s;
      s.iteration = c.get<int64_t>();
      int64_t t = c.get<int64_t>();
      s.value = c.get<double>();
      if (id >= metrics.size()) throw corrupt("sample names undefined metric " + std::to_string(id));
      if (w > 1) throw corrupt("warmup flag " + std::to_string(w));
      int64_t since_anchor;  // t - mono0, which garbage can push past int64
      if (__builtin_sub_overflow(t, mono0, &since_anchor)) throw corrupt("sample time is out of range");
      s.rank = info.rank;
      s.role = info.role;
      s.metric = metrics[id].first;
      s.metric_id = id;
      s.unit = metrics[id].second;
      s.warmup = w == 1;
      s.t_start_s = double(wall0) / 1e9 + double(since_anchor) / 1e9;
      on_sample(s);
      ++info.samples;
    } else if (type == 'R') {
      std::string* out[] = {&info.cpus, &info.gpus};
      for (std::string* s : out) {
        if (!c.has(2)) return info.truncated = true, info;
        uint16_t len = c.get<uint16_t>();
        if (!c.has(len)) return info.truncated = true, info;
        *s = std::string(c.bytes(len));
      }
    } else if (type == 'D') {
      if (!c.has(2)) return info.truncated = true, info;
      uint16_t len = c.get<uint16_t>();
      if (!c.has(len + 1u + 4u)) return info.truncated = true, info;
      MetricDeclaration d;
      d.metric = std::string(c.bytes(len));
      d.better = c.get<uint8_t>();
      d.flags = c.get<uint32_t>();
      if (d.metric.empty() || d.better < 1 || d.better > 3) throw corrupt("metric declaration without a name or with direction " + std::to_string(d.better));
      info.declarations.push_back(std::move(d));
    } else {
      (void)start;
      throw corrupt(std::string("unknown record type 0x") + "0123456789abcdef"[(type >> 4) & 15] + "0123456789abcdef"[type & 15]);
    }
  }
  return info;
}

SampleFileInfo read_sample_file(const std::filesystem::path& path, const std::function<void(const Sample&)>& on_sample) {
  return decode_samples(read_file(path), path.string(), on_sample);
}

}  // namespace fanout
