/* FROZEN: fanout plugin ABI 3 exactly as it shipped (plugins/sdk/fanout_plugin.h at 9e751e0). Never edit: the
 * ABI 3 test plugin is built against it to prove that the host still loads and runs plugins built for ABI 3. */
/* Fanout plugin ABI, version 3 (2 added fanout_plugin.check and step-count expressions; 3 added session-name
 * templates, shared steps and fanout_host_ops.service_dir).
 *
 * A plugin is a shared object that exports one C symbol, FANOUT_PLUGIN_ENTRY_SYMBOL, returning a pointer to a
 * static fanout_plugin descriptor. The host (fanout, fanout-rank) checks the descriptor's abi_version before
 * touching anything else in it and refuses a mismatch, naming the file and both versions.
 *
 * The plugin sees the host only through fanout_host_ops and an opaque fanout_context: rank and size, its
 * parameters, record(sample), a key-value store with a fence for rendezvous, a log, and a stop flag.
 * This header depends on nothing but the C standard library, so a plugin can be built outside this tree.
 *
 * Rules that keep the ABI small and strict:
 *  - every string the host hands out stays valid until the role function returns;
 *  - every string the plugin hands out (descriptor, names) is static;
 *  - any change to a struct below bumps FANOUT_PLUGIN_ABI_VERSION.
 */
#ifndef FANOUT_PLUGIN_H
#define FANOUT_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FANOUT_PLUGIN_ABI_VERSION 3u
#define FANOUT_PLUGIN_ENTRY_SYMBOL "fanout_plugin_entry"

typedef enum fanout_param_type {
  FANOUT_PARAM_INT = 1,    /* 64-bit signed integer */
  FANOUT_PARAM_FLOAT = 2,  /* double */
  FANOUT_PARAM_STRING = 3, /* any text; never interpreted by a shell */
  FANOUT_PARAM_BOOL = 4    /* true/false (also 1/0, yes/no) */
} fanout_param_type;

typedef struct fanout_param_spec {
  const char *name;          /* flag name without dashes: [A-Za-z_][A-Za-z0-9_]* */
  fanout_param_type type;
  const char *default_value; /* text form; may be a list "[a,b]" to sweep by default */
  const char *help;
} fanout_param_spec;

typedef struct fanout_context fanout_context; /* opaque, owned by the host */
typedef struct fanout_host_ops fanout_host_ops;

/* A role's entry point. Returns 0 on success; any other value fails the rank (and so the run). */
typedef int (*fanout_role_fn)(fanout_context *ctx, const fanout_host_ops *host);

typedef struct fanout_role {
  const char *name;
  const char *summary;
  fanout_role_fn run;
} fanout_role;

/* One step of an experiment: a group of ranks running one role. nodes and tasks_per_node are either a
 * decimal integer ("1"), the name of a parameter in braces ("{client_nodes}"), or a product or rounded-up
 * quotient of two parameters ("{workers*benchmarks}", "{workers/nworkers_per_node}"). placement is
 * "disjoint" (the step gets nodes of its own) or "colocated" (it shares the nodes of the first step). */
typedef struct fanout_step_spec {
  const char *role;
  const char *nodes;
  const char *tasks_per_node;
  const char *placement;
} fanout_step_spec;

/* A parameter default that an experiment overrides (same text form as fanout_param_spec.default_value). */
typedef struct fanout_param_default {
  const char *name;
  const char *value;
} fanout_param_default;

/* An experiment becomes a driver subcommand (e.g. `fanout calibration_sleep`): its steps and defaults. */
typedef struct fanout_experiment_spec {
  const char *name;
  const char *summary;
  const fanout_step_spec *steps;
  uint32_t n_steps;
  const fanout_param_default *defaults;
  uint32_t n_defaults;
  /* Optional (NULL: "<experiment>-sess-<varied parameters>"): the run's session (folder) name, {param} replaced
   * by the run's value, e.g. "throughput-sess-{languages}-N{client_nodes}"; fanout appends "-<8 hex digits of
   * the parameter hash>", as SmartSim-Scaling appends an id, so that names stay unique. */
  const char *session_name;
  /* Optional (NULL: none): the role of a step that consecutive permutations agreeing on every parameter of
   * shared_by (comma-separated names) share, as SmartSim-Scaling reuses one database across its inner loop.
   * That step then runs once per group as a service job of its own, before the group's runs and until the
   * last of them has ended; the runs carry the other steps. See service_dir in fanout_host_ops. */
  const char *shared_step;
  const char *shared_by;
} fanout_experiment_spec;

typedef struct fanout_plugin {
  uint32_t abi_version; /* must be FANOUT_PLUGIN_ABI_VERSION; checked first */
  const char *name;     /* [a-z0-9_]+, unique among installed plugins */
  const char *summary;
  const char *version;  /* the plugin's own version, recorded in each run's provenance */
  const fanout_param_spec *params;
  uint32_t n_params;
  const fanout_role *roles;
  uint32_t n_roles;
  const fanout_experiment_spec *experiments;
  uint32_t n_experiments;
  /* Optional, called once in each rank before the role runs (never when the driver only lists plugins).
   * Returns 0 on success; otherwise writes a reason into err (at most err_len bytes, NUL-terminated). */
  int (*init)(char *err, size_t err_len);
  /* Optional, called once after the role returns. */
  void (*fini)(void);
  /* Optional, called by the driver once per permutation before anything is written or submitted, with the
   * permutation's parameters (text form, already type-checked). Returns 0 when the values make sense together;
   * otherwise writes a reason naming the parameter into err (at most err_len bytes, NUL-terminated). */
  int (*check)(const char *const *names, const char *const *values, uint32_t n, char *err, size_t err_len);
} fanout_plugin;

typedef enum fanout_log_level { FANOUT_LOG_DEBUG = 0, FANOUT_LOG_INFO = 1, FANOUT_LOG_WARN = 2, FANOUT_LOG_ERROR = 3 } fanout_log_level;

struct fanout_host_ops {
  uint32_t abi_version; /* FANOUT_PLUGIN_ABI_VERSION of the host */

  /* Where this rank is. rank/size count the ranks of this role's step; node_index counts nodes in the job. */
  int (*rank)(const fanout_context *ctx);
  int (*size)(const fanout_context *ctx);
  int (*local_rank)(const fanout_context *ctx);
  int (*local_size)(const fanout_context *ctx);
  const char *(*node_name)(const fanout_context *ctx);
  const char *(*role)(const fanout_context *ctx);
  const char *(*run_dir)(const fanout_context *ctx); /* the run's directory; per-rank scratch goes below it */

  /* Parameters: text form, or NULL when the name is unknown. The typed getters return fallback when the
   * name is unknown (the driver has already validated values against the schema). */
  const char *(*param)(const fanout_context *ctx, const char *name);
  int64_t (*param_int)(const fanout_context *ctx, const char *name, int64_t fallback);
  double (*param_double)(const fanout_context *ctx, const char *name, double fallback);

  /* Monotonic clock in nanoseconds: take every duration and every t_start from it. */
  int64_t (*now_ns)(const fanout_context *ctx);

  /* Record one sample: metric (e.g. "put_tensor"), the iteration it belongs to, its start on the now_ns
   * clock, its value in unit (e.g. "s", "us", "bytes/s"), and whether it is warmup. Returns 0, or -1 when the
   * sample could not be stored (the rank then fails). */
  int (*record)(fanout_context *ctx, const char *metric, int64_t iteration, int64_t t_start_ns, double value,
                const char *unit, int warmup);

  /* Rendezvous among all ranks of the job (every step). put publishes key=value; get waits up to
   * timeout_ms for the key and copies at most cap bytes into buf, storing the full length in *len; fence
   * waits until every rank of the job has called it (and makes earlier puts visible). 0 on success. */
  int (*kv_put)(fanout_context *ctx, const char *key, const void *value, size_t len);
  int (*kv_get)(fanout_context *ctx, const char *key, void *buf, size_t cap, size_t *len, int timeout_ms);
  int (*fence)(fanout_context *ctx, int timeout_ms);

  void (*log)(fanout_context *ctx, fanout_log_level level, const char *message);

  /* Non-zero once the run is asked to stop (wall time, cancel; for a service: its group is done): long loops
   * should check it and return. */
  int (*should_stop)(const fanout_context *ctx);

  /* The service folder when this run takes part in a shared step (experiment_spec.shared_step), else NULL.
   * *provider is set to 1 in the service's own ranks, 0 in the ranks of the runs that use it. A service
   * publishes what its users need as files in that folder (written then renamed; 0600 for secrets), rank 0
   * creates <dir>/ready once the service is usable, and the ranks return after should_stop() turns non-zero.
   * The users' ranks start only after <dir>/ready exists. */
  const char *(*service_dir)(const fanout_context *ctx, int *provider);
};

/* The one symbol a plugin exports. */
typedef const fanout_plugin *(*fanout_plugin_entry_fn)(void);

#if defined(__GNUC__)
#define FANOUT_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define FANOUT_PLUGIN_EXPORT
#endif

#ifdef __cplusplus
}
#endif

#endif /* FANOUT_PLUGIN_H */
