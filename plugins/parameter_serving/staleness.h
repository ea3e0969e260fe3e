// Staleness of what a worker holds, sample by sample, against the trainer's publication timeline: no
// averaging window (the seed's mean-of-posts adds about (post_frequency/2)/push_frequency versions of bias).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace parameter_serving {

struct Publication {
  uint64_t version;
  int64_t wall_ns;  // when the version became visible (renamed into place, or its last chunk sent)
};

struct StepSample {
  int64_t wall_ns;
  uint64_t held;  // 0 while the worker holds nothing yet
};

struct Staleness {
  int64_t versions;  // trainer's newest published version at the step - the version held
  double seconds;    // how long a newer version than the one held had been available (0 when current)
};

// For each step: the trainer's newest version published at or before the step's time, minus the held
// version (clamped at 0: a version cannot be held before it is published, except by clock skew between
// nodes), and the time since the first newer version appeared. timeline is in publication order.
std::vector<Staleness> staleness_of(const std::vector<Publication>& timeline, const std::vector<StepSample>& steps);

// The timeline as the trainer hands it to workers (pairs in host byte order: one job, one architecture) and back.
std::string encode_timeline(const std::vector<Publication>& timeline);
std::vector<Publication> decode_timeline(const std::string& bytes);

}  // namespace parameter_serving
