#include "tests/test_util.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

#include "common/error.h"
#include "common/files.h"
#include "common/text.h"
#include "results/run_folder.h"

extern char** environ;

namespace fanout::test {

namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "fanout-test-XXXXXX").string();
  path = ::mkdtemp(tmpl.data());
}
std::string git(const fs::path& repo, std::vector<std::string> args) {
  args.insert(args.begin(), {"/usr/bin/git", "-C", repo.string(), "-c", "user.name=t", "-c", "user.email=t@example.org"});
  auto r = run_command(args, repo);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return trim(r.out);
}

std::map<fs::path, std::string> submitted_jobs(const fs::path& dir) {
  std::map<fs::path, std::string> jobs;
  std::error_code ec;
  for (auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (e.path().filename() != kRunMetadataFile) continue;
    try {
      const RunMetadata m = read_run_metadata(e.path().parent_path());
      if (!m.job_id.empty()) jobs[e.path().parent_path()] = m.job_id;
    } catch (const UserError&) {  // being written: not submitted yet
    }
  }
  return jobs;
}

std::set<std::string> submitted_job_ids(const fs::path& dir) {
  std::set<std::string> ids;
  for (auto& [folder, id] : submitted_jobs(dir)) ids.insert(id);
  return ids;
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!std::getenv("FANOUT_KEEP_TEST_DIRS")) fs::remove_all(path, ec);
}

CommandResult run_command(const std::vector<std::string>& argv, const fs::path& cwd,
                          const std::vector<std::pair<std::string, std::string>>& env, double timeout_s) {
  return run_process(argv, cwd, timeout_s, env);
}

bool wait_for(const std::function<bool()>& cond, double timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return cond();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

JobSpec trivial_job(const fs::path& dir, const std::string& name) {
  JobSpec j;
  j.name = name;
  j.run_dir = dir / name;
  fs::create_directories(j.run_dir);
  j.rank_exe = "/bin/true";
  j.plugin_path = "/nonexistent.so";
  j.steps = {StepSpec{"noop", 1, 1, 1, "disjoint", 0, 0, "", false, "", ""}};
  j.walltime_s = 60;
  return j;
}

std::vector<JobSpec> two_shapes_one_refused(const fs::path& dir, const std::string& missing_queue) {
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 6; ++i) {
    JobSpec j = trivial_job(dir / "two", "t" + std::to_string(i));
    j.options.hold = true;  // nothing runs: a test looks at what was submitted, then cancels it
    if (i % 2) j.options.partition = missing_queue;
    write_file_atomic(j.run_dir / "job.sh", "#!/bin/bash\nexit 0\n");
    jobs.push_back(std::move(j));
  }
  return jobs;
}

size_t files_named_from(const fs::path& dir, const std::string& prefix) {
  size_t n = 0;
  for (auto& e : fs::directory_iterator(dir)) n += e.path().filename().string().rfind(prefix, 0) == 0;
  return n;
}

std::set<std::string> arrays_of_accepted_runs(const std::vector<Scheduler::Submitted>& got, char sep, const std::string& words) {
  std::set<std::string> arrays;
  EXPECT_EQ(got.size(), 6u);
  for (size_t i = 0; i < got.size(); ++i) {
    if (i % 2 == 0) {
      EXPECT_FALSE(got[i].id.empty()) << "run " << i << " of the accepted shape has no id";
      EXPECT_FALSE(got[i].error);
      if (!got[i].id.empty()) arrays.insert(got[i].id.substr(0, got[i].id.find(sep)));
      continue;
    }
    EXPECT_TRUE(got[i].id.empty());
    EXPECT_FALSE(got[i].later) << "a refusal of what the job asks is not a full controller";
    if (!got[i].error) {
      ADD_FAILURE() << "run " << i << " of the refused shape has no reason";
      continue;
    }
    try {
      std::rethrow_exception(got[i].error);
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  }
  return arrays;
}

namespace {

// Drivers spawned by the running test. One still running when the test ends (an assertion failed before the test
// stopped it: a --hang_rank driver would run on forever) is interrupted as Ctrl-C does (its ranks cancelled), and
// killed if it has not ended 15 s later.
std::vector<pid_t>& spawned_drivers() {
  static std::vector<pid_t> pids;
  return pids;
}

class StopDriversAtTestEnd : public ::testing::EmptyTestEventListener {
  void OnTestEnd(const ::testing::TestInfo&) override {
    for (pid_t pid : spawned_drivers()) {
      int st = 0;
      if (waitpid(pid, &st, WNOHANG) != 0) continue;  // reaped by the test, or ended now
      kill(pid, SIGINT);
      if (!wait_for([&] { return waitpid(pid, &st, WNOHANG) == pid; }, 15)) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
      }
    }
    spawned_drivers().clear();
  }
};

const bool kStopDriversRegistered = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new StopDriversAtTestEnd);
  return true;
}();

}  // namespace

pid_t spawn_fanout(const fs::path& cwd, const std::vector<std::string>& args, const fs::path& err_file) {
  std::vector<std::string> argv = {fanout_exe().string()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargs;
  for (auto& a : argv) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
  posix_spawn_file_actions_addopen(&fa, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  if (posix_spawn(&pid, cargs[0], &fa, nullptr, cargs.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  if (pid > 0) spawned_drivers().push_back(pid);
  return pid;
}

bool wait_for_a_running_rank(const fs::path& dir, double timeout_s) {
  return wait_for([&] {
    std::error_code ec;
    for (auto& e : fs::recursive_directory_iterator(dir, ec))
      if (e.path().extension() == ".samples") return true;
    return false;
  }, timeout_s);
}

std::vector<std::string> processes_with(const std::string& needle) {
  std::vector<std::string> out;
  std::error_code ec;
  const std::string self = std::to_string(getpid());
  for (auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos || pid == self) continue;
    std::string cmd;
    try {
      cmd = read_file(e.path() / "cmdline");
    } catch (const std::exception&) {
      continue;  // gone meanwhile
    }
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find(needle) != std::string::npos) out.push_back(pid + ": " + cmd);
  }
  return out;
}

std::vector<std::string> processes_left(const std::string& needle, double timeout_s) {
  std::vector<std::string> still;
  wait_for([&] { return (still = processes_with(needle)).empty(); }, timeout_s);
  for (auto& p : still) ::kill(std::stoi(p.substr(0, p.find(':'))), SIGKILL);
  return still;
}

bool wait_for_slurm_job_end(const std::string& job_id, double timeout_s) {
  return wait_for([&] {
    auto q = run_command({"/usr/bin/squeue", "-h", "-j", job_id, "-t", "PENDING,RUNNING,COMPLETING"}, "/", {}, 20);
    return q.out.find_first_not_of(" \n") == std::string::npos;
  }, timeout_s);
}

CommandResult run_fanout(const fs::path& cwd, std::vector<std::string> args, double timeout_s) {
  args.insert(args.begin(), fanout_exe().string());
  return run_command(args, cwd, {}, timeout_s);
}

std::vector<std::string> headline_plots(const fs::path& cwd, const fs::path& exp_dir) {
  auto r = run_fanout(cwd, {"process_scaling_results", exp_dir.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string html = read_file(exp_dir / "processed" / "report.html");
  const size_t start = html.find("<h2 id=\"headline\">"), end = html.find("<h2 ", start + 1);
  if (start == std::string::npos) {
    ADD_FAILURE() << exp_dir << ": the report has no 'What was swept' section; process_scaling_results said:\n" << r.err;
    return {};
  }
  std::vector<std::string> titles;
  const std::string img = "<img class=\"plot\" alt=\"", src = "\" src=\"data:image/png;base64,";
  for (size_t p = html.find(img, start); p != std::string::npos && p < end; p = html.find(img, p + 1)) {
    const size_t a = p + img.size(), b = html.find(src, a);
    if (b == std::string::npos) break;
    titles.push_back(html.substr(a, b - a));
    EXPECT_NE(html.compare(b + src.size(), 10, "\"></figure"), 0) << titles.back() << ": an empty image";
  }
  return titles;
}

namespace {
// Every row of a query, or the error that stopped it ("" when it ran to the end).
std::string run_query(const fs::path& db_file, const std::string& sql, std::vector<std::vector<std::string>>& rows) {
  if (!fs::exists(db_file)) return db_file.string() + " does not exist";
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    std::string why = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return why;
  }
  sqlite3_busy_timeout(db, 10000);
  sqlite3_stmt* s = nullptr;
  std::string why;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) {
    why = sqlite3_errmsg(db);
  } else {
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      std::vector<std::string> row;
      for (int c = 0; c < sqlite3_column_count(s); ++c) {
        auto t = sqlite3_column_text(s, c);
        row.push_back(t ? reinterpret_cast<const char*>(t) : "");
      }
      rows.push_back(row);
    }
    if (rc != SQLITE_DONE) why = sqlite3_errmsg(db);
  }
  sqlite3_finalize(s);
  sqlite3_close(db);
  return why;
}
}  // namespace

std::vector<std::vector<std::string>> sql_rows(const fs::path& db_file, const std::string& sql) {
  std::vector<std::vector<std::string>> rows;
  // A query that fails fails the test: an assertion on an empty result must never pass because of an error.
  if (std::string why = run_query(db_file, sql, rows); !why.empty()) ADD_FAILURE() << "SQL failed on " << db_file << ": " << why << "\n  " << sql;
  return rows;
}

std::vector<std::vector<std::string>> sql_rows_while_polling(const fs::path& db_file, const std::string& sql) {
  std::vector<std::vector<std::string>> rows;
  if (!run_query(db_file, sql, rows).empty()) rows.clear();
  return rows;
}

std::string sql_one(const fs::path& db_file, const std::string& sql) {
  auto rows = sql_rows(db_file, sql);
  return rows.empty() || rows[0].empty() ? "<none>" : rows[0][0];
}

int connect_and_send(int port, const std::string& bytes) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) ADD_FAILURE() << "connect to port " << port << ": " << std::strerror(errno);
  if (!bytes.empty() && ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) != ssize_t(bytes.size()))
    ADD_FAILURE() << "send to port " << port << ": " << std::strerror(errno);
  return fd;
}

namespace {
int free_port(int type) {
  int fd = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    ADD_FAILURE() << "no free port: " << std::strerror(errno);
  ::close(fd);
  return ntohs(a.sin_port);
}
}  // namespace

int free_tcp_port() { return free_port(SOCK_STREAM); }
int free_udp_port() { return free_port(SOCK_DGRAM); }

int exit_status(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : WIFSIGNALED(wait_status) ? 128 + WTERMSIG(wait_status) : -1;
}

fs::path build_dir() { return FANOUT_BUILD_DIR; }
fs::path fanout_exe() { return build_dir() / "fanout"; }
fs::path broken_plugin(int kind) { return fs::path(FANOUT_BROKEN_DIR) / ("fanout_broken_" + std::to_string(kind) + ".so"); }

std::string line_count_summary(const std::string& s) {
  int n = 0;
  bool any = false;
  for (char c : s) {
    if (c == '\n') {
      if (any) ++n;
      any = false;
    } else {
      any = true;
    }
  }
  if (any) ++n;
  return std::to_string(n);
}

}  // namespace fanout::test
