// The template plugin: copy this folder to start a plugin of your own.
//
//   1. Copy plugins/template/ to plugins/<yours>/, rename the file, and set kPlugin.name below.
//   2. Add it to plugins/CMakeLists.txt with fanout_add_plugin(<yours> <yours>.cpp) (the file must be called
//      fanout_<yours>.so for `fanout` to find it by name; fanout_add_plugin does that).
//   3. Rebuild: `fanout plugins` lists it, and each entry of kExperiments is a subcommand:
//        fanout template_hello --iterations=[10,100] --message=hi --dry-run
//
// A plugin sees only plugins/sdk/: the C ABI (fanout_plugin.h) and optional C++ helpers (fanout_sdk.hpp).
// Everything the driver shows (flags, defaults, help) comes from the descriptor below; everything a rank
// does goes through the host ops (parameters, record, kv_put/kv_get/fence, log, should_stop).
#include <cmath>
#include <string>

#include "fanout_sdk.hpp"

namespace {

// Parameters: each becomes a flag of every experiment subcommand, validated by type before anything runs.
// A default may be a list ("[1,2]") to sweep by default. Order matters: sweeps expand in this order, first
// parameter outermost. FANOUT_PARAM_RANGE and FANOUT_PARAM_ONE_OF add bounds or choices the driver checks for
// every value before anything is written; the default stated here is the only one (every rank gets every
// parameter), so the code below needs no fallback of its own.
const fanout_param_spec kParams[] = {
    FANOUT_PARAM_RANGE_FLAGS("ranks", FANOUT_PARAM_INT, "1", "ranks on the node", "1", NULL, FANOUT_PARAM_WEAK_SCALING),
    FANOUT_PARAM_RANGE("iterations", FANOUT_PARAM_INT, "20", "measured iterations", "0", NULL),
    FANOUT_PARAM_RANGE("work", FANOUT_PARAM_INT, "100000", "loop trips of synthetic work per iteration", "0", NULL),
    FANOUT_PARAM("message", FANOUT_PARAM_STRING, "hello", "text rank 0 publishes to the other ranks"),
};

// A role is one kind of rank. It returns 0 on success; anything else fails the rank and the run.
int run_hello(fanout_context* ctx, const fanout_host_ops* ops) {
  fanout_sdk::Host host(ctx, ops);

  // Rendezvous: rank 0 publishes, everyone waits for it. put/get/fence span every rank of the job.
  if (host.rank() == 0 && !host.put("template.message", host.param("message"))) return 1;
  std::string message;
  if (!host.get("template.message", message, 30000)) return 2;
  host.log(FANOUT_LOG_INFO, "rank " + std::to_string(host.rank()) + " of " + std::to_string(host.size()) +
                                " on " + host.node() + " got '" + message + "'");

  // Measurement: take times from host.now_ns() (monotonic), record one sample per iteration with its
  // start time and unit. One warmup iteration is recorded but flagged, so statistics exclude it.
  const int64_t iterations = host.param_int("iterations"), work = host.param_int("work");
  volatile double sink = 0;
  for (int64_t i = -1; i < iterations && !host.should_stop(); ++i) {
    int64_t t0 = host.now_ns();
    for (int64_t k = 0; k < work; ++k) sink = sink + std::sqrt(double(k));
    double seconds = double(host.now_ns() - t0) / 1e9;
    if (!host.record("work", i, t0, seconds, "s", /*warmup=*/i < 0)) return 3;
  }
  return 0;
}

const fanout_role kRoles[] = {FANOUT_ROLE("hello", "rendezvous, then time a loop of synthetic work", run_hello)};

// Experiments become subcommands: their steps say which role runs where ("{ranks}" takes the value of the
// parameter per run), and they may override parameter defaults.
const fanout_step_spec kSteps[] = {FANOUT_STEP("hello", "1", "{ranks}", "disjoint")};
const fanout_experiment_spec kExperiments[] = {FANOUT_EXPERIMENT("template_hello", "the template plugin's example experiment", FANOUT_ARRAY(kSteps), FANOUT_NO_ARRAY, nullptr, nullptr, nullptr)};

// Which way each metric is better (results compare never guesses it from the unit) and which are once-per-run
// setup costs (FANOUT_SETUP_METRIC: shown as a table, not as a headline plot).
const fanout_metric_spec kMetrics[] = {
    FANOUT_METRIC("work", FANOUT_BETTER_LOWER, "one iteration of the work"),
};

// FANOUT_PLUGIN_WITH_METRICS stamps the ABI version and struct size the loader checks before anything else: a
// plugin built with this header keeps loading in later fanouts until an incompatible ABI change.
const fanout_plugin kPlugin = FANOUT_PLUGIN_WITH_METRICS(
    "template", "a commented example plugin to copy", "1.0.0",
    FANOUT_ARRAY(kParams), FANOUT_ARRAY(kRoles), FANOUT_ARRAY(kExperiments),  // each array with its count
    nullptr,   // init: optional, runs once per rank before the role; return non-zero and write err to refuse
    nullptr,   // fini: optional
    nullptr,   // check: optional, the driver calls it per permutation before submitting; refuse bad combinations
    FANOUT_ARRAY(kMetrics));

}  // namespace

// The one exported symbol.
extern "C" FANOUT_PLUGIN_EXPORT const fanout_plugin* fanout_plugin_entry(void) { return &kPlugin; }
