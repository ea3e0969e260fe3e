// A site profile: what a cluster needs before a step can start (modules, environment, setup lines), for the
// whole site and per role, from --site=FILE, else $FANOUT_SITE, else ~/.config/fanout/site.toml (--site=none: no
// profile). Batch scripts run, before the steps, the site's lines, and before each step its role's lines.
//
//   [site]
//   setup = "source /opt/cray/pe/modules/default/init/bash"   # first: it may define `module`
//   modules = ["PrgEnv-gnu", "cray-python"]                   # then `module load ...`
//   env = { OMP_NUM_THREADS = "1" }                           # then `export NAME='value'`
//   [roles.db]                                                # the same keys, for one role's step only
//   env = { FANOUT_REDIS_SERVER = "/opt/keydb/bin/keydb-server" }
//   [settings]                    # defaults for the driver's settings (experiment-file keys): launcher, partition,
//   launcher = "slurm"            # account, batch_args (qos=...), step_launcher, mpi, binding, ...; an experiment
//   batch_args = ["qos=normal"]   # file or the command line overrides each
//   [parameters]                  # defaults for plugin parameters of these names, where an experiment uses them
//   net_ifname = "hsn0"
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace fanout {

class Plugin;
struct ExperimentRequest;

struct SiteLines {
  std::string setup;
  std::vector<std::string> modules;
  std::vector<std::pair<std::string, std::string>> env;
  bool empty() const { return setup.empty() && modules.empty() && env.empty(); }
  std::string shell() const;  // the lines a batch script runs: setup, module load, exports (values quoted)
};

struct SiteValue {
  std::string key;
  std::vector<std::string> values;  // one per item of a list
  std::string origin;               // "site.toml:4: settings.launcher"
};

struct SiteProfile {
  std::filesystem::path file;  // empty: no profile
  std::string origin;          // "--site", "FANOUT_SITE", "~/.config/fanout/site.toml" or "" (none)
  SiteLines site;
  std::map<std::string, SiteLines> roles;
  std::vector<SiteValue> settings;    // [settings], keys checked against the driver's settings
  std::vector<SiteValue> parameters;  // [parameters]
};

// The profile in force: `flag` (the --site value; "none" for no profile), else FANOUT_SITE, else the user's file
// when it exists. A file that is missing (when named), malformed or has unknown keys is a UserError naming it.
SiteProfile load_site(const std::string& flag);
// Fills in what the request does not give: the profile's settings, and its parameters that `plugin` has and the
// request's experiment uses (others are for other plugins and experiments).
void apply_site_defaults(const SiteProfile& site, const Plugin& plugin, ExperimentRequest& req);

}  // namespace fanout
