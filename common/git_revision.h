// The git revision fanout was built from ("<12 hex digits>", "-dirty" appended when tracked files differed from it;
// "unknown" outside a git checkout): every run's provenance (fanout_git_revision) and --version. Made at each build
// (cmake/git_revision.cmake), so a build after a commit names that commit.
#pragma once

namespace fanout {

const char* git_revision();

}  // namespace fanout
