// The torchloader Master's scheduling decisions, without sockets or processes: applications arrive at their
// arrival times, each runs one training process per node it spans, and on every event the mode says whether
// data-loading workers are reallocated (WAA per node over the applications on it, with their TPM demands).
// A process whose worker count changes is paused (it checkpoints) and resumed with the new count (the seed's way),
// or, with Resizing::Live, told to resize its loader in place (fanout's: no pause, no restart).
// The caller turns the returned commands into messages and feeds back what the processes report.
#pragma once
#include <map>
#include <vector>

#include "tpm.h"
#include "waa.h"
#include "workload.h"

namespace torchloader {

struct Command {
  enum class Kind { Launch, Pause, Resume, Resize } kind;
  int app;       // index in the workload
  int process;   // 0 .. processes of the app - 1
  int node;      // where it runs
  int workers;   // Launch / Resume / Resize: data-loading workers of this process
};

// How a running process gets a new worker count: the seed's pause, checkpoint and restart, or in place.
enum class Resizing { Restart, Live };

// The applications among `active` (active[i]: application i is in the system) that use application app's busiest
// device, by device index over the workload's cuda_device lists (the seed's applications all span the same nodes,
// so equal indexes are the same GPU); >= 1.
int apps_sharing_busiest_device(const std::vector<AppSpec>& apps, size_t app, const std::vector<bool>& active);

// A device's demand shared by `sharing` applications: its compute throughput and workers per device divided
// (the reference TPM's rule), floor + 2 and the overload recomputed.
Demand shared_demand(const Demand& alone, int sharing);

class Scheduler {
 public:
  // demands[i]: application i's TPM demand per device; nodes: how many node agents there are. shared_devices:
  // the demands are of a device alone, and each event divides an application's by the applications then in the
  // system sharing its busiest device (apps_sharing_busiest_device): when one completes, those it shared with
  // need more workers, which mode 3 gives them. resizing: Restart pauses a running application only where the
  // change pays for its restart (fewer workers, or more where its demand is unmet); Live resizes every process
  // whose count changes, as the WAA says, since that costs nothing.
  Scheduler(std::vector<AppSpec> apps, std::vector<Demand> demands, Mode mode, int nodes, int cores_per_node,
            bool shared_devices = false, Resizing resizing = Resizing::Restart);

  // Launches (and, by the mode, reallocations) for applications whose arrival time is <= now (seconds).
  std::vector<Command> arrive(double now);
  // A process checkpointed and stopped: once every process of its application has, they all resume.
  std::vector<Command> paused(int app, int process);
  // A process completed: once every process of its application has, the application is done (mode 3
  // reallocates the freed workers).
  std::vector<Command> finished(int app, int process, double now);

  bool all_finished() const;
  double next_arrival() const;  // infinity when every application has arrived
  int processes(int app) const { return int(apps_[size_t(app)].procs.size()); }
  double completed_at(int app) const { return apps_[size_t(app)].completed_at; }
  int workers(int app, int process) const { return apps_[size_t(app)].procs[size_t(process)].workers; }
  int node(int app, int process) const { return apps_[size_t(app)].procs[size_t(process)].node; }

 private:
  enum class State { Waiting, Running, Finished };
  struct Proc {
    int node = 0, workers = 0, pending = 0;  // pending: the count to resume with
    bool pausing = false, stopped = false, done = false;  // stopped: paused and waiting for its siblings
  };
  struct App {  // application i's state; its spec is specs_[i]
    Demand demand;
    State state = State::Waiting;
    std::vector<Proc> procs;
    double completed_at = -1;
  };
  // New worker counts for every running process; for those that change, Pause (Restart: where it pays) or Resize
  // (Live); Launch for `launching`.
  std::vector<Command> reallocate(const std::vector<int>& launching);
  std::map<int, int> allocation_on(int node, const std::vector<int>& launching) const;
  // Application app's demand now: the TPM's, shared by the applications running or launching.
  Demand demand_now(int app, const std::vector<int>& launching) const;
  void place(App& app);
  std::vector<Command> resume_when_all_stopped(App& app, int index);

  std::vector<App> apps_;
  Mode mode_;
  int nodes_, cores_;
  std::vector<int> load_;  // processes placed per node
  bool shared_devices_;
  Resizing resizing_;
  std::vector<AppSpec> specs_;  // the workload as given (specs_[i] is apps_[i]'s)
};

}  // namespace torchloader
