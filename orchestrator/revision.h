// What code a sweep measured: the revision of the code under test, stored with every run (issue 55). Fanout's own
// revision is in the provenance already (fanout_git_revision); this is the user's.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/subprocess.h"

namespace fanout {

// git in a working tree, as argv (no shell: the folder is an argument). Variables a hook or a wrapper may have set
// that would point git at another repository are dropped (env -u), and the tree's own settings run nothing
// (core.fsmonitor) and take no lock (--no-optional-locks).
ProcessResult git_in(const std::filesystem::path& dir, std::vector<std::string> args, double timeout_s = 60);

// --revision=REV (a commit, a tag, a version: any text) and --source=DIR (a git working tree: its HEAD commit,
// whether tracked files differ from it, and the commit's time). Provenance keys: revision (REV, else the commit),
// source_dir, source_commit, source_dirty (true/false), source_commit_time (ISO 8601). Empty when neither is given.
// Throws UserError naming --source when DIR is not a git working tree (or git is missing).
std::map<std::string, std::string> revision_provenance(const std::string& revision, const std::string& source);

// Why runs of the revision `now` (revision_provenance's) cannot join an experiment whose runs measured the stored
// revisions and dirty flags; "" when they can (nothing stored, nothing said, or the same code). One experiment
// measures one revision: runs added later (--resume, compare --until-decided, a second driver) at another would
// mix two codes under one name.
struct ExperimentSettings;

// The refusal a conflict gives, naming the flag and the experiment (each side of compare --until-decided needs its
// own working tree when their revisions differ).
std::string revision_refusal(const ExperimentSettings& settings, const std::filesystem::path& exp_dir, const std::string& conflict);
std::string revision_conflict(const std::map<std::string, std::string>& now, const std::vector<std::string>& stored_revisions,
                              const std::vector<std::string>& stored_dirty);

}  // namespace fanout
