#include "scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace torchloader {

int apps_sharing_busiest_device(const std::vector<AppSpec>& apps, size_t app, const std::vector<bool>& active) {
  auto uses = [&](size_t b, int device) {
    for (const auto& node : apps[b].cuda_device)
      if (std::find(node.begin(), node.end(), device) != node.end()) return true;
    return false;
  };
  int most = 1;
  for (const auto& node : apps[app].cuda_device)
    for (int device : node) {
      int n = 0;
      for (size_t b = 0; b < apps.size(); ++b) n += (b == app || (b < active.size() && active[b])) && uses(b, device);
      most = std::max(most, n);
    }
  return most;
}

Demand shared_demand(const Demand& alone, int sharing) {
  Demand d = alone;
  const double s = std::max(1, sharing);
  d.compute_samples_per_second = alone.compute_samples_per_second / s;
  d.workers_per_device = alone.workers_per_device / s;
  const double fl = std::floor(d.workers_per_device);
  d.demand = int(fl) + 2;
  d.overload = d.workers_per_device - fl;
  return d;
}

Scheduler::Scheduler(std::vector<AppSpec> apps, std::vector<Demand> demands, Mode mode, int nodes, int cores_per_node,
                     bool shared_devices, Resizing resizing)
    : mode_(mode), nodes_(std::max(1, nodes)), cores_(std::max(1, cores_per_node)), load_(size_t(std::max(1, nodes)), 0),
      shared_devices_(shared_devices), resizing_(resizing), specs_(apps) {
  for (size_t i = 0; i < apps.size(); ++i) {
    App a;
    a.demand = i < demands.size() ? demands[i] : Demand{};
    a.procs.resize(size_t(std::max(1, apps[i].node_size)));
    apps_.push_back(std::move(a));
  }
}

// An application spans node_size nodes: the least loaded ones (lowest index first). With fewer nodes than
// node_size, several of its processes share a node.
void Scheduler::place(App& app) {
  for (auto& p : app.procs) {
    p.node = int(std::min_element(load_.begin(), load_.end()) - load_.begin());
    ++load_[size_t(p.node)];
  }
}

// WAA over the applications with a process on `node` (running, or launching now). An application's devices
// on the node are its processes there (one CPU "device" each).
std::map<int, int> Scheduler::allocation_on(int node, const std::vector<int>& launching) const {
  std::vector<AppDemand> here;
  for (size_t i = 0; i < apps_.size(); ++i) {
    const App& a = apps_[i];
    const bool active = a.state == State::Running || std::count(launching.begin(), launching.end(), int(i));
    if (!active) continue;
    int devices = 0;
    for (const auto& p : a.procs) devices += p.node == node && !p.done;
    if (devices == 0) continue;
    const Demand d = demand_now(int(i), launching);
    here.push_back({int(i), devices, std::max(1, d.demand), d.overload, d.compute_samples_per_second});
  }
  if (here.empty()) return {};
  return allocate(here, cores_);
}

Demand Scheduler::demand_now(int app, const std::vector<int>& launching) const {
  const Demand& alone = apps_[size_t(app)].demand;
  if (!shared_devices_) return alone;
  std::vector<bool> active;
  for (size_t i = 0; i < apps_.size(); ++i)
    active.push_back(apps_[i].state == State::Running || std::count(launching.begin(), launching.end(), int(i)));
  return shared_demand(alone, apps_sharing_busiest_device(specs_, size_t(app), active));
}

std::vector<Command> Scheduler::reallocate(const std::vector<int>& launching) {
  // New per-process counts: the node's share of an application split evenly over its processes there.
  std::map<std::pair<int, int>, int> target;  // (app, process) -> workers
  for (int n = 0; n < nodes_; ++n) {
    for (auto [app, total] : allocation_on(n, launching)) {
      std::vector<int> mine;
      for (size_t p = 0; p < apps_[size_t(app)].procs.size(); ++p)
        if (apps_[size_t(app)].procs[p].node == n && !apps_[size_t(app)].procs[p].done) mine.push_back(int(p));
      for (size_t k = 0; k < mine.size(); ++k)
        target[{app, mine[k]}] = std::max(1, total / int(mine.size()) + (int(k) < total % int(mine.size()) ? 1 : 0));
    }
  }
  std::vector<Command> out;
  std::map<int, bool> changes;  // running applications whose worker counts change
  for (auto [key, workers] : target) {
    auto [app, p] = key;
    Proc& proc = apps_[size_t(app)].procs[size_t(p)];
    if (std::count(launching.begin(), launching.end(), app)) {
      proc.workers = workers;
      out.push_back({Command::Kind::Launch, app, p, proc.node, workers});
      continue;
    }
    if (resizing_ == Resizing::Live) {
      if (workers != proc.workers) {
        proc.workers = workers;
        out.push_back({Command::Kind::Resize, app, p, proc.node, workers});
      }
      continue;
    }
    proc.pending = workers;  // a pausing process resumes with the newest count
    // More workers for a process that already has its demand would not make it faster, and a pause costs a
    // checkpoint and a restart: only taking workers away, or giving them where demand is unmet, is worth one.
    const bool helps = workers < proc.workers || proc.workers < demand_now(app, launching).demand;
    if (!proc.pausing && workers != proc.workers && helps) changes[app] = true;
  }
  // The processes of an application train together (their gradients are averaged every iteration): they pause
  // and resume all together, even those whose own count stays the same.
  for (auto [app, _] : changes)
    for (size_t p = 0; p < apps_[size_t(app)].procs.size(); ++p) {
      Proc& proc = apps_[size_t(app)].procs[p];
      if (proc.done || proc.pausing) continue;
      proc.pausing = true;
      out.push_back({Command::Kind::Pause, app, int(p), proc.node, proc.pending});
    }
  return out;
}

std::vector<Command> Scheduler::arrive(double now) {
  std::vector<int> launching;
  for (size_t i = 0; i < apps_.size(); ++i)
    if (apps_[i].state == State::Waiting && specs_[i].arrival_time <= now) {
      place(apps_[i]);
      launching.push_back(int(i));
    }
  if (launching.empty()) return {};
  std::vector<Command> out;
  if (!reallocates(mode_, true)) {
    // Mode 1, the baseline (the paper's even split): every process of the workload gets the same fixed share of
    // the cluster's cores, never changed (the seed: 48 cores, 3 applications -> 16 workers each).
    int processes = 0;
    for (const auto& a : apps_) processes += int(a.procs.size());
    const int share = std::max(1, cores_ * nodes_ / std::max(1, processes));
    for (int app : launching) {
      App& a = apps_[size_t(app)];
      for (size_t p = 0; p < a.procs.size(); ++p) {
        a.procs[p].workers = share;
        out.push_back({Command::Kind::Launch, app, int(p), a.procs[p].node, a.procs[p].workers});
      }
    }
  } else {
    out = reallocate(launching);
  }
  for (int app : launching) apps_[size_t(app)].state = State::Running;
  return out;
}

std::vector<Command> Scheduler::paused(int app, int process) {
  App& a = apps_[size_t(app)];
  Proc& p = a.procs[size_t(process)];
  if (!p.pausing || p.stopped) return {};
  p.stopped = true;
  return resume_when_all_stopped(a, app);
}

// The processes of an application restart together, once every one not done has stopped.
std::vector<Command> Scheduler::resume_when_all_stopped(App& a, int app) {
  bool any = false;
  for (const auto& q : a.procs) {
    if (!q.done && !q.stopped) return {};
    any = any || q.stopped;
  }
  if (!any) return {};
  std::vector<Command> out;
  for (size_t i = 0; i < a.procs.size(); ++i) {
    Proc& q = a.procs[i];
    if (q.done) continue;
    q.pausing = q.stopped = false;
    q.workers = q.pending;
    out.push_back({Command::Kind::Resume, app, int(i), q.node, q.workers});
  }
  return out;
}

std::vector<Command> Scheduler::finished(int app, int process, double now) {
  App& a = apps_[size_t(app)];
  Proc& p = a.procs[size_t(process)];
  if (p.done) return {};
  p.done = true;
  p.pausing = p.stopped = false;
  --load_[size_t(p.node)];
  // A sibling that stopped for a pause must not wait for this one, which will not stop any more.
  if (!std::all_of(a.procs.begin(), a.procs.end(), [](const Proc& q) { return q.done; })) return resume_when_all_stopped(a, app);
  a.state = State::Finished;
  a.completed_at = now;
  return reallocates(mode_, false) ? reallocate({}) : std::vector<Command>{};
}

bool Scheduler::all_finished() const {
  return std::all_of(apps_.begin(), apps_.end(), [](const App& a) { return a.state == State::Finished; });
}

double Scheduler::next_arrival() const {
  double next = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < apps_.size(); ++i)
    if (apps_[i].state == State::Waiting) next = std::min(next, specs_[i].arrival_time);
  return next;
}

}  // namespace torchloader
