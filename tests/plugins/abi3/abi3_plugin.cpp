// A plugin built for ABI 3, against the frozen header beside it and nothing else (CMake gives it only this
// folder): proves that plugins built before ABI 4 keep loading and running. Its role checks that it was handed
// the ABI 3 host ops (the layout it was compiled for), rendezvouses, and records `value` per iteration.
#include <cstdio>
#include <cstring>

#include "fanout_plugin.h"

static_assert(FANOUT_PLUGIN_ABI_VERSION == 3, "this plugin must be built against the frozen ABI 3 header");

namespace {

int run_echo(fanout_context* ctx, const fanout_host_ops* ops) {
  if (ops->abi_version != 3) return 5;  // handed a table of another layout
  const int64_t value = ops->param_int(ctx, "value", -1), iterations = ops->param_int(ctx, "iterations", -1);
  char key[64];
  std::snprintf(key, sizeof key, "abi3.%d", ops->rank(ctx));
  const char* node = ops->node_name(ctx);
  if (ops->kv_put(ctx, key, node, std::strlen(node)) != 0 || ops->fence(ctx, 30000) != 0) return 6;
  size_t len = 0;
  if (ops->kv_get(ctx, "abi3.0", nullptr, 0, &len, 30000) != 0 || len == 0) return 7;
  int provider = -1;
  if (ops->service_dir(ctx, &provider) != nullptr || provider != 0) return 8;
  for (int64_t i = 0; i < iterations && !ops->should_stop(ctx); ++i)
    if (ops->record(ctx, "abi3_value", i, ops->now_ns(ctx), double(value), "count", 0) != 0) return 9;
  ops->log(ctx, FANOUT_LOG_INFO, "abi3 plugin done");
  return 0;
}

const fanout_param_spec kParams[] = {
    {"value", FANOUT_PARAM_INT, "7", "recorded as the sample value"},
    {"iterations", FANOUT_PARAM_INT, "3", "samples per rank"},
    {"ranks", FANOUT_PARAM_INT, "2", "ranks of the step"},
};
const fanout_role kRoles[] = {{"echo", "records value per iteration", run_echo}};
const fanout_step_spec kSteps[] = {{"echo", "1", "{ranks}", "disjoint"}};
const fanout_param_default kDefaults[] = {{"iterations", "4"}};
const fanout_experiment_spec kExperiments[] = {
    {"abi3_echo", "an ABI 3 plugin's experiment", kSteps, 1, kDefaults, 1, "abi3-{value}", nullptr, nullptr}};
const fanout_plugin kPlugin = {FANOUT_PLUGIN_ABI_VERSION, "abi3", "a plugin built for ABI 3", "3.0.0", kParams, 3, kRoles, 1,
                               kExperiments, 1, nullptr, nullptr, nullptr};

}  // namespace

extern "C" FANOUT_PLUGIN_EXPORT const fanout_plugin* fanout_plugin_entry(void) { return &kPlugin; }
