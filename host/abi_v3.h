// The structs of plugin ABI 3 (fanout 0.1's plugins/sdk/fanout_plugin.h, frozen), which the loader still reads:
// ABI 3 had no struct sizes, so its shapes are fixed here forever. tests/plugins/abi3/ builds a plugin against
// the original header and PluginLoader.LoadsAbi3Plugin / Cli.RunsAbi3Plugin run it.
#pragma once
#include <cstddef>
#include <cstdint>

#include "plugins/sdk/fanout_plugin.h"

namespace fanout::abi3 {

struct ParamSpec {
  const char* name;
  fanout_param_type type;
  const char* default_value;
  const char* help;
};
struct Role {
  const char* name;
  const char* summary;
  fanout_role_fn run;  // called with a HostOps*, below
};
struct StepSpec {
  const char *role, *nodes, *tasks_per_node, *placement;
};
struct ParamDefault {
  const char *name, *value;
};
struct ExperimentSpec {
  const char* name;
  const char* summary;
  const StepSpec* steps;
  uint32_t n_steps;
  const ParamDefault* defaults;
  uint32_t n_defaults;
  const char* session_name;
  const char* shared_step;
  const char* shared_by;
};
struct Plugin {
  uint32_t abi_version;
  const char* name;
  const char* summary;
  const char* version;
  const ParamSpec* params;
  uint32_t n_params;
  const Role* roles;
  uint32_t n_roles;
  const ExperimentSpec* experiments;
  uint32_t n_experiments;
  int (*init)(char* err, size_t err_len);
  void (*fini)(void);
  int (*check)(const char* const* names, const char* const* values, uint32_t n, char* err, size_t err_len);
};
// ABI 4's fanout_host_ops without struct_size and experiment_dir: the same ops in the same order.
struct HostOps {
  uint32_t abi_version;
  int (*rank)(const fanout_context*);
  int (*size)(const fanout_context*);
  int (*local_rank)(const fanout_context*);
  int (*local_size)(const fanout_context*);
  const char* (*node_name)(const fanout_context*);
  const char* (*role)(const fanout_context*);
  const char* (*run_dir)(const fanout_context*);
  const char* (*param)(const fanout_context*, const char*);
  int64_t (*param_int)(const fanout_context*, const char*, int64_t);
  double (*param_double)(const fanout_context*, const char*, double);
  int64_t (*now_ns)(const fanout_context*);
  int (*record)(fanout_context*, const char*, int64_t, int64_t, double, const char*, int);
  int (*kv_put)(fanout_context*, const char*, const void*, size_t);
  int (*kv_get)(fanout_context*, const char*, void*, size_t, size_t*, int);
  int (*fence)(fanout_context*, int);
  void (*log)(fanout_context*, fanout_log_level, const char*);
  int (*should_stop)(const fanout_context*);
  const char* (*service_dir)(const fanout_context*, int*);
};

#if defined(__x86_64__) || defined(__aarch64__)
// The layouts ABI 3 plugins were built with (LP64).
static_assert(sizeof(ParamSpec) == 32 && sizeof(Role) == 24 && sizeof(StepSpec) == 32 && sizeof(ParamDefault) == 16);
static_assert(sizeof(ExperimentSpec) == 72 && offsetof(ExperimentSpec, shared_by) == 64);
static_assert(sizeof(Plugin) == 104 && offsetof(Plugin, check) == 96);
static_assert(sizeof(HostOps) == 8 + 18 * 8 && offsetof(HostOps, service_dir) == 8 + 17 * 8);
#endif

}  // namespace fanout::abi3
