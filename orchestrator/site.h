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
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace fanout {

struct SiteLines {
  std::string setup;
  std::vector<std::string> modules;
  std::vector<std::pair<std::string, std::string>> env;
  bool empty() const { return setup.empty() && modules.empty() && env.empty(); }
  std::string shell() const;  // the lines a batch script runs: setup, module load, exports (values quoted)
};

struct SiteProfile {
  std::filesystem::path file;  // empty: no profile
  std::string origin;          // "--site", "FANOUT_SITE", "~/.config/fanout/site.toml" or "" (none)
  SiteLines site;
  std::map<std::string, SiteLines> roles;
};

// The profile in force: `flag` (the --site value; "none" for no profile), else FANOUT_SITE, else the user's file
// when it exists. A file that is missing (when named), malformed or has unknown keys is a UserError naming it.
SiteProfile load_site(const std::string& flag);

}  // namespace fanout
