// The local scheduler against real processes. The "rank executable" here is a shell script written by the
// test, so the launcher is exercised on its own, without plugins.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include "common/error.h"
#include "common/files.h"
#include "common/new_processes.h"
#include "common/spawn.h"
#include "common/subprocess.h"
#include "common/text.h"
#include "rendezvous/kv_service.h"
#include "schedulers/local.h"
#include "rendezvous/rendezvous.h"
#include "tests/expect_throw.h"
#include "tests/test_util.h"

using namespace fanout;

namespace {

std::filesystem::path script(const test::TempDir& d, const std::string& body) {
  auto p = d.path / "rank.sh";
  std::ofstream(p) << "#!/bin/sh\n" << body << "\n";
  ::chmod(p.c_str(), 0755);
  return p;
}

JobSpec job(const test::TempDir& d, const std::filesystem::path& exe, std::vector<StepSpec> steps, int64_t walltime = 60) {
  JobSpec j;
  j.name = "t";
  j.run_dir = d.path;
  j.rank_exe = exe;
  j.plugin_path = "/nonexistent.so";
  j.steps = std::move(steps);
  j.walltime_s = walltime;
  return j;
}

JobStatus wait_final(LocalScheduler& s, const std::string& id, double timeout_s = 60) {
  JobStatus last;
  test::wait_for([&] {
    last = s.poll({id})[0];
    return job_state_final(last.state);
  }, timeout_s);
  return last;
}

StepSpec step(const std::string& role, int nodes, int tpn, const std::string& placement = "disjoint") {
  StepSpec s;
  s.role = role;
  s.nodes = nodes;
  s.tasks_per_node = tpn;
  s.placement = placement;
  return s;
}

}  // namespace

TEST(LocalScheduler, RanksGetTheirPlaceAndEnvironment) {
  test::TempDir d;
  auto exe = script(d, "echo \"$FANOUT_RANK $FANOUT_SIZE $FANOUT_LOCAL_RANK $FANOUT_LOCAL_SIZE $FANOUT_NODE_INDEX $FANOUT_JOB_RANKS $EXTRA\" > \"$FANOUT_RANK.$4.place\"\n"
                       "echo \"$*\" > \"$FANOUT_RANK.$4.args\"\n"
                       "echo out-$FANOUT_RANK; echo err-$FANOUT_RANK >&2");
  auto j = job(d, exe, {step("db", 2, 2), step("client", 1, 3, "colocated")});
  j.env = {{"EXTRA", "x y"}};
  LocalScheduler s;
  auto st = wait_final(s, s.submit(j));
  ASSERT_EQ(st.state, JobState::Completed) << st.reason;
  EXPECT_EQ(st.ranks.size(), 7u);
  // argv is "--plugin P --role R --run-dir D", so $4 is the role.
  auto read_place = [&](int rank, const std::string& role) {
    return trim(read_file(d.path / (std::to_string(rank) + "." + role + ".place")));
  };
  EXPECT_EQ(trim(read_file(d.path / "1.client.args")), "--plugin /nonexistent.so --role client --run-dir " + d.path.string());
  EXPECT_EQ(read_place(0, "db"), "0 4 0 2 0 7 x y");
  EXPECT_EQ(read_place(3, "db"), "3 4 1 2 1 7 x y");  // second node of the db step
  EXPECT_EQ(read_place(2, "client"), "2 3 2 3 0 7 x y");  // colocated: on the first step's first node
  EXPECT_NE(read_file(d.path / "db.out").find("out-3"), std::string::npos);
  EXPECT_NE(read_file(d.path / "client.err").find("err-1"), std::string::npos);
}

// What every rank starts with: the driver's environment, each name once, with what the job sets in place of ours.
TEST(LocalScheduler, ARanksEnvironmentIsOursWithTheJobsVariablesSetOnce) {
  for (const char* n : {"FANOUT_TEST_KEPT", "FANOUT_TEST_SET", "FANOUT_TEST_NEW"}) ::unsetenv(n);
  const auto before = environment_with({}).entries.size();
  ::setenv("FANOUT_TEST_KEPT", "kept=value", 1);
  ::setenv("FANOUT_TEST_SET", "ours", 1);
  const Environment made = environment_with({{"FANOUT_TEST_SET", "first"}, {"FANOUT_TEST_NEW", "n"}, {"FANOUT_TEST_SET", "last"}});
  ASSERT_EQ(made.entries.back(), nullptr);
  const std::vector<std::string> env(made.entries.begin(), made.entries.end() - 1);  // read before environ changes
  ::unsetenv("FANOUT_TEST_KEPT");
  ::unsetenv("FANOUT_TEST_SET");
  auto count = [&](const std::string& prefix) {
    return std::count_if(env.begin(), env.end(), [&](const std::string& e) { return e.rfind(prefix, 0) == 0; });
  };
  EXPECT_EQ(count("FANOUT_TEST_KEPT=kept=value"), 1);  // the value holds '=': the name ends at the first
  EXPECT_EQ(count("FANOUT_TEST_SET="), 1);
  EXPECT_EQ(count("FANOUT_TEST_SET=last"), 1);  // the last of a name given twice wins
  EXPECT_EQ(count("FANOUT_TEST_NEW=n"), 1);
  EXPECT_EQ(count("PATH="), 1);
  EXPECT_EQ(env.size(), size_t(before - 1 + 3));  // ours (FANOUT_TEST_SET among them, replaced) and FANOUT_TEST_NEW
}

TEST(LocalScheduler, CrashingRankIsReportedWithItsSignalAndPeersAreStopped) {
  test::TempDir d;
  auto exe = script(d, "if [ \"$FANOUT_RANK\" = 1 ]; then kill -SEGV $$; fi\nexec sleep 60");
  LocalScheduler s(1.0);
  auto t0 = std::chrono::steady_clock::now();
  auto st = wait_final(s, s.submit(job(d, exe, {step("w", 1, 3)})));
  EXPECT_EQ(st.state, JobState::Failed);
  EXPECT_EQ(st.signal, 11);
  EXPECT_NE(st.reason.find("rank 1 of step 'w' was killed by signal 11 (SIGSEGV)"), std::string::npos) << st.reason;
  EXPECT_NE(st.reason.find((d.path / "w.err").string()), std::string::npos) << st.reason;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20)) << "peers must not be waited for";
}

TEST(LocalScheduler, ExitCodeOfTheFirstFailingRank) {
  test::TempDir d;
  auto exe = script(d, "[ \"$FANOUT_RANK\" = 0 ] && exit 7\nexit 0");
  LocalScheduler s;
  auto st = wait_final(s, s.submit(job(d, exe, {step("w", 1, 2)})));
  EXPECT_EQ(st.state, JobState::Failed);
  EXPECT_EQ(st.exit_code, 7);
  EXPECT_EQ(st.signal, 0);
}

TEST(LocalScheduler, WallTimeKillsTheWholeProcessGroup) {
  test::TempDir d;
  // The rank leaves a grandchild behind; the timeout must take it too.
  auto exe = script(d, "sleep 300 & echo $! > \"child.$FANOUT_RANK\"\nwait");
  LocalScheduler s(0.5);
  // 4 s: each rank's shell has started and written its grandchild's pid long before, however loaded the machine.
  auto st = wait_final(s, s.submit(job(d, exe, {step("w", 1, 2)}, /*walltime=*/4)), 60);
  EXPECT_EQ(st.state, JobState::Timeout);
  EXPECT_NE(st.reason.find("wall time of 4 s"), std::string::npos) << st.reason;
  for (int r = 0; r < 2; ++r) {
    pid_t child = std::stoi(read_file(d.path / ("child." + std::to_string(r))));
    EXPECT_TRUE(test::wait_for([&] { return kill(child, 0) != 0; }, 10)) << "grandchild " << child << " survived";
  }
}

TEST(LocalScheduler, ADaemonARankLeftWithSetsidGoesWhenTheJobEnds) {
  test::TempDir d;
  // The daemon leaves the job's process group and session, so only its token (FANOUT_KV_TOKEN) finds it; the job's
  // ranks are done before the daemon has written its pid, so the scan of processes made since the job began
  // must see it however long the host took.
  auto exe = script(d, "setsid sh -c 'echo $$ > daemon.tmp; mv daemon.tmp daemon; exec sleep 300' &\n"
                       "while [ ! -e daemon ]; do sleep 0.01; done");
  LocalScheduler s(0.5);
  auto st = wait_final(s, s.submit(job(d, exe, {step("w", 1, 1)})));
  EXPECT_EQ(st.state, JobState::Completed) << st.reason;
  const pid_t daemon = std::stoi(read_file(d.path / "daemon"));
  EXPECT_TRUE(test::wait_for([&] { return kill(daemon, 0) != 0; }, 10)) << "daemon " << daemon << " survived";
}

// What the local launcher starts a rank with: its folder, its streams on files (appended to), a process group, our
// environment as given, every signal's default action and none blocked, whatever the starting thread had; a program
// that cannot start is an error with its reason, as posix_spawn gives it.
TEST(Spawn, AProgramStartsInItsFolderGroupAndFilesWithDefaultSignals) {
  test::TempDir d;
  const auto out = d.path / "rank.out", err = d.path / "rank.err";
  write_new_file(out, "before\n");
  struct sigaction ignore = {}, old_usr1 = {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGUSR1, &ignore, &old_usr1);
  sigset_t usr2, old_mask;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  ::pthread_sigmask(SIG_BLOCK, &usr2, &old_mask);
  std::vector<std::string> args = {"/bin/sh", "-c",
                                   "pwd; echo \"$SPAWN_TEST\"; cut -d' ' -f5 /proc/$$/stat; readlink /proc/$$/fd/0; echo to-err >&2"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string variable = "SPAWN_TEST=given";
  char* envp[] = {variable.data(), nullptr};
  SpawnRequest request;
  request.path = argv[0];
  request.argv = argv.data();
  request.envp = envp;
  request.cwd = d.path.c_str();
  const std::string out_path = out.string(), err_path = err.string();
  request.out = out_path.c_str();
  request.err = err_path.c_str();
  request.process_group = 0;
  int error = -1;
  const pid_t pid = spawn_program(request, error);
  // Signals seen by a program that does not touch them itself (a shell resets its mask): grep of its own status.
  std::vector<std::string> grep_args = {"/bin/grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"};
  std::vector<char*> grep_argv;
  for (auto& a : grep_args) grep_argv.push_back(a.data());
  grep_argv.push_back(nullptr);
  SpawnRequest signals = request;
  signals.path = grep_argv[0];
  signals.argv = grep_argv.data();
  const std::string signals_path = (d.path / "signals.out").string();
  signals.out = signals_path.c_str();
  int grep_error = -1;
  const pid_t grep_pid = spawn_program(signals, grep_error);
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ::sigaction(SIGUSR1, &old_usr1, nullptr);
  ASSERT_GT(pid, 0) << std::strerror(error);
  ASSERT_GT(grep_pid, 0) << std::strerror(grep_error);
  EXPECT_EQ(error, 0);
  for (pid_t p : {pid, grep_pid}) {
    int status = 0;
    ASSERT_EQ(::waitpid(p, &status, 0), p);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  EXPECT_EQ(read_file(out), "before\n" + std::filesystem::canonical(d.path).string() + "\ngiven\n" + std::to_string(pid) + "\n/dev/null\n");
  EXPECT_EQ(read_file(err), "to-err\n");
  EXPECT_EQ(read_file(signals_path), "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n") << "ignored SIGUSR1, blocked SIGUSR2";
  // What cannot start: the program, its folder, its output file.
  request.cwd = nullptr;
  std::string missing = (d.path / "no-such-program").string();
  request.path = missing.c_str();
  EXPECT_EQ(spawn_program(request, error), -1);
  EXPECT_EQ(error, ENOENT);
  request.path = argv[0];
  const std::string no_folder = (d.path / "absent").string();
  request.cwd = no_folder.c_str();
  EXPECT_EQ(spawn_program(request, error), -1);
  EXPECT_EQ(error, ENOENT);
  request.cwd = nullptr;
  const std::string no_file = (d.path / "absent" / "rank.out").string();
  request.out = no_file.c_str();
  EXPECT_EQ(spawn_program(request, error), -1);
  EXPECT_EQ(error, ENOENT);
}

// What a job's end looks at: the processes made since its start (the pid ring after the mark), not the host's.
TEST(NewProcesses, OnlyProcessesMadeSinceTheMarkAreVisitedUnlessTheRingCannotBeTrusted) {
  auto start_sleeper = [] {
    const pid_t p = ::fork();
    if (p == 0) {
      ::execlp("sleep", "sleep", "300", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    return p;
  };
  const pid_t before = start_sleeper();
  const ProcessMark mark = mark_processes();
  ASSERT_TRUE(mark.known) << "/proc/loadavg or /proc/stat unreadable";
  EXPECT_EQ(mark.pid_max, std::atol(read_file("/proc/sys/kernel/pid_max").c_str()));
  EXPECT_GT(mark.threads, 0);
  const pid_t after = start_sleeper();
  EXPECT_GT(mark_processes().forks, mark.forks) << "a process made after the mark counts";
  EXPECT_TRUE(ring_held_between(mark, mark_processes()));
  auto visited = [](const ProcessMark& m) {
    std::set<pid_t> seen;
    for_each_process_since(m, [&](pid_t p) { seen.insert(p); });
    return seen;
  };
  const auto since_mark = visited(mark);
  EXPECT_TRUE(since_mark.count(after)) << "a process made after the mark, pid " << after;
  EXPECT_FALSE(since_mark.count(before)) << "a process made before the mark, pid " << before;
  EXPECT_FALSE(since_mark.count(1));
  EXPECT_FALSE(since_mark.count(::getpid()));
  // No mark (/proc did not tell): every process.
  const auto unknown = visited(ProcessMark{});
  EXPECT_TRUE(unknown.count(before) && unknown.count(after));
  // A mark whose last pid lies past the current one: the ring wrapped since, and what follows the wrap counts.
  ProcessMark wrapped = mark;
  wrapped.last_pid = pid_t(std::atol(read_file("/proc/sys/kernel/pid_max").c_str()) - 1);
  const auto after_wrap = visited(wrapped);
  EXPECT_TRUE(after_wrap.count(before) && after_wrap.count(after));
  // More pids handed out since the mark than the ring holds: it may have come round past it, so every process.
  ProcessMark lapped = mark;
  lapped.forks = 0;
  lapped.threads = 0;
  if (mark.forks >= uint64_t(std::atol(read_file("/proc/sys/kernel/pid_max").c_str()))) {
    EXPECT_TRUE(visited(lapped).count(before)) << "a mark " << mark.forks << " forks ago";
  }
  for (pid_t p : {before, after}) {
    ::kill(p, SIGKILL);
    ::waitpid(p, nullptr, 0);
  }
}

TEST(LocalScheduler, CancelEndsAsCancelled) {
  test::TempDir d;
  auto exe = script(d, "touch started.$FANOUT_RANK; exec sleep 300");
  LocalScheduler s(0.5);
  auto id = s.submit(job(d, exe, {step("w", 1, 1)}));
  ASSERT_TRUE(test::wait_for([&] { return std::filesystem::exists(d.path / "started.0"); }, 10));
  s.cancel({id});
  auto st = wait_final(s, id, 20);
  EXPECT_EQ(st.state, JobState::Cancelled);
}

TEST(LocalScheduler, MissingExecutableIsAClearError) {
  test::TempDir d;
  LocalScheduler s;
  EXPECT_THROW_WITH(s.submit(job(d, d.path / "does-not-exist", {step("w", 1, 1)})), UserError,
                    "cannot start " + (d.path / "does-not-exist").string() + " for run ");
}

TEST(KvService, PutGetFenceAcrossRanksAndTimeouts) {
  KvService kv;
  const int n = 4;
  std::string token = kv.open_job(n);
  setenv("FANOUT_KV", kv.address().c_str(), 1);
  setenv("FANOUT_KV_TOKEN", token.c_str(), 1);
  std::vector<std::string> errors(n), seen(n);
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r)
    ranks.emplace_back([&, r] {
      auto rv = make_rendezvous(n, 1);
      std::string big(1 << 20, char('a' + r));
      errors[r] += rv->put("rank." + std::to_string(r), big);
      errors[r] += rv->fence(10000);
      errors[r] += rv->get("rank." + std::to_string((r + 1) % n), 30000, seen[r]);  // the key exists: a bound, not a premise
      errors[r] += rv->fence(10000);
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(seen[r], std::string(1 << 20, char('a' + (r + 1) % n)));
  }
  auto rv = make_rendezvous(n, 1);
  std::string v;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(rv->get("never", 200, v), "timeout");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(150));
  EXPECT_EQ(rv->fence(200), "timeout");  // the other ranks never come
  EXPECT_EQ(rv->put("bad key", "x"), "invalid key 'bad key' (1-256 bytes, no white space)");
  unsetenv("FANOUT_KV");
  unsetenv("FANOUT_KV_TOKEN");
}

TEST(KvService, WrongTokenIsRefused) {
  KvService kv;
  kv.open_job(1);
  setenv("FANOUT_KV", kv.address().c_str(), 1);
  setenv("FANOUT_KV_TOKEN", "not-the-token", 1);
  EXPECT_THROW_WITH(make_rendezvous(2, 1), UserError, "refused this rank: unknown job token");
  unsetenv("FANOUT_KV");
  unsetenv("FANOUT_KV_TOKEN");
}

TEST(KvService, AConnectionAnsweredWithAnErrorIsClosed) {
  KvService kv;
  kv.open_job(1);
  auto addr = kv.address();
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(std::stoi(addr.substr(addr.rfind(':') + 1))));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const char req[] = "PUT k 1\nx";  // no AUTH first
  ASSERT_EQ(send(fd, req, sizeof req - 1, 0), ssize_t(sizeof req - 1));
  std::string got;
  char buf[256];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) got.append(buf, size_t(n));
  EXPECT_EQ(got, "ERR not authenticated\n");
  EXPECT_EQ(recv(fd, buf, sizeof buf, 0), 0) << "the service closed the connection (not a receive timeout)";
  close(fd);
}

// 1100 idle connections (issue 19: they exhausted the driver's files and aborted the sweep): the service turns
// the excess away or closes the silent ones, and a real rank still meets its peer through it.
TEST(KvService, AFloodOfIdleConnectionsNeverStopsTheRanks) {
  KvService kv;
  const std::string token = kv.open_job(2);
  auto addr = kv.address();
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(std::stoi(addr.substr(addr.rfind(':') + 1))));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  rlimit lim{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
  lim.rlim_cur = std::min<rlim_t>(lim.rlim_max, 4096);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lim), 0);
  const int kFlood = 1100;
  std::vector<int> idle;
  for (int i = 0; i < kFlood; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0) << "the test's own file limit";
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    idle.push_back(fd);
  }
  // Two ranks of the job meet through it while the flood is connected.
  setenv("FANOUT_KV", addr.c_str(), 1);
  setenv("FANOUT_KV_TOKEN", token.c_str(), 1);
  std::string got0, got1, err0, err1;
  std::thread r1([&] {
    auto rv = make_rendezvous(2, 1);
    err1 = rv->put("k1", "one");  // one statement each: the operands of + are evaluated in any order
    err1 += rv->fence(20000);
    err1 += rv->get("k0", 20000, got1);
  });
  auto rv = make_rendezvous(2, 1);
  err0 = rv->put("k0", "zero");
  err0 += rv->fence(20000);
  err0 += rv->get("k1", 20000, got0);
  r1.join();
  unsetenv("FANOUT_KV");
  unsetenv("FANOUT_KV_TOKEN");
  EXPECT_EQ(err0, "");
  EXPECT_EQ(err1, "");
  EXPECT_EQ(got0, "one");
  EXPECT_EQ(got1, "zero");
  // The oldest silent connections were closed to make room (at most 256 wait for their AUTH).
  char b;
  timeval tv{0, 200000};
  setsockopt(idle[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  EXPECT_EQ(recv(idle[0], &b, 1, 0), 0) << "closed by the service";
  for (int fd : idle) close(fd);
  // A waiting time that would overflow nanoseconds is clamped (to a year), not wrapped into an instant timeout:
  // the GET waits, and is answered when the key comes.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const std::string req = "AUTH " + token + "\nGET late 9223372036854775807\n";
  ASSERT_EQ(send(fd, req.data(), req.size(), 0), ssize_t(req.size()));
  timeval tv5{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv5, sizeof tv5);
  std::string reply;
  char buf[256];
  ASSERT_GT(recv(fd, buf, 3, MSG_WAITALL), 0);  // OK\n for the AUTH
  setenv("FANOUT_KV", addr.c_str(), 1);
  setenv("FANOUT_KV_TOKEN", token.c_str(), 1);
  EXPECT_EQ(make_rendezvous(2, 1)->put("late", "v"), "");
  unsetenv("FANOUT_KV");
  unsetenv("FANOUT_KV_TOKEN");
  for (ssize_t n; reply.size() < 8 && (n = recv(fd, buf, sizeof buf, 0)) > 0;) reply.append(buf, size_t(n));
  EXPECT_EQ(reply, "VAL 1\nv");
  close(fd);
}

// The names the driver plans with (schedulers/names.cpp) and the registry that makes schedulers agree: every name
// has a backend that renders a job script, and an unknown one is refused naming the known.
TEST(Schedulers, EveryNameHasABackend) {
  test::TempDir d;
  const JobSpec job = test::trivial_job(d.path, "names");
  for (auto& name : scheduler_names()) {
    if (scheduler_is_detected(name)) continue;
    EXPECT_NO_THROW(render_job_script(name, job)) << name;
    EXPECT_EQ(scheduler_traits(name).one_host, scheduler_traits_of(name).one_host) << name;
  }
  try {
    render_job_script("nope", job);
    ADD_FAILURE() << "an unknown scheduler was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("known: slurm, pbs, sge, local, auto"), std::string::npos) << e.what();
  }
}

// A job of one rank is given no rendezvous address (nothing to meet, no connection to make), only the token
// that marks its processes; a job of two is given both.
TEST(LocalScheduler, OnlyAJobOfSeveralRanksIsGivenTheRendezvousService) {
  for (int ranks : {1, 2}) {
    test::TempDir d;
    auto exe = script(d, "echo \"kv=${FANOUT_KV-unset} token=${FANOUT_KV_TOKEN:+set}\" > \"$FANOUT_RANK.kv\"");
    LocalScheduler s;
    auto st = wait_final(s, s.submit(job(d, exe, {step("w", 1, ranks)})));
    ASSERT_EQ(st.state, JobState::Completed) << st.reason;
    for (int r = 0; r < ranks; ++r) {
      const std::string seen = read_file(d.path / (std::to_string(r) + ".kv"));
      if (ranks == 1) EXPECT_EQ(seen, "kv=unset token=set\n");
      else EXPECT_TRUE(starts_with(seen, "kv=127.0.0.1:") && seen.find(" token=set\n") != std::string::npos) << seen;
    }
  }
}

// The driver forgets a job once it has its end: its status goes (a 100,000-run sweep kept every one), and only
// that job's.
TEST(LocalScheduler, AForgottenJobIsNoLongerAnsweredForAndOthersStay) {
  test::TempDir d;
  auto quick = script(d, "exit 3");
  LocalScheduler s;
  const std::string a = s.submit(job(d, quick, {step("w", 1, 1)})), b = s.submit(job(d, quick, {step("w", 1, 1)}));
  ASSERT_EQ(wait_final(s, a).exit_code, 3);
  ASSERT_EQ(wait_final(s, b).exit_code, 3);
  s.forget({a});
  EXPECT_EQ(s.poll({a})[0].state, JobState::Unknown);
  const JobStatus other = s.poll({b})[0];
  EXPECT_EQ(other.state, JobState::Failed);
  EXPECT_EQ(other.exit_code, 3);
}

// A process mark reads /proc/stat, whose "processes" line comes after a line per CPU and the interrupt counts: on a
// large host past the first buffer. Checked here on a regular file whose size the test sets (this host's /proc/stat
// fits the first buffer): a text ten times that buffer comes back whole, and so does the same open file grown and
// shrunk; then /proc/stat itself. That the text is taken in one read (two reads at two offsets of a seq_file can
// come from two makings of it) is by construction: a regular file cannot show it.
TEST(LocalScheduler, AProcFileIsReadWholeInOneReadHoweverLargeItGrows) {
  test::TempDir d;
  const std::string file = (d.path / "stat").string();
  auto text_of = [](size_t bytes, char c) {
    std::string t;
    for (size_t i = 0; t.size() < bytes; ++i) t += std::string(60, c) + " " + std::to_string(i) + "\n";
    return t;
  };
  write_file_atomic(file, text_of(100, 'a'));
  EXPECT_EQ(read_proc_text(file.c_str()), text_of(100, 'a'));
  const std::string large = text_of(40000, 'b');  // ten times the first buffer
  {
    std::ofstream out(file, std::ios::trunc);  // the same file (it stays open), grown
    out << large;
  }
  EXPECT_EQ(read_proc_text(file.c_str()), large);
  const std::string small = text_of(200, 'c');
  {
    std::ofstream out(file, std::ios::trunc);
    out << small;
  }
  EXPECT_EQ(read_proc_text(file.c_str()), small);
  const std::string stat = read_proc_text("/proc/stat");
  EXPECT_EQ(stat.rfind("cpu ", 0), 0u) << stat.substr(0, 80);
  EXPECT_NE(stat.find("\nprocesses "), std::string::npos);
  EXPECT_EQ(read_proc_text((d.path / "absent").c_str()), "");
}
