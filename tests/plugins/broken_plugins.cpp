// Plugins that fail the loader's checks on purpose, one per check, selected at compile time by BROKEN_KIND.
#include <cstdio>

#include "fanout_plugin.h"

namespace {
int ok_role(fanout_context*, const fanout_host_ops*) { return 0; }
const fanout_role kRoles[] = {{"noop", "does nothing", ok_role}};
int failing_init(char* err, size_t len) {
  std::snprintf(err, len, "the test plugin refuses to start");
  return 1;
}
#if BROKEN_KIND == 1  // built against a different ABI number
const fanout_plugin kPlugin = {FANOUT_PLUGIN_ABI_VERSION + 98, "wrong_abi", "", "0", nullptr, 0, kRoles, 1, nullptr, 0, nullptr, nullptr, nullptr};
#elif BROKEN_KIND == 2  // init fails
const fanout_plugin kPlugin = {FANOUT_PLUGIN_ABI_VERSION, "init_fails", "", "0", nullptr, 0, kRoles, 1, nullptr, 0, failing_init, nullptr, nullptr};
#endif
}  // namespace

#if BROKEN_KIND != 3  // kind 3 exports no entry symbol: not a plugin at all
extern "C" FANOUT_PLUGIN_EXPORT const fanout_plugin* fanout_plugin_entry(void) { return &kPlugin; }
#else
extern "C" FANOUT_PLUGIN_EXPORT int some_other_symbol(void) { return 42; }
#endif
