// WAA, the worker allocation algorithm of torchloader (A-Dloader): splits the CPU cores of the cluster into
// data-loading workers for the running applications. Allocations are total workers per application (across all
// of its devices); the launcher spreads a total over the devices (ranks get floor or ceil of total / devices).
//
// allocate(apps, cores), with need_i = demand_i * devices_i:
//  * sum(need_i) > cores (overloaded):
//      order: overload descending, then demand descending, then id ascending.
//      1. Floor: when sum(devices_i) <= cores every app gets 1 worker per device (= the first round-robin turn).
//         Otherwise every app gets 1 worker, then the remaining cores go one at a time, in order, round-robin,
//         to apps below 1 per device. (If cores < number of apps every app still gets 1: oversubscribed.)
//      2. Turns: in order, each app below need_i receives devices_i more workers (one per device) as long as
//         at least devices_i cores remain; an app for which too few cores remain is skipped in that turn (a
//         smaller app behind it may still get its turn). Repeat until no app can take a full turn.
//      3. Partial turn (the reference is silent): cores left that are fewer than any unmet app's devices are
//         handed one at a time, in order, round-robin to apps below need_i, so no core is left idle.
//      Result: every app gets >= 1 worker per device when sum(devices) <= cores, no app exceeds need_i unless
//      the floor forces it (need_i >= devices_i always, so never), and sum == cores.
//  * otherwise (enough cores): share_i = floor(cores * need_i / sum(need)) (>= need_i since sum(need) <= cores),
//      then the leftover cores (fewer than the number of apps) go one at a time to the apps in order of
//      compute_throughput descending (then id ascending). sum == cores.
// Invariants: every app >= 1; sum <= cores whenever cores >= number of apps.
// Throws std::invalid_argument on duplicate ids, devices < 1, demand < 1, or cores < 0.
#pragma once
#include <map>
#include <vector>

namespace torchloader {

struct AppDemand {
  int id;
  int devices;                // data-parallel devices of the app (>= 1)
  int demand;                 // workers per device wanted (TPM Demand::demand, >= 1)
  double overload;            // TPM Demand::overload, priority when cores are short
  double compute_throughput;  // predicted GPU throughput, priority for leftover cores
};

std::map<int, int> allocate(const std::vector<AppDemand>& apps, int cores);

// Mode 1 baseline: cores / number of apps each, the remainder one each to the lowest ids; at least 1 each.
std::map<int, int> even_split(const std::vector<AppDemand>& apps, int cores);

enum class Mode { EvenSplit = 1, OnArrival = 2, OnArrivalAndCompletion = 3 };

// Whether an event triggers a reallocation: mode 1 never, mode 2 on arrivals only, mode 3 on arrivals and
// completions (arrival_event == false means a completion).
bool reallocates(Mode mode, bool arrival_event);

}  // namespace torchloader
