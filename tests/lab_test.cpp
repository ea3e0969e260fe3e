// A lab store (issue 55 item 2): experiments recorded by `fanout history add` (or a sweep's --lab) in an SQLite file
// or a real PostgreSQL server, and `fanout history changes --lab` over them. The same tests run against both: the
// server is Debian's PostgreSQL, a cluster in this test's folder, run as nobody (PostgreSQL refuses root) and reached
// through its unix socket.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <glob.h>

#include <fstream>
#include <random>
#include <thread>

#include "common/files.h"
#include "common/text.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using namespace fanout;

namespace {

// A PostgreSQL cluster of the test's own: initdb and pg_ctl as nobody, trust on its socket only (no TCP).
class PostgresServer {
 public:
  explicit PostgresServer(const fs::path& dir) : dir_(dir) {
    glob_t g{};
    if (::glob("/usr/lib/postgresql/*/bin/pg_ctl", 0, nullptr, &g) == 0 && g.gl_pathc > 0) bin_ = fs::path(g.gl_pathv[g.gl_pathc - 1]).parent_path();
    ::globfree(&g);
    if (bin_.empty()) return;
    fs::create_directories(dir_ / "sock");
    ::chmod(dir_.parent_path().c_str(), 0755);  // the test's own folder (mkdtemp made it 0700): nobody must reach its server's
    test::run_command({"/bin/chown", "-R", "nobody:nogroup", dir_.string()}, "/");
    auto as_nobody = [&](std::vector<std::string> argv) {
      argv.insert(argv.begin(), {"/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"});
      return test::run_command(argv, "/", {{"HOME", dir_.string()}}, 120);
    };
    auto init = as_nobody({(bin_ / "initdb").string(), "-D", (dir_ / "data").string(), "-A", "trust", "-U", "fanout", "--no-sync"});
    if (init.exit_code != 0) {
      error_ = "initdb: " + init.out + init.err;
      return;
    }
    // -w: pg_ctl returns once the server accepts connections (a readiness check, not a wait of our own).
    auto start = as_nobody({(bin_ / "pg_ctl").string(), "-D", (dir_ / "data").string(), "-l", (dir_ / "log").string(), "-w", "-t", "60", "-o",
                            "-k " + (dir_ / "sock").string() + " -c listen_addresses= -F", "start"});
    if (start.exit_code != 0) {
      error_ = "pg_ctl start: " + start.out + start.err + read_file_or(dir_ / "log");
      return;
    }
    started_ = true;
    // With a password (trust ignores it): no message, record or page may show it.
    uri_ = "postgresql://fanout:secret@/postgres?host=" + (dir_ / "sock").string();
  }
  ~PostgresServer() {
    if (started_)
      test::run_command({"/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", (bin_ / "pg_ctl").string(), "-D",
                         (dir_ / "data").string(), "-m", "immediate", "-w", "stop"},
                        "/", {}, 60);
  }
  const std::string& uri() const { return uri_; }
  std::string error() const { return bin_.empty() ? "no PostgreSQL server installed (scripts/install-deps.sh test installs it)" : error_; }
  std::string psql(const std::string& sql) const {
    auto r = test::run_command({(bin_ / "psql").string(), "-X", "-A", "-t", "-h", (dir_ / "sock").string(), "-U", "fanout", "-d", "postgres", "-c", sql}, "/");
    return trim(r.out);
  }

 private:
  static std::string read_file_or(const fs::path& p) { return fs::exists(p) ? read_file(p) : ""; }
  fs::path dir_, bin_;
  std::string uri_, error_;
  bool started_ = false;
};

class Lab : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "postgresql") {
      pg_ = std::make_unique<PostgresServer>(d.path / "pg");
      ASSERT_FALSE(pg_->uri().empty()) << pg_->error();
      lab_ = pg_->uri();
    } else {
      lab_ = (d.path / "lab.sqlite").string();
    }
  }
  test::CommandResult fanout(std::vector<std::string> args) { return test::run_fanout(d.path, args, 300); }
  // The night's experiment: a program printing `level` (+-0.3 in a fixed pattern), three runs, recorded at revision v<i>.
  void night(int i, double level, std::vector<std::string> extra = {}) {
    // The program is the same every night (its command is part of the figure's identity); what it prints changes.
    char value[32];
    std::snprintf(value, sizeof value, "%.1f\n", level + 0.3 * (i % 3 - 1));
    write_file_atomic(d.path / "level.txt", value);
    std::vector<std::string> args = {"exec", "--exp_name=nightly", "--results_dir=night" + std::to_string(i), "--revision=v" + std::to_string(i),
                                     "--command=/bin/cat " + (d.path / "level.txt").string(), "--parse", "regex:(?<value>\\S+)", "--metric=t", "--unit=ms",
                                     "--repeat=5", "--resources=off"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = fanout(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  std::string dir(int i) { return "night" + std::to_string(i) + "/nightly"; }
  test::TempDir d;
  std::unique_ptr<PostgresServer> pg_;
  std::string lab_;
};

// 20 nights, the figure 100 then 110 ms from v11: recorded in the lab, `history changes --lab` says what it says
// of the folders themselves, byte for byte (the store keeps every median exactly), and exit 1. Added again: the same
// 20 points. Five more nights, each adding itself (--lab on the sweep), back at 100: an improvement, exit 0.
TEST_P(Lab, TheLabsSeriesIsTheFoldersSeries) {
  std::vector<std::string> dirs;
  for (int i = 1; i <= 20; ++i) {
    night(i, i >= 11 ? 110 : 100);
    dirs.push_back(dir(i));
  }
  std::vector<std::string> add = {"history", "add", "--lab=" + lab_};
  add.insert(add.end(), dirs.begin(), dirs.end());
  auto a = fanout(add);
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  EXPECT_NE(a.out.find("-> benchmark nightly, revision v11, 1 figure(s)"), std::string::npos) << a.out;
  std::vector<std::string> folders = {"history", "changes"};
  folders.insert(folders.end(), dirs.begin(), dirs.end());
  auto from_folders = fanout(folders);
  auto from_lab = fanout({"history", "changes", "--lab=" + lab_});
  EXPECT_EQ(from_lab.exit_code, 1) << from_lab.out << from_lab.err;
  EXPECT_EQ(from_lab.out, "benchmark nightly: " + from_folders.out);
  EXPECT_NE(from_lab.out.find("t (run): 100 -> 110 ms (+10.0 %) from v10 to v11"), std::string::npos) << from_lab.out;
  // Its size with its interval (the points before against those after), and the two neighbours alone as compare
  // judges them (5 runs a side, each night's runs print the same figure: p = 2/252).
  EXPECT_NE(from_lab.out.find("; size +10.0 % [+9.7 %, +10.3 %]; v10 vs v11 alone: regression (p=0.00794, agrees)"), std::string::npos) << from_lab.out;
  ASSERT_EQ(fanout(add).exit_code, 0) << "added again";
  EXPECT_EQ(fanout({"history", "changes", "--lab=" + lab_}).out, from_lab.out) << "the same 20 points, not 40";
  for (int i = 21; i <= 25; ++i) night(i, 100, {"--lab=" + lab_});
  const std::string recorded = test::sql_one(d.path / dir(21) / "fanout.sqlite", "SELECT group_concat(value, ' ') FROM provenance WHERE key = 'command_line'");
  EXPECT_NE(recorded.find("--lab="), std::string::npos) << recorded;
  EXPECT_EQ(recorded.find("secret"), std::string::npos) << "a run's record keeps no password: " << recorded;
  auto csv = fanout({"history", "changes", "--lab=" + lab_, "--benchmark=nightly", "--format=csv"});
  EXPECT_EQ(csv.exit_code, 0) << csv.out << csv.err;
  EXPECT_NE(csv.out.find(",improvement,v20,v21,"), std::string::npos) << csv.out;
  EXPECT_NE(csv.out.find(",regression,v10,v11,"), std::string::npos) << csv.out;
  auto site = fanout({"history", "report", "--lab=" + lab_, "--benchmark=nightly", "--out=site"});
  EXPECT_EQ(site.exit_code, 0) << site.err;
  EXPECT_NE(read_file(d.path / "site" / "index.html").find("<td class=\"l\">v10</td><td class=\"l\">v11</td>"), std::string::npos);
  // The lab's dashboard: an index of every benchmark's changes, newest first, each linked to its benchmark's page and
  // figure; a page per benchmark. Both load in headless Chromium with every plot decoded and no console message.
  auto all = fanout({"history", "report", "--lab=" + lab_, "--out=labsite"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  const std::string index = read_file(d.path / "labsite" / "index.html");
  const size_t improvement = index.find("<td class=\"l\">improvement</td>"), regression = index.find("<td class=\"l\">regression</td>");
  ASSERT_NE(regression, std::string::npos) << index;
  EXPECT_LT(improvement, regression) << "newest first";
  EXPECT_NE(index.find("<a href=\"b0/index.html\">nightly</a>"), std::string::npos) << index;
  EXPECT_NE(index.find("<a href=\"b0/index.html#figure-0\">t (run)</a>"), std::string::npos) << index;
  EXPECT_EQ(index.find("secret"), std::string::npos);
  for (const std::string page : {"index.html", "b0/index.html"}) {
    auto shown = test::run_command({"/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                                    "--disable-component-update", "--disable-sync", "--enable-logging=stderr", "--v=0",
                                    "--user-data-dir=" + (d.path / "chromium").string(), "--virtual-time-budget=10000", "--dump-dom",
                                    "file://" + (d.path / "labsite" / page).string()},
                                   d.path, {}, 120);
    EXPECT_EQ(shown.err.find(":CONSOLE("), std::string::npos) << page << ": " << shown.err;
    if (page != "index.html") {
      EXPECT_NE(shown.out.find("data-plots-rendered=\"1\""), std::string::npos) << shown.out.substr(0, 2000);
    }
  }
}

// Two drivers adding at the same moment (10 experiments each, in one transaction each) lose nothing.
TEST_P(Lab, TwoDriversAddingAtOnceLoseNothing) {
  std::vector<std::string> first = {"history", "add", "--lab=" + lab_}, second = first;
  for (int i = 1; i <= 20; ++i) {
    night(i, 100);
    (i <= 10 ? first : second).push_back(dir(i));
  }
  test::CommandResult a, b;
  std::thread t1([&] { a = fanout(first); }), t2([&] { b = fanout(second); });
  t1.join(), t2.join();
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  auto h = fanout({"history", "changes", "--lab=" + lab_});
  EXPECT_EQ(h.exit_code, 0) << h.err;
  EXPECT_NE(h.out.find("benchmark nightly: 20 point(s)"), std::string::npos) << h.out;
}

// Bad input, each one clear error, exit 2, nothing changed: a store that is not a Fanout lab, one of a newer schema,
// a benchmark it does not have, a folder that is not an experiment (nothing of the other folders added either).
TEST_P(Lab, WhatIsNotALabIsRefusedAndNothingChanges) {
  for (int i = 1; i <= 4; ++i) night(i, 100);
  ASSERT_EQ(fanout({"history", "add", "--lab=" + lab_, dir(1), dir(2), dir(3)}).exit_code, 0);
  auto unknown = fanout({"history", "changes", "--lab=" + lab_, "--benchmark=weekly"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("has no benchmark 'weekly' (it has: nightly)"), std::string::npos) << unknown.err;
  auto half = fanout({"history", "add", "--lab=" + lab_, dir(4), "night2"});
  EXPECT_EQ(half.exit_code, 2);
  EXPECT_NE(half.err.find("night2 is not an experiment folder"), std::string::npos) << half.err;
  if (pg_) pg_->psql("UPDATE lab_meta SET value = '99' WHERE key = 'schema'");
  else test::run_command({"/usr/bin/sqlite3", lab_, "UPDATE lab_meta SET value = '99' WHERE key = 'schema'"}, "/");
  auto newer = fanout({"history", "add", "--lab=" + lab_, dir(4)});
  EXPECT_EQ(newer.exit_code, 2);
  EXPECT_NE(newer.err.find("is a lab store of schema 99, newer than this fanout's (1): use a newer fanout; nothing was changed"), std::string::npos) << newer.err;
  auto count = [&] {
    const std::string sql = "SELECT count(*) FROM lab_experiments";
    return pg_ ? pg_->psql(sql) : trim(test::run_command({"/usr/bin/sqlite3", lab_, sql}, "/").out);
  };
  EXPECT_EQ(count(), "3") << "neither night4 (with a folder that is not an experiment, nor into a newer store) was added";
  // Someone else's database: refused, not written to.
  if (pg_) {
    pg_->psql("DROP TABLE lab_figures; DROP TABLE lab_experiments; DROP TABLE lab_meta; CREATE TABLE accounts(id int)");
  } else {
    fs::remove(lab_);
    test::run_command({"/usr/bin/sqlite3", lab_, "CREATE TABLE accounts(id int)"}, "/");
  }
  auto foreign = fanout({"history", "add", "--lab=" + lab_, dir(1)});
  EXPECT_EQ(foreign.exit_code, 2);
  EXPECT_NE(foreign.err.find("is not a Fanout lab store (it holds accounts and no lab_meta)"), std::string::npos) << foreign.err;
  if (!pg_) {
    write_file_atomic(d.path / "notes.txt", std::string(4096, 'x'));
    auto text = fanout({"history", "add", "--lab=notes.txt", dir(1)});
    EXPECT_EQ(text.exit_code, 2);
    EXPECT_NE(text.err.find("notes.txt is not a Fanout lab store (not an SQLite database"), std::string::npos) << text.err;
    EXPECT_EQ(read_file(d.path / "notes.txt"), std::string(4096, 'x'));
    auto none = fanout({"history", "changes", "--lab=nowhere.sqlite"});
    EXPECT_EQ(none.exit_code, 2);
    EXPECT_NE(none.err.find("no lab store at nowhere.sqlite yet"), std::string::npos) << none.err;
    EXPECT_FALSE(fs::exists(d.path / "nowhere.sqlite"));
  } else {
    auto unreachable = fanout({"history", "add", "--lab=postgresql://fanout:secret@/postgres?host=/nonexistent", dir(1)});
    EXPECT_EQ(unreachable.exit_code, 2);
    EXPECT_NE(unreachable.err.find("cannot connect to PostgreSQL"), std::string::npos) << unreachable.err;
    EXPECT_EQ(unreachable.err.find("secret"), std::string::npos) << "no password in a message: " << unreachable.err;
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, Lab, ::testing::Values("sqlite", "postgresql"));

}  // namespace

namespace {

// Issue 55's test: a repository the test makes, 40 commits whose program prints 100, +10 % from commit 17 and -5 %
// from commit 31 (noise +-0.5 % from a fixed seed); the experiment file builds it ([build]: the "program" is
// built.txt, copied from level.txt, so a revision that was not built would print the last one's figure). Bisect
// between 1 and 40 names 17, in at most 7 builds; the tree is back on its branch after. Every commit measured and
// added to a lab: change points at exactly 17 and 31. Then: a revision that does not build stops bisect, naming
// the revision; a dirty tree and a revision that does not exist are refused.
TEST(Bisect, FortyCommitsTheirChangePointsAndTheFirstSlowerNamedInSevenBuilds) {
  test::TempDir d;
  const fs::path code = d.path / "code";
  fs::create_directories(code);
  auto git = [&](std::vector<std::string> args) { return test::git(code, std::move(args)); };
  git({"init", "-q", "-b", "main"});
  auto commit = [&](int i, const std::string& level) {
    write_file_atomic(code / "level.txt", level + "\n");
    git({"add", "level.txt"});
    git({"commit", "-q", "-m", "v" + std::to_string(i)});
    git({"tag", "v" + std::to_string(i)});
  };
  std::mt19937_64 rng(40);  // the noise: a fixed seed, +-0.5 % at most
  std::uniform_real_distribution<double> noise(-0.005, 0.005);
  for (int i = 1; i <= 40; ++i) {
    const double level = (i < 17 ? 100 : i < 31 ? 110 : 104.5) * (1 + noise(rng));
    char text[32];
    std::snprintf(text, sizeof text, "%.3f", level);
    commit(i, text);
  }
  write_file_atomic(d.path / "mm.toml",
                    "[experiment]\nplugin = \"exec\"\nname = \"mm\"\n"
                    "[build]\nsource = \"code\"\ncommand = [\"/bin/sh\", \"-c\", \"test ! -e broken && cp level.txt built.txt\"]\n"
                    "[[steps]]\ncommand = \"/bin/cat " + (code / "built.txt").string() + "\"\n"
                    "[[steps.parse]]\nkind = \"regex\"\npattern = '(?<value>\\S+)'\nmetric = \"t\"\nunit = \"ms\"\n");
  auto r = test::run_fanout(d.path, {"history", "bisect", "mm.toml", "--good=v1", "--bad=v40", "--source=code", "--repeat=5", "--threshold=2",
                                     "--metric=t", "--out=bis"}, 600);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string v17 = git({"rev-parse", "v17"});
  EXPECT_NE(r.out.find("bisect: first bad revision " + v17 + " (v17)"), std::string::npos) << r.out;
  const size_t builds_at = r.out.find(" build(s)");
  ASSERT_NE(builds_at, std::string::npos) << r.out;
  const int builds = std::atoi(r.out.c_str() + r.out.rfind(' ', builds_at - 1) + 1);
  EXPECT_LE(builds, 7) << r.out;
  EXPECT_GE(builds, 6) << "the good one and ceil(log2 39) = 6 halvings: " << r.out;
  EXPECT_EQ(git({"symbolic-ref", "--short", "HEAD"}), "main") << "the tree is back where it was";
  EXPECT_TRUE(fs::exists(d.path / "bis" / git({"rev-parse", "v1"}).substr(0, 10) / "build.log"));

  // Every commit measured as a nightly job would (checked out, built by [build], run, added to a lab): the change
  // points are exactly at commits 17 (+10 %) and 31 (-5 %), and nowhere else.
  for (int i = 1; i <= 40; ++i) {
    git({"-c", "advice.detachedHead=false", "checkout", "-q", "v" + std::to_string(i)});
    auto night = test::run_fanout(d.path, {"run", "mm.toml", "--results_dir=night" + std::to_string(i), "--revision=v" + std::to_string(i),
                                           "--repeat=3", "--resources=off", "--lab=lab.sqlite"});
    ASSERT_EQ(night.exit_code, 0) << night.err;
  }
  git({"checkout", "-q", "main"});
  auto changes = test::run_fanout(d.path, {"history", "changes", "--lab=lab.sqlite", "--threshold=2"});
  EXPECT_NE(changes.out.find("from v16 to v17"), std::string::npos) << changes.out;
  EXPECT_NE(changes.out.find("from v30 to v31"), std::string::npos) << changes.out;
  EXPECT_NE(changes.out.find("2 change point(s) in 1 figure(s)"), std::string::npos) << changes.out;
  EXPECT_EQ(changes.exit_code, 0) << "the newest commits come after the last change, 31's, an improvement: " << changes.out;

  // A revision that does not build (the good one here, which is built first): stopped, named, exit 2, tree back.
  write_file_atomic(code / "broken", "");
  git({"add", "broken"});
  git({"commit", "-q", "-m", "v41 breaks the build"});
  git({"tag", "v41"});
  commit(42, "100");
  auto broken = test::run_fanout(d.path, {"history", "bisect", "mm.toml", "--good=v41", "--bad=v42", "--source=code", "--out=bis2"}, 600);
  EXPECT_EQ(broken.exit_code, 2) << broken.out;
  EXPECT_NE(broken.err.find("(v41 breaks the build) does not build: bisect stops here"), std::string::npos) << broken.err;
  EXPECT_EQ(git({"symbolic-ref", "--short", "HEAD"}), "main");
  write_file_atomic(d.path / "nobuild.toml", "[experiment]\nplugin = \"exec\"\n[[steps]]\ncommand = \"/bin/cat " + (code / "built.txt").string() + "\"\n");
  auto unbuilt = test::run_fanout(d.path, {"history", "bisect", "nobuild.toml", "--good=v1", "--bad=v40", "--source=code"});
  EXPECT_EQ(unbuilt.exit_code, 2);
  EXPECT_NE(unbuilt.err.find("has no [build]: each revision must be built before it runs"), std::string::npos) << unbuilt.err;
  auto missing = test::run_fanout(d.path, {"history", "bisect", "mm.toml", "--good=v99", "--bad=v40", "--source=code"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--good: no revision 'v99' in"), std::string::npos) << missing.err;
  write_file_atomic(code / "level.txt", "1\n");
  auto dirty = test::run_fanout(d.path, {"history", "bisect", "mm.toml", "--good=v1", "--bad=v40", "--source=code"});
  EXPECT_EQ(dirty.exit_code, 2);
  EXPECT_NE(dirty.err.find("the working tree has changes to tracked files"), std::string::npos) << dirty.err;
  EXPECT_EQ(read_file(code / "level.txt"), "1\n") << "left as it was";
}

}  // namespace
