#include "waa.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>

namespace torchloader {
namespace {

void validate(const std::vector<AppDemand>& apps, int cores) {
  if (cores < 0) throw std::invalid_argument("allocate: cores must be >= 0, got " + std::to_string(cores));
  std::set<int> ids;
  for (const AppDemand& a : apps) {
    if (!ids.insert(a.id).second) throw std::invalid_argument("allocate: duplicate app id " + std::to_string(a.id));
    if (a.devices < 1)
      throw std::invalid_argument("allocate: app " + std::to_string(a.id) + ": devices must be >= 1");
    if (a.demand < 1) throw std::invalid_argument("allocate: app " + std::to_string(a.id) + ": demand must be >= 1");
  }
}

std::map<int, int> allocate_overloaded(const std::vector<AppDemand>& apps, int cores) {
  std::vector<const AppDemand*> order;
  for (const AppDemand& a : apps) order.push_back(&a);
  std::sort(order.begin(), order.end(), [](const AppDemand* x, const AppDemand* y) {
    if (x->overload != y->overload) return x->overload > y->overload;
    if (x->demand != y->demand) return x->demand > y->demand;
    return x->id < y->id;
  });
  const size_t n = order.size();
  std::vector<long long> got(n, 0), need(n);
  long long total_devices = 0;
  for (size_t i = 0; i < n; ++i) {
    need[i] = static_cast<long long>(order[i]->demand) * order[i]->devices;
    total_devices += order[i]->devices;
  }
  long long left = cores;

  // 1. Floor.
  if (total_devices <= left) {
    for (size_t i = 0; i < n; ++i) got[i] = order[i]->devices;
    left -= total_devices;
  } else {
    for (size_t i = 0; i < n; ++i) got[i] = 1;
    left -= static_cast<long long>(n);  // may go negative: cores < apps, oversubscribed
    bool progress = true;
    while (left > 0 && progress) {
      progress = false;
      for (size_t i = 0; i < n && left > 0; ++i)
        if (got[i] < order[i]->devices) {
          ++got[i];
          --left;
          progress = true;
        }
    }
  }

  // 2. Full turns of one worker per device.
  bool progress = true;
  while (left > 0 && progress) {
    progress = false;
    for (size_t i = 0; i < n && left > 0; ++i) {
      long long d = order[i]->devices;
      if (got[i] < need[i] && left >= d) {
        long long give = std::min(d, need[i] - got[i]);
        got[i] += give;
        left -= give;
        progress = true;
      }
    }
  }

  // 3. Partial turn: single cores, in order, to apps still below their need.
  progress = true;
  while (left > 0 && progress) {
    progress = false;
    for (size_t i = 0; i < n && left > 0; ++i)
      if (got[i] < need[i]) {
        ++got[i];
        --left;
        progress = true;
      }
  }

  std::map<int, int> out;
  for (size_t i = 0; i < n; ++i) out[order[i]->id] = static_cast<int>(got[i]);
  return out;
}

std::map<int, int> allocate_proportional(const std::vector<AppDemand>& apps, int cores) {
  long long total = 0;
  for (const AppDemand& a : apps) total += static_cast<long long>(a.demand) * a.devices;
  std::map<int, int> out;
  long long used = 0;
  for (const AppDemand& a : apps) {
    long long need = static_cast<long long>(a.demand) * a.devices;
    long long share = std::max(need, static_cast<long long>(cores) * need / total);
    out[a.id] = static_cast<int>(share);
    used += share;
  }
  std::vector<const AppDemand*> order;
  for (const AppDemand& a : apps) order.push_back(&a);
  std::sort(order.begin(), order.end(), [](const AppDemand* x, const AppDemand* y) {
    if (x->compute_throughput != y->compute_throughput) return x->compute_throughput > y->compute_throughput;
    return x->id < y->id;
  });
  long long left = cores - used;
  while (left > 0)
    for (size_t i = 0; i < order.size() && left > 0; ++i) {
      ++out[order[i]->id];
      --left;
    }
  return out;
}

}  // namespace

std::map<int, int> allocate(const std::vector<AppDemand>& apps, int cores) {
  validate(apps, cores);
  if (apps.empty()) return {};
  long long total = 0;
  for (const AppDemand& a : apps) total += static_cast<long long>(a.demand) * a.devices;
  return total > cores ? allocate_overloaded(apps, cores) : allocate_proportional(apps, cores);
}

std::map<int, int> even_split(const std::vector<AppDemand>& apps, int cores) {
  validate(apps, cores);
  std::map<int, int> out;
  if (apps.empty()) return out;
  const int n = static_cast<int>(apps.size());
  const int each = cores / n, rem = cores % n;
  for (const AppDemand& a : apps) out[a.id] = each;
  int k = 0;
  for (auto& [id, w] : out)  // std::map iterates ids ascending
    if (k++ < rem) ++w;
  for (auto& [id, w] : out) w = std::max(w, 1);
  return out;
}

bool reallocates(Mode mode, bool arrival_event) {
  switch (mode) {
    case Mode::EvenSplit:
      return false;
    case Mode::OnArrival:
      return arrival_event;
    case Mode::OnArrivalAndCompletion:
      return true;
  }
  return false;
}

}  // namespace torchloader
