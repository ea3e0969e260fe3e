/* Fanout plugin ABI, version 4 (2 added fanout_plugin.check and step-count expressions; 3 added session-name
 * templates, shared steps and fanout_host_ops.service_dir; 4 made every struct carry its own size, so that
 * later additions append fields without breaking built plugins, and added parameter choices and bounds and
 * fanout_host_ops.experiment_dir; 4.5 appended user parameters, step settings and repeatable flags; 4.6 appended
 * metric descriptions (which direction is better, setup costs) and fanout_host_ops.declare_metric; 4.7 appended
 * fanout_plugin.plan_step, a step checked and described before anything runs; 4.8 the scaling flags of a parameter
 * that counts nodes, ranks or threads). The host still loads ABI 3 plugins (FANOUT_PLUGIN_ABI_OLDEST).
 *
 * A plugin is a shared object that exports one C symbol, FANOUT_PLUGIN_ENTRY_SYMBOL, returning a pointer to a
 * static fanout_plugin descriptor. The host (fanout, fanout-rank) checks the descriptor's abi_version before
 * touching anything else in it and refuses a version it cannot read, naming the file and the versions.
 *
 * The plugin sees the host only through fanout_host_ops and an opaque fanout_context: rank and size, its
 * parameters, record(sample), a key-value store with a fence for rendezvous, a log, and a stop flag.
 * This header depends on nothing but the C standard library, so a plugin can be built outside this tree.
 *
 * Rules that keep the ABI small and strict:
 *  - every string the host hands out stays valid until the role function returns;
 *  - every string the plugin hands out (descriptor, names) is static;
 *  - every struct starts with struct_size (fanout_plugin and fanout_host_ops: right after abi_version), set to
 *    sizeof the struct the plugin was built with (the FANOUT_* macros and the SDK's builders do it). Fields are
 *    only ever appended: a reader uses a field only when struct_size says it is there (FANOUT_HAS), and steps
 *    through arrays by the elements' struct_size. Only an incompatible change bumps FANOUT_PLUGIN_ABI_VERSION.
 */
#ifndef FANOUT_PLUGIN_H
#define FANOUT_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FANOUT_PLUGIN_ABI_VERSION 4u
#define FANOUT_PLUGIN_ABI_OLDEST 3u /* the oldest ABI the host still loads */
#define FANOUT_PLUGIN_ENTRY_SYMBOL "fanout_plugin_entry"
/* The files a shared step's service folder holds (service_dir below): rank 0 of the service creates READY once
 * it is usable; the driver creates STOP once the service's last run has ended. */
#define FANOUT_SERVICE_READY_FILE "ready"
#define FANOUT_SERVICE_STOP_FILE "stop"
/* A service's files named env.<NAME> are environment for programs its users start (an exec step gets NAME=<the
 * file's text>): the smartsim database publishes SSDB, SR_DB_TYPE and SR_DB_PASSWORD so. */
#define FANOUT_SERVICE_ENV_PREFIX "env."
/* A rank may say what it ran (a program's path and checksum) in files <run_dir>/provenance/<name>, NAME=value lines
 * (written then renamed): the run's provenance gets each as plugin.<NAME>, beside the driver's own keys. */
#define FANOUT_RUN_PROVENANCE_DIR "provenance"
/* Set to "1" in a rank's environment when its step runs an MPI program (the step's mpi_program): the rank did
 * not join the launcher's PMIx, so the program it starts may, once per rank (a PMIx server takes one connection
 * per rank: a second MPI_Init fails). */
#define FANOUT_MPI_PROGRAM_ENV "FANOUT_MPI_PROGRAM"
/* Set to "off" in a rank's environment when the run records no resource.* figures (the driver's --resources=off):
 * a plugin that measures what its programs cost (exec, per invocation; fanout_resources.hpp) asks it. Otherwise the
 * rank records its own process's (and its waited-for children's) figures after the role returns, unless the role
 * recorded resource.* figures itself. */
#define FANOUT_RESOURCES_ENV "FANOUT_RESOURCES"
/* The family those figures are named in (resource.peak_rss, ...): the report groups them under Resources, and
 * --repeat=auto does not wait for them to be precise. */
#define FANOUT_RESOURCE_METRIC_PREFIX "resource."
/* The performance counters the run asks for (the driver's --counters: "instructions,task-clock"), set in a rank's
 * environment for its role; each is recorded as resource.counter.<name> (fanout_counters.hpp). */
#define FANOUT_COUNTERS_ENV "FANOUT_COUNTERS"

/* Counting a static array, once: FANOUT_ARRAY(kSteps) expands to the pointer and its count. */
#define FANOUT_COUNT(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))
#define FANOUT_ARRAY(a) (a), FANOUT_COUNT(a)
#define FANOUT_NO_ARRAY NULL, 0u
/* Whether a struct read from the other side holds `field` (it was built with a header that has it). */
#define FANOUT_HAS(p, T, field) ((p)->struct_size >= offsetof(T, field) + sizeof(((T *)0)->field))

typedef enum fanout_param_type {
  FANOUT_PARAM_INT = 1,    /* 64-bit signed integer */
  FANOUT_PARAM_FLOAT = 2,  /* double */
  FANOUT_PARAM_STRING = 3, /* any text; never interpreted by a shell */
  FANOUT_PARAM_BOOL = 4,   /* true/false (also 1/0, yes/no) */
  /* A file (ABI 4.4; an older host refuses it): the driver resolves a relative value against the user's
   * working directory and checks that the file exists when it plans, so the rank gets an absolute path (ranks
   * start in their run folder). `choices` are words taken instead of a file (e.g. "seed"). */
  FANOUT_PARAM_PATH = 5
} fanout_param_type;

/* fanout_param_spec.flags */
#define FANOUT_PARAM_MIN_EXCLUSIVE 1u /* the value must be > min (not >=) */
#define FANOUT_PARAM_MAX_EXCLUSIVE 2u /* the value must be < max (not <=) */
#define FANOUT_PARAM_PATH_OUTPUT 4u   /* PATH: a file the run may write: resolved, its folder must exist */
/* ABI 4.5: the flag may be given several times (`--env A=1 --env B=2`); the values join, one per line, into one
 * value, never a sweep. An older host ignores the flag (the last value given counts). */
#define FANOUT_PARAM_REPEATABLE 8u
/* ABI 4.8: the parameter counts what the work is spread over (nodes, ranks, threads, servers): a sweep over it
 * gets speedup and parallel efficiency against its smallest value (csv/scaling.csv, the report). STRONG: the
 * same work spread wider (ideal: the time falls as 1/p); WEAK: the work grows with it (ideal: the time stays).
 * One or the other; the user's --scaling overrides both. An older host ignores them. */
#define FANOUT_PARAM_STRONG_SCALING 16u
#define FANOUT_PARAM_WEAK_SCALING 32u
/* ABI 4.9: a setting of how the plugin runs (exec's command, parser, environment), not a parameter of what is
 * measured: kept in run.toml and the database, but not a parameter column of the results' CSV files unless it
 * varies within the experiment. An older host ignores it (a column as before). */
#define FANOUT_PARAM_SETTING 64u

typedef struct fanout_param_spec {
  uint32_t struct_size;      /* sizeof(fanout_param_spec) */
  fanout_param_type type;
  const char *name;          /* flag name without dashes: [A-Za-z_][A-Za-z0-9_]* */
  const char *default_value; /* text form; may be a list "[a,b]" to sweep by default. The one statement of the
                              * default: the host passes every parameter to every rank, so code needs no fallback */
  const char *help;
  /* Checked by the driver before anything is written or submitted, for every value of every permutation, and
   * by the loader for the defaults. */
  const char *const *choices; /* STRING or INT: the value must be one of these (NULL: any); PATH: words besides a file */
  uint32_t n_choices;
  uint32_t flags;             /* FANOUT_PARAM_MIN_EXCLUSIVE, FANOUT_PARAM_MAX_EXCLUSIVE */
  const char *min;            /* INT or FLOAT: bounds in text form, inclusive unless flags say (NULL: open) */
  const char *max;
} fanout_param_spec;

/* Table rows, C and C++ alike: FANOUT_PARAM("iterations", FANOUT_PARAM_INT, "100", "measured iterations"),
 * FANOUT_PARAM_ONE_OF("mode", FANOUT_PARAM_STRING, "tcp", "tcp or uds", kModes) with
 * static const char *const kModes[] = {"tcp", "uds"}, FANOUT_PARAM_RANGE(..., "1", NULL) for >= 1. */
#define FANOUT_PARAM(name, type, def, help) {sizeof(fanout_param_spec), type, name, def, help, NULL, 0u, 0u, NULL, NULL}
#define FANOUT_PARAM_ONE_OF(name, type, def, help, choices) \
  {sizeof(fanout_param_spec), type, name, def, help, FANOUT_ARRAY(choices), 0u, NULL, NULL}
#define FANOUT_PARAM_RANGE(name, type, def, help, min, max) \
  {sizeof(fanout_param_spec), type, name, def, help, NULL, 0u, 0u, min, max}
#define FANOUT_PARAM_RANGE_FLAGS(name, type, def, help, min, max, flags) \
  {sizeof(fanout_param_spec), type, name, def, help, NULL, 0u, flags, min, max}
/* A setting of how the plugin runs (FANOUT_PARAM_SETTING), with any other flags. */
#define FANOUT_SETTING(name, type, def, help, flags) \
  {sizeof(fanout_param_spec), type, name, def, help, NULL, 0u, FANOUT_PARAM_SETTING | (flags), NULL, NULL}

typedef struct fanout_context fanout_context; /* opaque, owned by the host */
typedef struct fanout_host_ops fanout_host_ops;

/* A role's entry point. Returns 0 on success; any other value fails the rank (and so the run). */
typedef int (*fanout_role_fn)(fanout_context *ctx, const fanout_host_ops *host);

typedef struct fanout_role {
  uint32_t struct_size; /* sizeof(fanout_role) */
  const char *name;
  const char *summary;
  fanout_role_fn run;
} fanout_role;
#define FANOUT_ROLE(name, summary, run) {sizeof(fanout_role), name, summary, run}

/* One step of an experiment: a group of ranks running one role. nodes and tasks_per_node are either a
 * decimal integer ("1"), the name of a parameter in braces ("{client_nodes}"), or a product or rounded-up
 * quotient of two parameters ("{workers*benchmarks}", "{workers/nworkers_per_node}"). placement is
 * "disjoint" (the step gets nodes of its own) or "colocated" (it shares the nodes of the first step). */
typedef struct fanout_step_spec {
  uint32_t struct_size; /* sizeof(fanout_step_spec) */
  const char *role;
  const char *nodes;
  const char *tasks_per_node;
  const char *placement;
  /* Appended in ABI 4.2 (older plugins' struct_size ends before it: read as NULL). Optional (NULL: "1"): CPUs each
   * task of the step gets, a count expression like nodes ("{db_cpus}"): srun's --cpus-per-task, so that a site's
   * task/affinity or cgroup binding gives the task that many CPUs. */
  const char *cpus_per_task;
  /* Appended in ABI 4.3 (NULL or 0: not asked; an older plugin's struct_size ends before them). */
  /* GPUs each task gets (srun --gpus-per-task; Slurm sets CUDA_VISIBLE_DEVICES): a count expression, "0", or either
   * followed by " if <param>=<value>", which makes it 0 in permutations where the parameter has another value
   * ("{num_devices} if device=GPU"). */
  const char *gpus_per_task;
  /* Memory per node for the step in megabytes (srun --mem): a count expression or "0", " if ..." as above. */
  const char *memory_mb;
  /* How the step's tasks are bound to their CPUs: "cores", "none", or "map:<cpu>,<cpu>,..." (one CPU per local
   * task); NULL: the run's --binding, else the scheduler's default. */
  const char *binding;
  /* Non-zero: the step's tasks get CPUs no other step of the job uses (srun --exclusive rather than --overlap). */
  uint32_t exclusive;
} fanout_step_spec;
#define FANOUT_STEP(role, nodes, tasks_per_node, placement) \
  {sizeof(fanout_step_spec), role, nodes, tasks_per_node, placement, NULL, NULL, NULL, NULL, 0u}
/* A step whose tasks need more than one CPU each: FANOUT_STEP_CPUS("db", "{db_nodes}", "1", "disjoint", "{db_cpus}") */
#define FANOUT_STEP_CPUS(role, nodes, tasks_per_node, placement, cpus_per_task) \
  {sizeof(fanout_step_spec), role, nodes, tasks_per_node, placement, cpus_per_task, NULL, NULL, NULL, 0u}
/* Every resource of a step: FANOUT_STEP_RESOURCES("db", "{db_nodes}", "1", "disjoint", "{db_cpus}",
 * "{num_devices} if device=GPU", NULL, NULL, 0) */
#define FANOUT_STEP_RESOURCES(role, nodes, tasks_per_node, placement, cpus_per_task, gpus_per_task, memory_mb, binding, exclusive) \
  {sizeof(fanout_step_spec), role, nodes, tasks_per_node, placement, cpus_per_task, gpus_per_task, memory_mb, binding, exclusive}

/* A parameter default that an experiment overrides (same text form as fanout_param_spec.default_value). */
typedef struct fanout_param_default {
  uint32_t struct_size; /* sizeof(fanout_param_default) */
  const char *name;
  const char *value;
} fanout_param_default;
#define FANOUT_DEFAULT(name, value) {sizeof(fanout_param_default), name, value}

/* An experiment becomes a driver subcommand (e.g. `fanout calibration_sleep`): its steps and defaults. */
typedef struct fanout_experiment_spec {
  uint32_t struct_size; /* sizeof(fanout_experiment_spec) */
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
  /* Appended in ABI 4.1 (an ABI 4.0 plugin's struct_size ends before it: read as NULL). Optional (NULL: every
   * parameter): the parameters this experiment uses, comma-separated. Only these are its command-line flags and
   * appear in its help and dry-run lines; the others keep their defaults (a role may still read them). */
  const char *uses;
} fanout_experiment_spec;
/* FANOUT_EXPERIMENT("name", "summary", FANOUT_ARRAY(kSteps), FANOUT_NO_ARRAY, NULL, NULL, NULL): every parameter */
#define FANOUT_EXPERIMENT(name, summary, steps_and_count, defaults_and_count, session_name, shared_step, shared_by) \
  {sizeof(fanout_experiment_spec), name, summary, steps_and_count, defaults_and_count, session_name, shared_step, shared_by, NULL}
/* The same with the parameters it uses: FANOUT_EXPERIMENT_USING(..., "nodes,iterations,warmup") */
#define FANOUT_EXPERIMENT_USING(name, summary, steps_and_count, defaults_and_count, session_name, shared_step, shared_by, uses) \
  {sizeof(fanout_experiment_spec), name, summary, steps_and_count, defaults_and_count, session_name, shared_step, shared_by, uses}

/* ABI 4.6: which way a metric is better, so that a verdict (results compare, references) never guesses it from the
 * unit. A plugin's metrics table declares its own; a plugin whose metric names come from its input (exec) declares
 * each at run time with fanout_host_ops.declare_metric. */
typedef enum fanout_better {
  FANOUT_BETTER_UNDECLARED = 0, /* only an exact time unit (lower) or "<x>/s" (higher) then decides */
  FANOUT_BETTER_LOWER = 1,      /* times, latencies, memory, losses */
  FANOUT_BETTER_HIGHER = 2,     /* rates, bandwidths, throughputs */
  FANOUT_BETTER_NONE = 3        /* informational (a count, a setting): a change is reported, never a verdict */
} fanout_better;
/* fanout_metric_spec.flags: a cost paid once per run (database start, rendezvous), shown as a table in reports, not
 * as a distribution or a headline plot. */
#define FANOUT_METRIC_SETUP_COST 1u

typedef struct fanout_metric_spec {
  uint32_t struct_size; /* sizeof(fanout_metric_spec) */
  const char *name;     /* the metric, or a prefix ending in '*' ("completion_s.app*") */
  fanout_better better;
  uint32_t flags;       /* FANOUT_METRIC_SETUP_COST */
  const char *help;     /* what it measures, for `fanout help <plugin>`; may be NULL */
} fanout_metric_spec;
#define FANOUT_METRIC(name, better, help) {sizeof(fanout_metric_spec), name, better, 0u, help}
#define FANOUT_SETUP_METRIC(name, better, help) {sizeof(fanout_metric_spec), name, better, FANOUT_METRIC_SETUP_COST, help}

/* One step of one permutation, as fanout_plugin.plan_step sees it (ABI 4.7). */
typedef struct fanout_step_plan {
  uint32_t struct_size;       /* sizeof(fanout_step_plan) */
  uint32_t flags;             /* FANOUT_STEP_PLAN_LOCAL */
  const char *step;           /* the step's name, which labels its samples */
  const char *role;
  const char *settings;       /* the step's settings (an experiment file's step keys) as a JSON object, or "" */
  const char *const *names;   /* the permutation's parameters, text form */
  const char *const *values;
  uint32_t n;
  int64_t ranks;              /* the step's ranks: nodes x tasks per node */
  const char *submit_dir;     /* the folder fanout was started in: FANOUT_SUBMIT_DIR of the ranks */
  /* Every step of the run (this one too), in the file's order, with its settings ("" when none): what one step
   * says of the others (exec's `after`) is checked against them before anything runs. */
  const char *const *run_steps;
  const char *const *run_step_settings;
  uint32_t n_run_steps;
} fanout_step_plan;
/* fanout_step_plan.flags: the ranks run on the driver's machine (the local launcher): its files and PATH are theirs,
 * so a program missing here is missing there. */
#define FANOUT_STEP_PLAN_LOCAL 1u

typedef struct fanout_plugin {
  uint32_t abi_version; /* FANOUT_PLUGIN_ABI_VERSION of the header it was built with; checked first, always first */
  uint32_t struct_size; /* sizeof(fanout_plugin) */
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
  /* Appended in ABI 4.5 (an older plugin's struct_size ends before them: read as 0 and NULL). */
  uint32_t flags; /* FANOUT_PLUGIN_USER_PARAMETERS */
  /* Keys an experiment file's [[steps]] table may carry besides the host's own (name, role, nodes, ...): the
   * step's settings, which its ranks read as a JSON object through fanout_host_ops.step_settings. */
  const char *const *step_keys;
  uint32_t n_step_keys;
  /* Appended in ABI 4.6 (an older plugin's struct_size ends before them: no declared metric). */
  const fanout_metric_spec *metrics;
  uint32_t n_metrics;
  /* Appended in ABI 4.7, optional: called by the driver for each step of each permutation it plans (a dry run
   * too), before anything is written or submitted. Returns 0 when the step can run, `out` then holding what each
   * rank will run (a dry run prints it; lines starting "warning: " the driver prints once); non-zero refuses the
   * plan, `out` saying why (naming the flag or step key). out_len bytes at most, NUL-terminated. */
  int (*plan_step)(const fanout_step_plan *step, char *out, size_t out_len);
} fanout_plugin;

/* fanout_plugin.flags: parameters the plugin does not declare are accepted (`--param name=[a,b]`, an experiment
 * file's [parameters]) as the user's own text parameters: swept like any other, stored, and readable with
 * param(). A step setting's "{name}" must name one of them or a declared parameter. */
#define FANOUT_PLUGIN_USER_PARAMETERS 1u
/* FANOUT_PLUGIN("name", "summary", "1.0.0", FANOUT_ARRAY(kParams), FANOUT_ARRAY(kRoles), FANOUT_ARRAY(kExperiments),
 *               init, fini, check) */
#define FANOUT_PLUGIN(name, summary, version, params_and_count, roles_and_count, experiments_and_count, init, fini, check) \
  {FANOUT_PLUGIN_ABI_VERSION, sizeof(fanout_plugin), name, summary, version, params_and_count, roles_and_count, \
   experiments_and_count, init, fini, check, 0u, NULL, 0u, NULL, 0u, NULL}
/* The same with its metrics (ABI 4.6): ..., check, FANOUT_ARRAY(kMetrics)) */
#define FANOUT_PLUGIN_WITH_METRICS(name, summary, version, params_and_count, roles_and_count, experiments_and_count, init, fini, check, metrics_and_count) \
  {FANOUT_PLUGIN_ABI_VERSION, sizeof(fanout_plugin), name, summary, version, params_and_count, roles_and_count, \
   experiments_and_count, init, fini, check, 0u, NULL, 0u, metrics_and_count, NULL}
/* The same with flags, step keys (ABI 4.5) and metrics: ..., check, FANOUT_PLUGIN_USER_PARAMETERS,
 * FANOUT_ARRAY(kStepKeys), FANOUT_ARRAY(kMetrics)) */
#define FANOUT_PLUGIN_EXTENDED(name, summary, version, params_and_count, roles_and_count, experiments_and_count, init, fini, check, flags, step_keys_and_count, metrics_and_count) \
  {FANOUT_PLUGIN_ABI_VERSION, sizeof(fanout_plugin), name, summary, version, params_and_count, roles_and_count, \
   experiments_and_count, init, fini, check, flags, step_keys_and_count, metrics_and_count, NULL}
/* The same with plan_step (ABI 4.7): ..., FANOUT_ARRAY(kMetrics), plan_step) */
#define FANOUT_PLUGIN_PLANNED(name, summary, version, params_and_count, roles_and_count, experiments_and_count, init, fini, check, flags, step_keys_and_count, metrics_and_count, plan_step) \
  {FANOUT_PLUGIN_ABI_VERSION, sizeof(fanout_plugin), name, summary, version, params_and_count, roles_and_count, \
   experiments_and_count, init, fini, check, flags, step_keys_and_count, metrics_and_count, plan_step}

typedef enum fanout_log_level { FANOUT_LOG_DEBUG = 0, FANOUT_LOG_INFO = 1, FANOUT_LOG_WARN = 2, FANOUT_LOG_ERROR = 3 } fanout_log_level;

struct fanout_host_ops {
  uint32_t abi_version; /* FANOUT_PLUGIN_ABI_VERSION of the host */
  uint32_t struct_size; /* sizeof(fanout_host_ops) of the host: use an op added later only when FANOUT_HAS says so */

  /* Where this rank is. rank/size count the ranks of this role's step; node_index counts nodes in the job. */
  int (*rank)(const fanout_context *ctx);
  int (*size)(const fanout_context *ctx);
  int (*local_rank)(const fanout_context *ctx);
  int (*local_size)(const fanout_context *ctx);
  const char *(*node_name)(const fanout_context *ctx);
  const char *(*role)(const fanout_context *ctx);
  const char *(*run_dir)(const fanout_context *ctx); /* the run's directory; per-rank scratch goes below it */

  /* Parameters: text form, or NULL when the name is unknown. Every declared parameter is always present (its
   * default when not given): the typed getters return fallback only for a name the plugin did not declare. */
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

  /* ABI 4. The experiment's folder, shared by every run of the experiment (models, profiles, caches a plugin
   * builds once per experiment go there). */
  const char *(*experiment_dir)(const fanout_context *ctx);

  /* ABI 4.5. The settings this rank's step got from an experiment file's [[steps]] table (the plugin's
   * step_keys), as one JSON object, or NULL when it got none. */
  const char *(*step_settings)(const fanout_context *ctx);

  /* ABI 4.6. Declares which way a metric this rank records is better (fanout_better) and its flags
   * (FANOUT_METRIC_SETUP_COST), for metrics whose names the plugin's table cannot know (exec's come from the
   * program's output). A declaration overrides the table's. 0, or -1 for an empty name or an unknown direction. */
  int (*declare_metric)(fanout_context *ctx, const char *metric, int better, uint32_t flags);
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
