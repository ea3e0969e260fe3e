// The torchloader Master's scheduling decisions, without sockets or processes: applications arrive at their
// arrival times, each runs one training process per node it spans, and on every event the mode says whether
// data-loading workers are reallocated (WAA per node over the applications on it, with their TPM demands).
// A process whose worker count changes is paused (it checkpoints) and resumed with the new count.
// The caller turns the returned commands into messages and feeds back what the processes report.
#pragma once
#include <map>
#include <vector>

#include "tpm.h"
#include "waa.h"
#include "workload.h"

namespace torchloader {

struct Command {
  enum class Kind { Launch, Pause, Resume } kind;
  int app;       // index in the workload
  int process;   // 0 .. processes of the app - 1
  int node;      // where it runs
  int workers;   // Launch / Resume: data-loading workers of this process
};

class Scheduler {
 public:
  // demands[i]: application i's TPM demand per device; nodes: how many node agents there are.
  Scheduler(std::vector<AppSpec> apps, std::vector<Demand> demands, Mode mode, int nodes, int cores_per_node);

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
  struct App {
    AppSpec spec;
    Demand demand;
    State state = State::Waiting;
    std::vector<Proc> procs;
    double completed_at = -1;
  };
  // New worker counts for every running process; Pause for those that change, Launch for `launching`.
  std::vector<Command> reallocate(const std::vector<int>& launching);
  std::map<int, int> allocation_on(int node, const std::vector<int>& launching) const;
  void place(App& app);
  std::vector<Command> resume_when_all_stopped(App& app, int index);

  std::vector<App> apps_;
  Mode mode_;
  int nodes_, cores_;
  std::vector<int> load_;  // processes placed per node
};

}  // namespace torchloader
