#include "orchestrator/revision.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "common/error.h"
#include "common/subprocess.h"
#include "common/text.h"
#include "orchestrator/experiment.h"

namespace fanout {

namespace fs = std::filesystem;

ProcessResult git_in(const fs::path& dir, std::vector<std::string> args, double timeout_s) {
  args.insert(args.begin(), {"/usr/bin/env", "-u", "GIT_DIR", "-u", "GIT_WORK_TREE", "-u", "GIT_INDEX_FILE", "-u", "GIT_OBJECT_DIRECTORY",
                             "-u", "GIT_COMMON_DIR", "-u", "GIT_CEILING_DIRECTORIES", "git", "--no-optional-locks", "-c", "core.fsmonitor=false",
                             "-C", dir.string()});
  return run_process(args, {}, timeout_s);
}

namespace {

// One git query in the working tree (git_in); its output without the trailing newline.
std::string git(const fs::path& dir, std::vector<std::string> args, const std::string& what) {
  const ProcessResult r = git_in(dir, std::move(args));
  if (r.exit_code == -1 || r.exit_code == 127) throw UserError("--source " + dir.string() + ": git could not be started (is it installed?)");
  if (r.exit_code != 0)
    throw UserError("--source " + dir.string() + ": " + what + " failed (is it a git working tree with a commit?): " + printable(trim(r.err)));
  return trim(r.out);
}

}  // namespace

std::string revision_refusal(const ExperimentSettings& settings, const fs::path& exp_dir, const std::string& conflict) {
  return std::string(settings.source.empty() ? "--revision" : "--source " + settings.source) + ": " + exp_dir.string() + ": " + conflict +
         ": a new revision is a new experiment (another --exp_name), or measure the same code again (compare --until-decided on two "
         "revisions: give each side its own working tree)";
}

std::string revision_conflict(const std::map<std::string, std::string>& now, const std::vector<std::string>& stored_revisions,
                              const std::vector<std::string>& stored_dirty) {
  const auto rev = now.find("revision");
  if (rev == now.end() || stored_revisions.empty()) return "";
  if (!std::count(stored_revisions.begin(), stored_revisions.end(), rev->second))
    return "its runs measured revision " + stored_revisions.front() + ", this one is " + rev->second;
  const auto dirty = now.find("source_dirty");
  if (dirty != now.end() && !stored_dirty.empty() && (stored_dirty.size() > 1 || stored_dirty.front() != dirty->second))
    return "its runs measured revision " + rev->second + (stored_dirty.front() == "true" ? " with" : " without") +
           " changes to tracked files, this tree has " + (dirty->second == "true" ? "some" : "none");
  return "";
}

std::map<std::string, std::string> revision_provenance(const std::string& revision, const std::string& source) {
  std::map<std::string, std::string> out;
  if (!trim(revision).empty()) out["revision"] = trim(revision);
  if (trim(source).empty()) return out;
  std::error_code ec;
  const fs::path dir = fs::absolute(trim(source), ec).lexically_normal();
  if (ec || !fs::is_directory(dir)) throw UserError("--source " + source + ": no such folder");
  const std::string commit = git(dir, {"rev-parse", "--verify", "HEAD^{commit}"}, "git rev-parse HEAD");
  // Tracked files that differ from the commit (staged or not); untracked files are not the code under test.
  const std::string changes = git(dir, {"status", "--porcelain", "--untracked-files=no"}, "git status");
  out["source_dir"] = dir.string();
  out["source_commit"] = commit;
  out["source_dirty"] = changes.empty() ? "false" : "true";
  out["source_commit_time"] = git(dir, {"log", "-1", "--format=%cI", commit}, "git log");
  if (!out.count("revision")) out["revision"] = commit;
  return out;
}

}  // namespace fanout
