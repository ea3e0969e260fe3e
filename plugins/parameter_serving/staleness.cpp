#include "staleness.h"

#include <algorithm>
#include <cstring>

namespace parameter_serving {

std::vector<Staleness> staleness_of(const std::vector<Publication>& timeline, const std::vector<StepSample>& steps) {
  std::vector<Staleness> out;
  out.reserve(steps.size());
  for (const auto& s : steps) {
    // Publications up to the step's time: the last of them is the trainer's version then.
    auto end = std::upper_bound(timeline.begin(), timeline.end(), s.wall_ns,
                                [](int64_t t, const Publication& p) { return t < p.wall_ns; });
    Staleness st{0, 0.0};
    if (end != timeline.begin()) {
      uint64_t current = std::prev(end)->version;
      if (current > s.held) {
        st.versions = int64_t(current - s.held);
        // The first publication newer than what is held.
        auto newer = std::upper_bound(timeline.begin(), end, s.held, [](uint64_t h, const Publication& p) { return h < p.version; });
        st.seconds = double(s.wall_ns - newer->wall_ns) / 1e9;
      }
    }
    out.push_back(st);
  }
  return out;
}

std::string encode_timeline(const std::vector<Publication>& timeline) {
  std::string out(timeline.size() * 16, '\0');
  for (size_t i = 0; i < timeline.size(); ++i) {
    std::memcpy(&out[i * 16], &timeline[i].version, 8);
    std::memcpy(&out[i * 16 + 8], &timeline[i].wall_ns, 8);
  }
  return out;
}

std::vector<Publication> decode_timeline(const std::string& bytes) {
  std::vector<Publication> out(bytes.size() / 16);
  for (size_t i = 0; i < out.size(); ++i) {
    std::memcpy(&out[i].version, &bytes[i * 16], 8);
    std::memcpy(&out[i].wall_ns, &bytes[i * 16 + 8], 8);
  }
  return out;
}

}  // namespace parameter_serving
