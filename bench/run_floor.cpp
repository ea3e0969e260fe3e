// The floor under the driver's CPU per run (sweep_scale_bench.sh): the system work no driver of a sweep can leave
// out, done for each of n runs by a program that does nothing else. Per run it makes the run's folder and writes
// the files the driver writes before a submission (its job script, 648 B, and run.toml, 2,251 B: a
// calibration_sleep run's), starts /bin/true with its output going to files of the folder (posix_spawn, as the
// local launcher does) and appends the job's id to run.toml, waits for it (blocking: no polling at all), reads a file of the
// folder as the driver reads the rank's samples, appends the run's end to run.toml, and stores one row of the run
// in SQLite (committed once a second, as the driver batches). Its own CPU (user + system, not the children's) per
// run is printed: what this machine charges for that much file, process and database work now.
//   run_floor <folder> <runs>
#include <fcntl.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

extern char** environ;

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::perror(what.c_str());
  std::exit(1);
}

void write_new(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || ::write(fd, text.data(), text.size()) != ssize_t(text.size()) || ::close(fd) != 0) fail(path);
}

void append(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0 || ::write(fd, text.data(), text.size()) != ssize_t(text.size()) || ::close(fd) != 0) fail(path);
}

double now_s(clockid_t clock) {
  timespec t{};
  ::clock_gettime(clock, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

void exec_sql(sqlite3* db, const char* sql) {
  if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) fail(std::string("sqlite: ") + sqlite3_errmsg(db));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: run_floor <folder> <runs>\n");
    return 2;
  }
  const std::string root = argv[1];
  const long runs = std::atol(argv[2]);
  if (runs <= 0 || ::mkdir(root.c_str(), 0755) != 0) fail(root + " (a new folder, and a count of runs above 0)");
  sqlite3* db = nullptr;
  if (sqlite3_open((root + "/floor.sqlite").c_str(), &db) != SQLITE_OK) fail("sqlite open");
  exec_sql(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
               "CREATE TABLE runs(id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, status TEXT NOT NULL, started REAL, ended REAL);");
  sqlite3_stmt* insert = nullptr;
  if (sqlite3_prepare_v2(db, "INSERT INTO runs(path, status, started, ended) VALUES(?,?,?,?)", -1, &insert, nullptr) != SQLITE_OK) fail("prepare");
  const std::string script = "#!/bin/sh\n" + std::string(638, '#') + "\n", toml = std::string(2250, 'x') + "\n",
                    status = "\n[status]\nstate = 'COMPLETED'\n" + std::string(180, 'x') + "\n";
  const double cpu0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
  double batch_since = now_s(CLOCK_MONOTONIC);
  exec_sql(db, "BEGIN");
  char buf[4096];
  for (long i = 0; i < runs; ++i) {
    const std::string dir = root + "/run-" + std::to_string(i);
    if (::mkdir(dir.c_str(), 0755) != 0) fail(dir);
    write_new(dir + "/job.sh", script);
    write_new(dir + "/run.toml", toml);
    posix_spawn_file_actions_t io;
    posix_spawn_file_actions_init(&io);
    posix_spawn_file_actions_addopen(&io, 1, (dir + "/rank.out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&io, 2, (dir + "/rank.err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char* child_argv[] = {const_cast<char*>("/bin/true"), nullptr};
    pid_t pid = 0;
    const double started = now_s(CLOCK_REALTIME);
    if (posix_spawn(&pid, "/bin/true", &io, nullptr, child_argv, environ) != 0) fail("posix_spawn");
    posix_spawn_file_actions_destroy(&io);
    append(dir + "/run.toml", "\n[job]\nid = '" + std::to_string(pid) + "'\n");
    int st = 0;
    if (::waitpid(pid, &st, 0) != pid) fail("waitpid");
    const int in = ::open((dir + "/job.sh").c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0 || ::read(in, buf, sizeof buf) <= 0 || ::close(in) != 0) fail(dir + "/job.sh");
    append(dir + "/run.toml", status);
    sqlite3_bind_text(insert, 1, dir.c_str(), int(dir.size()), SQLITE_TRANSIENT);
    sqlite3_bind_text(insert, 2, "COMPLETED", -1, SQLITE_STATIC);
    sqlite3_bind_double(insert, 3, started);
    sqlite3_bind_double(insert, 4, now_s(CLOCK_REALTIME));
    if (sqlite3_step(insert) != SQLITE_DONE) fail(std::string("insert: ") + sqlite3_errmsg(db));
    sqlite3_reset(insert);
    if (now_s(CLOCK_MONOTONIC) - batch_since >= 1.0) {
      exec_sql(db, "COMMIT; BEGIN");
      batch_since = now_s(CLOCK_MONOTONIC);
    }
  }
  exec_sql(db, "COMMIT");
  sqlite3_finalize(insert);
  sqlite3_close(db);
  const double cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
  std::printf("floor: %ld runs, cpu %.3f s, %.4f ms per run\n", runs, cpu, cpu / double(runs) * 1000);
  return 0;
}
