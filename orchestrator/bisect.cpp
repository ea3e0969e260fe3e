#include "orchestrator/bisect.h"

#include <cmath>
#include <csignal>
#include <cstdio>

#include "common/clock.h"
#include "common/error.h"
#include "common/subprocess.h"
#include "common/text.h"
#include "orchestrator/experiment.h"
#include "orchestrator/progress.h"
#include "orchestrator/revision.h"

namespace fanout {

namespace fs = std::filesystem;

namespace {

// Ctrl-C (or SIGTERM) reaches the child run first (the terminal's process group); bisect notes it and stops after
// that child has ended, so the tree is put back (Restore) rather than left on a revision in the middle.
volatile std::sig_atomic_t g_interrupted = 0;
void on_signal(int) { g_interrupted = 1; }
bool interrupted() { return g_interrupted != 0; }

std::string git_out(const fs::path& dir, std::vector<std::string> args, const std::string& what) {
  const ProcessResult r = git_in(dir, std::move(args), 600);
  if (r.exit_code != 0) throw UserError(what + ": " + printable(trim(r.err.empty() ? r.out : r.err)));
  return trim(r.out);
}

// Puts the working tree back on the branch (or commit) it was on, however bisect ends.
struct Restore {
  fs::path dir;
  std::string where;
  ~Restore() { git_in(dir, {"-c", "advice.detachedHead=false", "checkout", "-q", where}, 600); }
};

struct Measured {
  std::string rev, short_rev, subject, dir;
};

}  // namespace

int history_bisect(const BisectOptions& o, const fs::path& fanout_exe, std::ostream& out) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, on_signal);
  const fs::path src = o.source;
  if (!fs::is_directory(src)) throw UserError("--source: '" + printable(src.string()) + "' is no folder");
  if (!fs::is_regular_file(o.file)) throw UserError("bisect: no experiment file '" + printable(o.file.string()) + "'");
  auto resolve = [&](const std::string& flag, const std::string& rev) {
    return git_out(src, {"rev-parse", "--verify", "--quiet", rev + "^{commit}"}, flag + ": no revision '" + printable(rev) + "' in " + src.string());
  };
  // What is built must be what is checked out: the file's [build] source and --source are one folder.
  const ExperimentRequest req = parse_experiment_file(o.file);
  // Without a build each revision would run whatever program is already there: every one would look good.
  if (req.build.argv.empty())
    throw UserError("bisect: " + o.file.string() + " has no [build]: each revision must be built before it runs (docs/exec.md)");
  std::error_code ec;
  if (!fs::equivalent(req.build.source, src, ec))
    throw UserError("bisect: " + o.file.string() + "'s [build] builds " + req.build.source + " but --source is " + src.string() +
                    ": revisions are checked out in --source, so that must be the folder built");
  const std::string good = resolve("--good", o.good), bad = resolve("--bad", o.bad);
  if (!git_out(src, {"status", "--porcelain", "--untracked-files=no"}, "--source " + src.string() + ": git status").empty())
    throw UserError("--source " + src.string() + ": the working tree has changes to tracked files; bisect checks revisions out there: commit or stash them first");
  std::vector<std::string> candidates;  // after good, up to bad, oldest first
  for (auto& line : split(git_out(src, {"rev-list", "--reverse", "--ancestry-path", good + ".." + bad}, "git rev-list"), '\n'))
    if (!trim(line).empty()) candidates.push_back(trim(line));
  if (candidates.empty() || candidates.back() != bad)
    throw UserError("--bad " + o.bad + " does not come after --good " + o.good + " in " + src.string() + "'s history");
  // Where the tree is, to put it back: its branch, or its commit when HEAD is detached (a CI checkout).
  const ProcessResult branch = git_in(src, {"symbolic-ref", "-q", "--short", "HEAD"});
  const std::string here = branch.exit_code == 0 && !trim(branch.out).empty() ? trim(branch.out) : git_out(src, {"rev-parse", "HEAD"}, "git rev-parse");
  const fs::path root = fs::absolute(o.out.empty() ? fs::path("bisect-" + good.substr(0, 8) + "-" + bad.substr(0, 8)) : o.out);
  Restore restore{src, here};

  int builds = 0, runs = 0;
  const int64_t t0 = monotonic_ns();
  // Builds and runs the experiment at one revision (its own experiment folder under root).
  auto measure = [&](const std::string& rev) {
    Measured m;
    m.rev = rev, m.short_rev = rev.substr(0, 10);
    m.subject = git_out(src, {"log", "-1", "--format=%s", rev}, "git log");
    const ProcessResult co = git_in(src, {"-c", "advice.detachedHead=false", "checkout", "-q", "--detach", rev}, 600);
    if (co.exit_code != 0) throw UserError("git checkout " + m.short_rev + " failed: " + printable(trim(co.err)));
    ++builds;
    m.dir = (root / m.short_rev).string();
    const ProcessResult r = run_process({fanout_exe.string(), "run", fs::absolute(o.file).string(), "--exp_name=" + m.short_rev,
                                         "--results_dir=" + root.string(), "--source=" + fs::absolute(src).string(), "--repeat=" + std::to_string(o.repeat)},
                                        {}, 24 * 3600.0);
    if (interrupted()) throw UserError("interrupted at " + m.short_rev + ": bisect stops; the tree is put back");
    if (r.exit_code != 0) {
      const std::string why = trim(r.err);
      throw UserError("revision " + m.short_rev + " (" + printable(m.subject) + ") " +
                      (why.find("[build] failed") != std::string::npos ? "does not build" : "did not run to its end") +
                      ": bisect stops here; " + printable(why.size() > 800 ? "..." + why.substr(why.size() - 800) : why));
    }
    runs += o.repeat;
    return m;
  };
  auto verdict = [&](const Measured& base, const Measured& m) {
    std::vector<std::string> args = {fanout_exe.string(), "results", "compare", base.dir, m.dir, "--threshold=" + std::to_string(o.threshold_pct)};
    for (auto& metric : o.metrics) args.push_back("--metric=" + metric);
    return run_process(args, {}, 3600);
  };

  out << "bisect: " << candidates.size() << " revision(s) after good " << good.substr(0, 10) << " up to bad " << bad.substr(0, 10)
      << "; the good one first, then at most " << (candidates.size() > 1 ? int(std::ceil(std::log2(double(candidates.size())))) : 0)
      << " more, " << o.repeat << " runs each\n";
  const Measured base = measure(good);
  out << "  " << base.short_rev << " good (given; the baseline): " << base.subject << "\n" << std::flush;
  long lo = -1, hi = long(candidates.size()) - 1;  // candidates[hi] is bad; everything up to lo is good
  while (hi - lo > 1) {
    const long mid = lo + (hi - lo) / 2;
    const Measured m = measure(candidates[size_t(mid)]);
    const ProcessResult c = verdict(base, m);
    if (interrupted()) throw UserError("interrupted at " + m.short_rev + ": bisect stops; the tree is put back");
    if (c.exit_code == 3 || c.exit_code == 2) {
      out << "  " << m.short_rev << " " << (c.exit_code == 3 ? "undecided" : "not comparable") << ": " << m.subject << "\n" << c.out << c.err;
      out << "bisect: stopped at " << m.short_rev << ": " << (c.exit_code == 3 ? "the gate cannot tell it from the good one with " + std::to_string(o.repeat) +
                                                                                  " runs a side (give more: --repeat)"
                                                                            : "compare refused it (above)")
          << "; first bad is between " << (lo < 0 ? base.short_rev : candidates[size_t(lo)].substr(0, 10)) << " and "
          << candidates[size_t(hi)].substr(0, 10) << "\n";
      return c.exit_code == 3 ? 3 : 2;
    }
    if (c.exit_code != 0 && c.exit_code != 1) {  // compare could not start, was killed or timed out: no verdict
      throw UserError("results compare of " + m.short_rev + " against the good revision ended with status " + std::to_string(c.exit_code) +
                      " and no verdict: bisect stops here; " + printable(trim(c.err)));
    }
    const bool is_bad = c.exit_code == 1;
    std::string line;
    for (auto& l : split(c.out, '\n'))
      if (starts_with(trim(l), "regression") || starts_with(trim(l), "improvement") || starts_with(trim(l), "unchanged")) {
        line = trim(l);
        break;
      }
    out << "  " << m.short_rev << " " << (is_bad ? "bad" : "good") << ": " << m.subject << (line.empty() ? "" : "  [" + line + "]") << "\n" << std::flush;
    (is_bad ? hi : lo) = mid;
  }
  const std::string first = candidates[size_t(hi)];
  out << "bisect: first bad revision " << first << " (" << printable(git_out(src, {"log", "-1", "--format=%s", first}, "git log")) << ")"
      << (size_t(hi) + 1 == candidates.size() ? ", the --bad revision itself (taken as given, as git bisect does; not measured)" : "")
      << "; " << builds << " build(s), " << runs << " run(s), " << format_duration(double(monotonic_ns() - t0) / 1e9) << "; results in "
      << root.string() << "\n";
  return 0;
}

}  // namespace fanout
