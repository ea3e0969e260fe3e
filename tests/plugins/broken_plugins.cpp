// Plugins that fail the loader's checks on purpose, one per check, selected at compile time by BROKEN_KIND.
#include <cstdio>
#include <cstdlib>

#include "fanout_plugin.h"

namespace {
int ok_role(fanout_context*, const fanout_host_ops*) { return 0; }
const fanout_role kRoles[] = {FANOUT_ROLE("noop", "does nothing", ok_role)};
[[maybe_unused]] int failing_init(char* err, size_t len) {
  std::snprintf(err, len, "the test plugin refuses to start");
  return 1;
}
#if BROKEN_KIND == 1  // built against a different ABI number
const fanout_plugin kPlugin = {FANOUT_PLUGIN_ABI_VERSION + 98, sizeof(fanout_plugin), "wrong_abi", "", "0", FANOUT_NO_ARRAY,
                               FANOUT_ARRAY(kRoles), FANOUT_NO_ARRAY, nullptr, nullptr, nullptr, 0u, nullptr, 0u};
#elif BROKEN_KIND == 2  // init fails
const fanout_plugin kPlugin = FANOUT_PLUGIN("init_fails", "", "0", FANOUT_NO_ARRAY, FANOUT_ARRAY(kRoles), FANOUT_NO_ARRAY, failing_init, nullptr, nullptr);
#elif BROKEN_KIND == 4  // an array element without its struct_size (hand-written, not from FANOUT_PARAM)
const fanout_param_spec kParams[] = {{0, FANOUT_PARAM_INT, "n", "1", "", nullptr, 0, 0, nullptr, nullptr}};
const fanout_plugin kPlugin = FANOUT_PLUGIN("no_struct_size", "", "0", FANOUT_ARRAY(kParams), FANOUT_ARRAY(kRoles), FANOUT_NO_ARRAY, nullptr, nullptr, nullptr);
#elif BROKEN_KIND == 5  // a choice that is not of the parameter's type
const char* const kChoices[] = {"1", "two"};
const fanout_param_spec kParams[] = {FANOUT_PARAM_ONE_OF("n", FANOUT_PARAM_INT, "1", "", kChoices)};
const fanout_plugin kPlugin = FANOUT_PLUGIN("bad_choice", "", "0", FANOUT_ARRAY(kParams), FANOUT_ARRAY(kRoles), FANOUT_NO_ARRAY, nullptr, nullptr, nullptr);
#elif BROKEN_KIND == 6  // an experiment that says it uses a parameter the plugin does not have
const fanout_param_spec kParams[] = {FANOUT_PARAM("n", FANOUT_PARAM_INT, "1", "")};
const fanout_step_spec kSteps[] = {FANOUT_STEP("noop", "1", "1", "disjoint")};
const fanout_experiment_spec kExperiments[] = {
    FANOUT_EXPERIMENT_USING("uses_unknown", "", FANOUT_ARRAY(kSteps), FANOUT_NO_ARRAY, nullptr, nullptr, nullptr, "n,m")};
const fanout_plugin kPlugin = FANOUT_PLUGIN("uses_unknown", "", "0", FANOUT_ARRAY(kParams), FANOUT_ARRAY(kRoles), FANOUT_ARRAY(kExperiments), nullptr, nullptr, nullptr);
#elif BROKEN_KIND == 8  // an unused parameter with a list default: it would multiply the runs unseen
const fanout_param_spec kParams[] = {FANOUT_PARAM("n", FANOUT_PARAM_INT, "1", ""), FANOUT_PARAM("m", FANOUT_PARAM_INT, "[1,2]", "")};
const fanout_step_spec kSteps[] = {FANOUT_STEP("noop", "1", "1", "disjoint")};
const fanout_experiment_spec kExperiments[] = {
    FANOUT_EXPERIMENT_USING("hidden_list", "", FANOUT_ARRAY(kSteps), FANOUT_NO_ARRAY, nullptr, nullptr, nullptr, "n")};
const fanout_plugin kPlugin = FANOUT_PLUGIN("hidden_list", "", "0", FANOUT_ARRAY(kParams), FANOUT_ARRAY(kRoles), FANOUT_ARRAY(kExperiments), nullptr, nullptr, nullptr);
#elif BROKEN_KIND == 9  // a count parameter declared both strong and weak scaling
const fanout_param_spec kParams[] = {
    FANOUT_PARAM_RANGE_FLAGS("n", FANOUT_PARAM_INT, "1", "", "1", NULL, FANOUT_PARAM_STRONG_SCALING | FANOUT_PARAM_WEAK_SCALING)};
const fanout_plugin kPlugin = FANOUT_PLUGIN("both_scalings", "", "0", FANOUT_ARRAY(kParams), FANOUT_ARRAY(kRoles), FANOUT_NO_ARRAY, nullptr, nullptr, nullptr);
#elif BROKEN_KIND == 7  // not broken: experiments laid out as ABI 4.0 built them, before `uses` was appended
struct ExperimentSpec40 {  // fanout_experiment_spec up to shared_by
  uint32_t struct_size;
  const char *name, *summary;
  const fanout_step_spec* steps;
  uint32_t n_steps;
  const fanout_param_default* defaults;
  uint32_t n_defaults;
  const char *session_name, *shared_step, *shared_by;
};
const fanout_param_spec kParams[] = {FANOUT_PARAM("n", FANOUT_PARAM_INT, "1", ""), FANOUT_PARAM("m", FANOUT_PARAM_INT, "2", "")};
const fanout_step_spec kSteps[] = {FANOUT_STEP("noop", "1", "1", "disjoint")};
const ExperimentSpec40 kExperiments[] = {{sizeof(ExperimentSpec40), "abi40_noop", "", kSteps, 1, nullptr, 0, nullptr, nullptr, nullptr},
                                         {sizeof(ExperimentSpec40), "abi40_other", "", kSteps, 1, nullptr, 0, nullptr, nullptr, nullptr}};
const fanout_plugin kPlugin = {FANOUT_PLUGIN_ABI_VERSION, sizeof(fanout_plugin), "abi40", "", "0", FANOUT_ARRAY(kParams), FANOUT_ARRAY(kRoles),
                               reinterpret_cast<const fanout_experiment_spec*>(kExperiments), 2, nullptr, nullptr, nullptr, 0u, nullptr, 0u};
#endif
}  // namespace

#if BROKEN_KIND != 3  // kind 3 exports no entry symbol: not a plugin at all
extern "C" FANOUT_PLUGIN_EXPORT const fanout_plugin* fanout_plugin_entry(void) { return &kPlugin; }
#else
extern "C" FANOUT_PLUGIN_EXPORT int some_other_symbol(void) { return 42; }
// Code that would run when the library is loaded: the loader must refuse the file before that (issue 53).
__attribute__((constructor)) static void leave_a_mark() {
  if (const char* mark = std::getenv("FANOUT_TEST_CONSTRUCTOR_MARK")) {
    if (FILE* f = std::fopen(mark, "w")) std::fclose(f);
  }
}
#endif
