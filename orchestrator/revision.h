// What code a sweep measured: the revision of the code under test, stored with every run (issue 55). Fanout's own
// revision is in the provenance already (fanout_git_revision); this is the user's.
#pragma once

#include <map>
#include <string>

namespace fanout {

// --revision=REV (a commit, a tag, a version: any text) and --source=DIR (a git working tree: its HEAD commit,
// whether tracked files differ from it, and the commit's time). Provenance keys: revision (REV, else the commit),
// source_dir, source_commit, source_dirty (true/false), source_commit_time (ISO 8601). Empty when neither is given.
// Throws UserError naming --source when DIR is not a git working tree (or git is missing).
std::map<std::string, std::string> revision_provenance(const std::string& revision, const std::string& source);

}  // namespace fanout
