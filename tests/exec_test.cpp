// The exec plugin end to end (issue 39): programs written here (tests/clients/exec_probe.c, exec_gbench.cpp,
// throughput_standin.c) and shell one-liners run through `fanout exec` and experiment files on the local launcher,
// every parser exercised, samples and units checked against what the program wrote, failures loud.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "common/files.h"
#include "common/text.h"
#include "tests/test_util.h"

using namespace fanout;
namespace fs = std::filesystem;

namespace {

class Exec : public ::testing::Test {
 protected:
  test::TempDir d;
  test::CommandResult fanout(std::vector<std::string> args, double timeout_s = 300) { return test::run_fanout(d.path, args, timeout_s); }
  fs::path db(const std::string& exp) { return d.path / "results" / exp / "fanout.sqlite"; }
  std::vector<std::vector<std::string>> query(const std::string& exp, const std::string& sql) { return test::sql_rows(db(exp), sql); }
  std::string one(const std::string& exp, const std::string& sql) { return test::sql_one(db(exp), sql); }
  static std::string probe() { return (test::build_dir() / "tests" / "exec_probe").string(); }
  void write(const std::string& name, const std::string& text) { std::ofstream(d.path / name) << text; }
  // The folder of the only run of exp.
  fs::path run_dir(const std::string& exp) { return one(exp, "SELECT path FROM runs"); }
  // The folder of exp's run whose parameter n is `n`.
  fs::path run_dir_of(const std::string& exp, const std::string& n) {
    return one(exp, "SELECT r.path FROM runs r JOIN parameters p ON p.run_id=r.id AND p.name='n' WHERE p.value='" + n + "'");
  }
  // NAME=value lines of a file the probe wrote.
  static std::map<std::string, std::string> env_file(const fs::path& f) {
    std::map<std::string, std::string> out;
    std::ifstream in(f);
    for (std::string line; std::getline(in, line);)
      if (auto eq = line.find('='); eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
    return out;
  }
};

// A C program through every text parser at once: regex on stdout, jsonl on stderr, csv and SmartSim-Scaling rank
// files it wrote, and time; two sizes swept by a parameter of the user's own, two ranks each.
TEST_F(Exec, ACProgramThroughEveryParserOnTheLocalLauncher) {
  write("probe.toml", "[experiment]\nplugin = \"exec\"\nname = \"probe\"\n"
                      "[parameters]\nsize = [100, 200]\n"
                      "[[steps]]\nname = \"probe\"\nranks_per_node = 2\nwarmup = 1\nrepeat_command = 2\n"
                      "command = \"" + probe() + " {size} 3\"\nenv = { PROBE_SIZE = \"{size}\" }\n"
                      "[[steps.parse]]\nkind = \"regex\"\npattern = 'iteration (?<iteration>\\d+) latency: (?<value>\\d+) (?<unit>us)'\nmetric = \"latency\"\n"
                      "[[steps.parse]]\nkind = \"jsonl\"\nfrom = \"stderr\"\n"
                      "[[steps.parse]]\nkind = \"csv\"\ncolumns = \"seconds\"\nunit = \"s\"\nfrom = \"file:probe_{FANOUT_RANK}.csv\"\n"
                      "[[steps.parse]]\nkind = \"smartsim-timing\"\nfrom = \"file:rank_{FANOUT_RANK}_timing.csv\"\n"
                      "[[steps.parse]]\nkind = \"time\"\n");
  auto r = fanout({"run", "probe.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(one("probe", "SELECT count(*) FROM runs WHERE status='COMPLETED'"), "2");
  // Per run: 2 ranks x 3 invocations (1 warmup) x 3 lines for the text parsers; the probe's values are known.
  for (auto& [size, run] : std::map<std::string, std::string>{{"100", "1"}, {"200", "2"}}) {
    const std::string in_run = " FROM samples s JOIN parameters p ON p.run_id=s.run_id AND p.name='size' WHERE p.value='" + size + "'";
    EXPECT_EQ(one("probe", "SELECT count(*)" + in_run + " AND metric='latency' AND warmup=0"), "12") << size;
    EXPECT_EQ(one("probe", "SELECT count(*)" + in_run + " AND metric='latency' AND warmup=1"), "6") << size;
    EXPECT_EQ(one("probe", "SELECT group_concat(DISTINCT printf('%g', s.value))" + in_run + " AND metric='latency' AND iteration=2"),
              std::to_string(10 * (std::stoi(size) + 2)));
    EXPECT_EQ(one("probe", "SELECT DISTINCT unit" + in_run + " AND metric='latency'"), "us");
    EXPECT_EQ(one("probe", "SELECT group_concat(DISTINCT printf('%g', s.value) || ' ' || unit)" + in_run + " AND metric='ops' AND iteration=1"), "1001 ops/s");
    EXPECT_EQ(one("probe", "SELECT group_concat(DISTINCT printf('%g', s.value) || ' ' || unit)" + in_run + " AND metric='seconds' AND iteration=2"), "1.5 s");
    EXPECT_EQ(one("probe", "SELECT count(*)" + in_run + " AND metric='compute' AND warmup=0"), "12");
    EXPECT_EQ(one("probe", "SELECT count(*)" + in_run + " AND metric='wall_time' AND warmup=0 AND unit='s' AND s.value > 0"), "4");
    EXPECT_EQ(one("probe", "SELECT count(*)" + in_run + " AND metric='wall_time' AND warmup=1 AND iteration=-1"), "2");
  }
  // What each rank's program got: the parameter, its place, the folders.
  const fs::path step = run_dir("probe") / "probe";
  auto env = env_file(step / "env.1");
  EXPECT_EQ(env["FANOUT_RANK"], "1");
  EXPECT_EQ(env["FANOUT_NRANKS"], "2");
  EXPECT_EQ(env["FANOUT_LOCAL_RANK"], "1");
  EXPECT_EQ(env["FANOUT_NODE_INDEX"], "0");
  EXPECT_EQ(env["FANOUT_STEP"], "probe");
  EXPECT_EQ(env["FANOUT_STEP_DIR"], step.string());
  EXPECT_EQ(env["FANOUT_RUN_DIR"], run_dir("probe").string());
  EXPECT_FALSE(env["FANOUT_NODELIST"].empty());
  EXPECT_EQ(env["PROBE_SIZE"].empty(), false);
  // What the step ran is in the run's provenance: the program and its checksum (compare names a changed binary).
  EXPECT_EQ(one("probe", "SELECT DISTINCT value FROM provenance WHERE key='plugin.probe.program'"), probe());
  EXPECT_EQ(one("probe", "SELECT count(DISTINCT value) FROM provenance WHERE key='plugin.probe.program_checksum64'"), "1");
  // The run's parameters are the user's: not the flags' defaults the file's steps override.
  EXPECT_EQ(one("probe", "SELECT group_concat(DISTINCT name) FROM parameters"), "size");
  // Statistics, CSV and the report, as for any plugin.
  EXPECT_NE(read_file(d.path / "results/probe/csv/statistics.csv").find("latency,us"), std::string::npos);
  auto p = fanout({"process_scaling_results", "results/probe"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const std::string report = read_file(d.path / "results/probe/processed/report.html");
  for (auto* m : {"latency", "ops", "seconds", "compute", "wall_time"}) EXPECT_NE(report.find(m), std::string::npos) << m;
}

// A shell one-liner (shell = true) swept over a parameter of the user's own, read with a regular expression.
TEST_F(Exec, AShellOneLinerSweptByTheUsersParameter) {
  // Values reach the shell quoted, so arithmetic takes them through the environment.
  auto r = fanout({"exec", "--exp_name=sh", "--shell=true", "--command=for i in 1 2 3; do echo n={n} t=$((i * N))ms; done",
                   "--env=N={n}", "--param", "n=[2,5]", "--parse", "regex:t=(?<value>\\d+)ms", "--metric=t", "--unit=ms"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(one("sh", "SELECT count(*) FROM runs WHERE status='COMPLETED'"), "2");
  EXPECT_EQ(one("sh", "SELECT group_concat(v, ' ') FROM (SELECT printf('%g', s.value) AS v FROM samples s JOIN parameters p ON p.run_id=s.run_id "
                      "AND p.name='n' AND p.value='5' AND s.metric='t' ORDER BY s.iteration)"), "5 10 15");
  EXPECT_EQ(one("sh", "SELECT DISTINCT unit FROM samples WHERE metric NOT LIKE 'resource.%'"), "ms");
  // The value reaches the shell quoted: a parameter cannot run a command of its own.
  auto evil = fanout({"exec", "--exp_name=evil", "--shell=true", "--command=echo {x} > out.txt", "--param", "x='$(touch pwned); x'"});
  ASSERT_EQ(evil.exit_code, 0) << evil.err;
  EXPECT_EQ(read_file(run_dir("evil") / "run" / "out.txt"), "$(touch pwned); x\n");
  EXPECT_FALSE(fs::exists(run_dir("evil") / "run" / "pwned"));
  // Issue 53: no position makes a value code: a here-document, a comment with a newline in the value (the value
  // travels in the environment, "${FANOUT_P_v}", never in the script).
  auto heredoc = fanout({"exec", "--exp_name=heredoc", "--shell=true", "--command=cat <<EOF\nsize {v}\nEOF", "--param", "v=$(touch pwn)"});
  ASSERT_EQ(heredoc.exit_code, 0) << heredoc.err;
  EXPECT_EQ(read_file(run_dir("heredoc") / "run" / "stdout.0"), "size \"$(touch pwn)\"\n");
  auto comment = fanout({"exec", "--exp_name=comment", "--shell=true", "--command=echo {v} # {v}", "--param", "v=a\ntouch pwn2"});
  ASSERT_EQ(comment.exit_code, 0) << comment.err;
  EXPECT_EQ(read_file(run_dir("comment") / "run" / "stdout.0"), "a\ntouch pwn2\n");
  for (const char* f : {"pwn", "pwn2"}) {
    EXPECT_FALSE(fs::exists(run_dir("heredoc") / "run" / f)) << f;
    EXPECT_FALSE(fs::exists(run_dir("comment") / "run" / f)) << f;
    EXPECT_FALSE(fs::exists(d.path / f)) << f;
  }
  // Inside the command's own quotes a value would escape fanout's: refused before anything runs.
  auto quoted = fanout({"exec", "--exp_name=quoted", "--shell=true", "--command=echo \"{x}\"", "--param", "x=1"});
  EXPECT_EQ(quoted.exit_code, 2) << quoted.err;
  EXPECT_NE(quoted.err.find("shell = true: {x} sits inside quotes"), std::string::npos) << quoted.err;
}

TEST_F(Exec, FailuresAreLoudAndNameTheirCause) {
  // A non-zero exit: the run fails with the command's status and the tail of its stderr, and fanout exits non-zero.
  auto r = fanout({"exec", "--exp_name=fails", "--command=" + probe() + " 1 1 7"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(one("fails", "SELECT status || ' ' || exit_code FROM runs"), "FAILED 7");
  EXPECT_NE(r.err.find("the command exited with status 7"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("exec_probe: failing with status 7 as asked"), std::string::npos) << r.err;
  // A parser that matches nothing fails the run; it is never COMPLETED with 0 samples.
  auto none = fanout({"exec", "--exp_name=nomatch", "--command=" + probe() + " 1 1", "--parse", "regex:nothing (?<value>\\d+)",
                      "--metric=m", "--unit=s"});
  EXPECT_NE(none.exit_code, 0);
  EXPECT_EQ(one("nomatch", "SELECT status FROM runs"), "FAILED");
  EXPECT_NE(none.err.find("no sample matched 'regex:nothing (?<value>\\d+)' in stdout"), std::string::npos) << none.err;
  // Refused before anything runs: a placeholder that is no parameter, a parser that does not compile, no unit.
  for (auto& [args, why] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"exec", "--command=./b {sise}", "--param", "size=1"}, "{sise}"},
           {{"exec", "--command=true", "--parse", "regex:(?<value>\\d+", "--metric=m", "--unit=s"}, "missing closing parenthesis"},
           {{"exec", "--command=true", "--parse", "regex:(?<value>\\d+)", "--metric=m"}, "has no unit: add a (?<unit>...) group or a unit (--unit)"},
           // every missing piece at once (issue 52), not one per try
           {{"exec", "--command=true", "--parse", "regex:took \\d+"},
            "'regex:took \\d+' has no (?<value>...) group: name the number to record value; no unit: add a (?<unit>...) group or a unit "
            "(--unit); and no metric: add a (?<metric>...) group or a metric (--metric)"},
           {{"exec", "--command=true", "--parse", "csv:rps,avg_latency_ms:ms", "--metric=m"},
            "'csv:rps,avg_latency_ms:ms': no unit for column rps: write it as rps:UNIT, or give a unit (--unit) for all; a metric names one column"},
           {{"exec", "--command=true", "--parse", "regex:(?<value>\\d+) (?<unit>ms)", "--metric=m", "--label=test"},
            "label names a csv column (each record's metric); 'regex' has none"},
           {{"exec", "--command=true", "--parse", "xml"}, "no parser 'xml'"},
           // two ranks reading one glob would each count both ranks' samples
           {{"exec", "--command=true", "--ranks_per_node=2", "--parse=csv", "--unit=s", "--from=file:out_*.csv"},
            "'csv' reads from 'file:out_*.csv', which every one of the step's 2 ranks would read whole"},
           // issue 53: rank 1's glob would also take ranks 10 to 19's files
           {{"exec", "--command=true", "--ranks_per_node=2", "--parse=csv", "--unit=s", "--from=file:r{FANOUT_RANK}*.csv"},
            "a wildcard or digit right after {FANOUT_RANK} makes rank 1 read ranks 10 to 19's files too"},
           // local processes are no MPI job: each would be a world of its own
           {{"exec", "--command=true", "--mpi_program"},
            "asks to run an MPI program whose ranks are the step's (mpi_program), which the local launcher cannot give it"}}) {
    auto refused = fanout(args);
    EXPECT_EQ(refused.exit_code, 2) << why << refused.err;
    EXPECT_NE(refused.err.find(why), std::string::npos) << refused.err;
  }
  EXPECT_FALSE(fs::exists(d.path / "results" / "exec"));
  // Another plugin's step runs as a job of its own: it must say shared = true.
  write("mixed.toml", "[experiment]\nplugin = \"exec\"\n[[steps]]\nname = \"s\"\nplugin = \"calibration\"\nrole = \"sleep\"\n"
                      "[[steps]]\nname = \"c\"\ncommand = \"true\"\n");
  write("mpi.toml", "[experiment]\nplugin = \"exec\"\n[[steps]]\ncommand = \"true\"\nmpi_program = \"yes\"\n");
  auto mpi = fanout({"run", "mpi.toml"});
  EXPECT_EQ(mpi.exit_code, 2) << mpi.err;
  EXPECT_NE(mpi.err.find("mpi.toml:5: mpi_program must be true or false"), std::string::npos) << mpi.err;
  // The same for a file's step, refused when it is planned (exec's plan_step reads the step's settings).
  write("glob.toml", "[experiment]\nplugin = \"exec\"\n[[steps]]\nranks_per_node = 2\ncommand = \"" + probe() +
                         " 1 1\"\nparse = [{ kind = \"smartsim-timing\", from = \"file:rank_*_timing.csv\" }]\n");
  auto glob = fanout({"run", "glob.toml"});
  EXPECT_EQ(glob.exit_code, 2) << glob.err;
  EXPECT_FALSE(fs::exists(d.path / "results" / "glob"));
  EXPECT_NE(glob.err.find("which every one of the step's 2 ranks would read whole"), std::string::npos) << glob.err;
  // Issue 53: `after` naming the step itself, no step, or making a cycle: refused when planned (it would wait until
  // the wall time), exit 2, nothing written.
  for (auto& [after_a, after_b, why] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"\"a\"", "\"a\"", "step 'a': after = 'a' names this step itself"},
           {"\"c\"", "\"a\"", "step 'a': after = 'c': no step of that name in this run (steps: a, b)"},
           {"\"b\"", "\"a\"", "step 'a': after makes a cycle (a -> b -> a): each would wait for the other until the wall time"}}) {
    write("cycle.toml", "[experiment]\nplugin = \"exec\"\n[[steps]]\nname = \"a\"\nafter = " + after_a + "\ncommand = \"true\"\n"
                        "[[steps]]\nname = \"b\"\nafter = " + after_b + "\ncommand = \"true\"\n");
    auto cycle = fanout({"run", "cycle.toml", "--dry-run"});
    EXPECT_EQ(cycle.exit_code, 2) << cycle.err;
    EXPECT_NE(cycle.err.find(why), std::string::npos) << cycle.err;
  }
  EXPECT_FALSE(fs::exists(d.path / "results" / "cycle"));
  auto mixed = fanout({"run", "mixed.toml"});
  EXPECT_EQ(mixed.exit_code, 2) << mixed.err;
  EXPECT_NE(mixed.err.find("mixed.toml:3: a step of plugin calibration runs as the experiment's shared step, a job of its own: add shared = true"),
            std::string::npos) << mixed.err;
}

// Issue 52: what a user's own program gets wrong is found before anything runs (exit 2, nothing written), the
// step's variables are placeholders, a relative program after a launcher word is the submit folder's, and a
// failure has one account: a shell's 128 + N is not a signal.
TEST_F(Exec, YourOwnProgramIsCheckedBeforeAnythingRuns) {
  for (auto& [args, why] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"exec", "--command=./mm_O3 {n}", "--param", "n=[1,2]"},
            "--command: the program './mm_O3' is no runnable file: " + (d.path / "mm_O3").string() +
                " (a relative program is the submit folder's, where fanout was started) (in the permutation n=1)"},
           {{"exec"}, "no command: give --command='...'"},
           {{"exec", "--dry-run"}, "no command: give --command='...'"},
           {{"exec", "--command=mpirun -np 2 ./pingpong"}, "the program './pingpong' is no runnable file"},
           {{"exec", "--command=no_such_program_52 1"}, "the program 'no_such_program_52' is not on PATH ("},
           {{"exec", "--command=echo {FANOUT_SUBMITDIR}"}, "--command refers to {FANOUT_SUBMITDIR}, which is no parameter and no step variable"}}) {
    auto refused = fanout(args);
    EXPECT_EQ(refused.exit_code, 2) << refused.err;
    EXPECT_NE(refused.err.find(why), std::string::npos) << why << "\n" << refused.err;
    EXPECT_FALSE(fs::exists(d.path / "results")) << refused.err;
  }
  // A PATH the step sets is the one its program is looked up in; a node list only a step it comes after gives.
  fs::create_directories(d.path / "bin");
  write("bin/mytool", "#!/bin/sh\necho ok\n");
  fs::permissions(d.path / "bin" / "mytool", fs::perms::owner_all);
  auto own_path = fanout({"exec", "--dry-run", "--env", "PATH=" + (d.path / "bin").string() + ":/usr/bin:/bin", "--command=mytool"});
  EXPECT_EQ(own_path.exit_code, 0) << own_path.err;
  auto env_path = fanout({"exec", "--dry-run", "--command=env PATH=" + (d.path / "bin").string() + " mytool"});
  EXPECT_EQ(env_path.exit_code, 0) << env_path.err;
  auto nodes = fanout({"exec", "--dry-run", "--command=echo {FANOUT_DB_NODES}"});
  EXPECT_EQ(nodes.exit_code, 2) << nodes.err;
  EXPECT_NE(nodes.err.find("refers to {FANOUT_DB_NODES}, which is no parameter and no step variable (FANOUT_<STEP>_NODES names a step this one comes after)"),
            std::string::npos) << nodes.err;
  // On a cluster launcher the nodes may have what this machine lacks: a warning that names the path.
  auto cluster = fanout({"exec", "--launcher=slurm", "--dry-run", "--command=./only_on_nodes"});
  EXPECT_EQ(cluster.exit_code, 0) << cluster.err;
  EXPECT_NE(cluster.err.find("fanout: warning: --command: the program './only_on_nodes' is no runnable file: " + (d.path / "only_on_nodes").string()),
            std::string::npos) << cluster.err;
  // The dry run shows what each rank runs, the parameters filled in, a relative program made the submit folder's.
  write("tool.sh", "#!/bin/sh\npwd > \"$FANOUT_SUBMIT_DIR/ran_in.$1\"\n[ -z \"$2\" ] || echo \"$2\" > \"$FANOUT_SUBMIT_DIR/arg2\"\n");
  fs::permissions(d.path / "tool.sh", fs::perms::owner_all);
  auto dry = fanout({"exec", "--dry-run", "--command=env A=1 ./tool.sh {n}", "--param", "n=[3,4]"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("  step run runs: env A=1 " + (d.path / "tool.sh").string() + " 3\n    in <run>/run\n"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find(" 4\n"), std::string::npos) << dry.out;
  // ... and runs so: env finds ./tool.sh in the submit folder; cwd=submit runs it there; {FANOUT_SUBMIT_DIR} is filled.
  auto ran = fanout({"exec", "--exp_name=own", "--command=env A=1 ./tool.sh {n}", "--param", "n=[3,4]"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(read_file(d.path / "ran_in.3"), (run_dir_of("own", "3") / "run").string() + "\n");
  // The CSV files: a repeat column, the sweep's parameters, and none of exec's settings that held one value
  // (command, parse, metric, unit, warmup, ...: FANOUT_PARAM_SETTING); they stay in the database and run.toml.
  for (const char* file : {"runs.csv", "samples.csv", "statistics.csv", "across_runs.csv"}) {
    const std::string csv = read_file(d.path / "results" / "own" / "csv" / file);
    const std::string header = csv.substr(0, csv.find('\n'));
    EXPECT_EQ(header.rfind(std::string(file) == "across_runs.csv" ? "nodes,ranks_per_node,n," : "session,status,repeat,nodes,ranks_per_node,n,", 0), 0u)
        << file << ": " << header;
    // (metric, unit and warmup are also files' own columns: the prefix above shows they are no parameter columns)
    for (const char* setting : {"command", "parse", "better", "label", "from", "env", "cwd", "repeat_command", "shell"})
      EXPECT_EQ(("," + header + ",").find(std::string(",") + setting + ","), std::string::npos) << file << " has " << setting << ": " << header;
    EXPECT_EQ(header.find("param."), std::string::npos) << file << ": " << header;
  }
  EXPECT_NE(read_file(run_dir_of("own", "3") / "run.toml").find("command = "), std::string::npos) << "run.toml keeps every setting";
  // A setting that varies is a column like any parameter.
  auto two = fanout({"exec", "--exp_name=two", "--command=[/bin/true,true]"});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  const std::string two_csv = read_file(d.path / "results" / "two" / "csv" / "runs.csv");
  EXPECT_EQ(two_csv.rfind("session,status,repeat,command,nodes,ranks_per_node,", 0), 0u) << two_csv.substr(0, 200);
  auto rep = fanout({"exec", "--exp_name=rep", "--repeat=2", "--command=true"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  const std::string rep_csv = read_file(d.path / "results" / "rep" / "csv" / "runs.csv");
  EXPECT_NE(rep_csv.find(",COMPLETED,1,"), std::string::npos) << rep_csv;
  EXPECT_NE(rep_csv.find(",COMPLETED,2,"), std::string::npos) << rep_csv;
  auto here = fanout({"exec", "--exp_name=here", "--cwd=submit", "--command=./tool.sh here {FANOUT_SUBMIT_DIR}/x"});
  ASSERT_EQ(here.exit_code, 0) << here.err;
  EXPECT_EQ(read_file(d.path / "ran_in.here"), d.path.string() + "\n");
  EXPECT_EQ(read_file(d.path / "arg2"), d.path.string() + "/x\n");
  // One account of each failure: a shell's exit 132 is its child's SIGILL, not a signal of its own; a real signal is
  // named as one. Each reason printed once (live), the recap names the run and its logs.
  auto ill = fanout({"exec", "--exp_name=ill", "--command=sh -c 'exit 132'"});
  EXPECT_EQ(ill.exit_code, 1) << ill.err;
  const std::string why132 = "the command exited with status 132 (128 + SIGILL: a process it started died of SIGILL) (invocation 1, run in " +
                             (run_dir("ill") / "run").string() + ")";
  EXPECT_NE(ill.err.find(why132), std::string::npos) << ill.err;
  EXPECT_EQ(ill.err.find(why132), ill.err.rfind(why132)) << "printed once: " << ill.err;
  EXPECT_EQ(ill.err.find("killed"), std::string::npos) << ill.err;
  EXPECT_EQ(one("ill", "SELECT exit_code || ' ' || signal FROM runs"), "132 0");
  // Issue 53 LOW: a missing cwd is said as one; a newline in a repeatable flag's value is refused.
  auto nocwd = fanout({"exec", "--exp_name=nocwd", "--command=pwd", "--cwd=nosuchdir"});
  EXPECT_NE(nocwd.err.find("the folder the command is to start in, " + (d.path / "nosuchdir").string() + ", is no folder (cwd = 'nosuchdir')"),
            std::string::npos) << nocwd.err;
  auto envnl = fanout({"exec", "--exp_name=envnl", "--command=true", "--env", "X=a\nY=1"});
  EXPECT_EQ(envnl.exit_code, 2) << envnl.err;
  EXPECT_NE(envnl.err.find("--env 'X=a\\nY=1': a value of a repeatable flag may not hold a newline"), std::string::npos) << envnl.err;
  auto segv = fanout({"exec", "--exp_name=segv", "--command=sh -c 'kill -SEGV $$'"});
  EXPECT_NE(segv.err.find("the command was killed by SIGSEGV (signal 11)"), std::string::npos) << segv.err;
}

// Found by review: a program that leaves a child holding its pipes ends when it exits (the child is stopped, the
// run does not wait for it); a result printed only by a warmup invocation fails; a file an earlier invocation
// wrote is not read again as this one's.
TEST_F(Exec, LeftoversAndStaleOutputDoNotCount) {
  auto bg = fanout({"exec", "--exp_name=bg", "--shell=true", "--command=sleep 31.4159 & echo started"});
  ASSERT_EQ(bg.exit_code, 0) << bg.err;
  EXPECT_EQ(one("bg", "SELECT count(*) FROM samples WHERE metric='wall_time' AND warmup=0"), "1");
  // Signalled before the run ended; a process signalled a moment ago may still be on its way out.
  const auto left = test::processes_left("sleep 31.4159", 10);
  EXPECT_TRUE(left.empty()) << "the child it left behind was stopped; left: " << (left.empty() ? "" : left.front());
  auto warm = fanout({"exec", "--exp_name=warm", "--shell=true", "--warmup=1", "--command='[ -e once ] || { touch once; echo t=5ms; }'",
                      "--parse", "regex:t=(?<value>\\d+)ms", "--metric=t", "--unit=ms"});
  EXPECT_NE(warm.exit_code, 0);
  EXPECT_NE(warm.err.find("no sample matched"), std::string::npos) << warm.err;
  auto stale = fanout({"exec", "--exp_name=stale", "--shell=true", "--repeat_command=3", "--command=test -e out.csv || printf 'x\\n1\\n' > out.csv",
                       "--parse=csv", "--unit=s", "--from=file:out.csv"});
  ASSERT_EQ(stale.exit_code, 0) << stale.err;
  EXPECT_EQ(one("stale", "SELECT count(*) FROM samples WHERE metric='x'"), "1") << "read once: the invocation that wrote it";
  // Issue 53: `file:*` in the step's folder reads what the program wrote, not fanout's own logs of its output.
  auto star = fanout({"exec", "--exp_name=star", "--shell=true", "--command=echo x > out.csv; echo 1 >> out.csv; echo y; echo 2", "--parse=csv",
                      "--unit=s", "--from=file:*"});
  ASSERT_EQ(star.exit_code, 0) << star.err;
  EXPECT_EQ(one("star", "SELECT group_concat(metric || '=' || value) FROM samples WHERE warmup=0 AND metric != 'wall_time' "
                      "AND metric NOT LIKE 'resource.%'"), "x=1.0");
  // Issue 53: a file parser reads regular files only: a FIFO would hang the run, a link to /dev/zero never end.
  for (auto& [exp, make] : std::vector<std::pair<std::string, std::string>>{{"fifo", "mkfifo out.csv"}, {"zero", "ln -s /dev/zero out.csv"}}) {
    auto odd = fanout({"exec", "--exp_name=" + exp, "--shell=true", "--command=" + make, "--parse=csv", "--unit=s", "--from=file:out.csv"}, 120);
    EXPECT_EQ(odd.exit_code, 1) << odd.err;
    EXPECT_NE(odd.err.find("out.csv, which is not a regular file (a FIFO, a device or a socket): not read"), std::string::npos) << odd.err;
    EXPECT_EQ(one(exp, "SELECT status FROM runs"), "FAILED");
  }
}

// Two steps of one run: a Redis server as a service, ready once its port answers, publishing its address; a client
// step that starts after it, gets the address, and measures; the server is stopped when the client is done.
TEST_F(Exec, AServiceStepIsReadyBeforeItsClientsAndStoppedAfterThem) {
  const int port = test::free_tcp_port();
  write("kv.toml", "[experiment]\nplugin = \"exec\"\nname = \"kv\"\n[parameters]\nport = " + std::to_string(port) + "\n"
                   "[[steps]]\nname = \"db\"\nservice = true\nready = \"port:{port}\"\n"
                   "command = \"redis-server --port {port} --bind 127.0.0.1 --save '' --appendonly no\"\n"
                   "publish = { DB_ADDR = \"127.0.0.1:{port}\" }\n"
                   "[[steps]]\nname = \"client\"\nafter = \"db\"\nranks_per_node = 2\nshell = true\n"
                   "command = \"env > env.$FANOUT_RANK; redis-benchmark -h ${DB_ADDR%:*} -p ${DB_ADDR#*:} -n 500 -t set,get -q --csv\"\n"
                   "[[steps.parse]]\nkind = \"csv\"\ncolumns = \"rps\"\nunit = \"requests/s\"\n");
  auto r = fanout({"run", "kv.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(one("kv", "SELECT count(*) FROM samples WHERE role='client' AND metric='rps' AND value > 0"), "4");  // set, get x 2 ranks
  auto env = env_file(run_dir("kv") / "client" / "env.0");
  EXPECT_EQ(env["DB_ADDR"], "127.0.0.1:" + std::to_string(port));
  EXPECT_FALSE(env["FANOUT_DB_NODES"].empty());
  // Stopped: nothing listens on the port any more.
  EXPECT_NE(test::run_command({"/usr/bin/redis-cli", "-p", std::to_string(port), "ping"}, d.path).out, "PONG\n");
  // A service that ends before its clients are done fails the run, and the client is told instead of waiting.
  write("dies.toml", "[experiment]\nplugin = \"exec\"\nname = \"dies\"\n"
                     "[[steps]]\nname = \"db\"\nservice = true\ncommand = \"sh -c 'echo going >&2; exit 4'\"\nready = \"file:never\"\n"
                     "[[steps]]\nname = \"client\"\nafter = \"db\"\ncommand = \"true\"\n");
  auto dies = fanout({"run", "dies.toml"});
  EXPECT_NE(dies.exit_code, 0);
  EXPECT_NE(dies.err.find("the service exited with status 4 before the measuring steps were done; its stderr ends: going"), std::string::npos) << dies.err;
}

// The README's kv.toml, as written there (its port made free): redis-benchmark's csv records become one metric per
// test (label = "test"), each column in its own unit, so SET and GET have medians of their own.
TEST_F(Exec, TheReadmesKvExampleKeepsSetAndGetApart) {
  const std::string readme = read_file(fs::path(FANOUT_SOURCE_DIR) / "README.md");
  const size_t mark = readme.find("<!-- doc-test: file kv.toml -->");
  ASSERT_NE(mark, std::string::npos);
  const size_t begin = readme.find("```toml\n", mark) + 8, end = readme.find("```", begin);
  std::string toml = readme.substr(begin, end - begin);
  const std::string port = std::to_string(test::free_tcp_port());
  for (size_t at; (at = toml.find("26893")) != std::string::npos;) toml.replace(at, 5, port);
  write("kv.toml", toml);
  auto r = fanout({"run", "kv.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 2 sizes x 2 ranks: 4 samples of each; no metric mixes the tests.
  EXPECT_EQ(one("kv", "SELECT group_concat(metric || ' ' || unit || ' ' || n, ', ') FROM (SELECT metric, unit, count(*) AS n FROM samples "
                      "WHERE role='client' AND metric NOT LIKE 'resource.%' GROUP BY metric, unit ORDER BY metric)"),
            "GET.avg_latency_ms ms 4, GET.rps requests/s 4, SET.avg_latency_ms ms 4, SET.rps requests/s 4");
}

// A Google Benchmark program (Debian's libbenchmark) read from its JSON, each benchmark in its own time unit.
TEST_F(Exec, AGoogleBenchmarkProgramWithItsTimeUnits) {
  auto r = fanout({"exec", "--exp_name=gb", "--command=" + (test::build_dir() / "tests" / "exec_gbench").string() +
                   " --benchmark_format=json --benchmark_repetitions=3 --benchmark_min_time=0.01", "--parse=google-benchmark"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(one("gb", "SELECT count(*) || ' ' || unit FROM samples WHERE metric='BM_copy/4096.real_time'"), "3 us");
  EXPECT_EQ(one("gb", "SELECT count(*) || ' ' || unit FROM samples WHERE metric='BM_add.cpu_time'"), "3 ns");
  EXPECT_EQ(one("gb", "SELECT count(*) || ' ' || unit FROM samples WHERE metric='BM_copy/4096.bytes_per_second' AND value > 0"), "3 bytes/s");
  EXPECT_EQ(one("gb", "SELECT count(*) FROM samples WHERE metric LIKE '%mean%' OR metric LIKE '%median%'"), "0");
}

#ifdef FANOUT_HAVE_TENSOR_CLIENT
// SmartSim-Scaling's throughput client (a stand-in written here on the C tensor client, writing rank_<r>_timing.csv
// line for line as throughput_scaling.cpp does) run by an exec step after the smartsim plugin's db step, which runs
// as throughput_standard's does: a service job reused by the runs that agree on its parameters, publishing SSDB,
// SR_DB_TYPE (as SmartSim sets them) and SR_DB_PASSWORD. The samples are what the files hold, and
// process_scaling_results plots them as throughput_standard's.
TEST_F(Exec, SmartSimScalingsThroughputClientAfterTheDatabaseStep) {
  write("tp.toml", "[experiment]\nplugin = \"exec\"\nname = \"tp\"\n"
                   "[parameters]\ndb_nodes = 1\ndb_cpus = 1\nnet_ifname = \"lo\"\nclients = [1, 2]\ntensor_bytes = [1024, 65536]\n"
                   "[[steps]]\nname = \"db\"\nplugin = \"smartsim\"\nrole = \"db\"\nshared = true\nnodes = \"{db_nodes}\"\ncpus_per_task = \"{db_cpus}\"\n"
                   "[[steps]]\nname = \"client\"\nafter = \"db\"\nranks_per_node = \"{clients}\"\n"
                   "command = \"" + (test::build_dir() / "tests" / "throughput_standin").string() + " {tensor_bytes}\"\n"
                   "env = { SS_ITERATIONS = \"20\" }\n"
                   "parse = [{ kind = \"smartsim-timing\", from = \"file:rank_{FANOUT_RANK}_timing.csv\" }]\n");
  auto r = fanout({"run", "tp.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Four runs and one database service for them all (they agree on db_nodes, db_cpus, net_ifname).
  EXPECT_EQ(one("tp", "SELECT count(*) FROM runs WHERE status='COMPLETED'"), "5");
  EXPECT_EQ(one("tp", "SELECT count(*) FROM runs WHERE session LIKE 'db-service-%'"), "1");
  EXPECT_EQ(one("tp", "SELECT count(DISTINCT value) FROM provenance WHERE key='service'"), "1");
  // Every line of every rank file is a sample with the same value, in file order per function.
  for (auto& run : query("tp", "SELECT id, path FROM runs WHERE session NOT LIKE 'db-service-%'")) {
    for (auto& entry : fs::directory_iterator(fs::path(run[1]) / "client")) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("rank_", 0) != 0) continue;
      const std::string rank = name.substr(5, name.find('_', 5) - 5);
      std::vector<std::string> expected;
      std::istringstream in(read_file(entry.path()));
      for (std::string line; std::getline(in, line);) expected.push_back(line.substr(line.find(',') + 1));
      std::vector<std::string> stored;
      for (auto& row : query("tp", "SELECT metric, value FROM samples WHERE run_id=" + run[0] + " AND rank=" + rank +
                                     " AND metric NOT LIKE 'resource.%' ORDER BY t_start, rowid"))
        stored.push_back(row[0] + "," + row[1]);
      ASSERT_EQ(stored.size(), expected.size()) << entry.path();
      EXPECT_EQ(std::count_if(expected.begin(), expected.end(), [](auto& l) { return l.rfind("put_tensor,", 0) == 0; }), 20);
      // Stored as doubles: compared as the file's %g text reads back.
      std::multiset<std::string> in_file(expected.begin(), expected.end()), in_db;
      for (auto& s : stored) {
        const auto comma = s.find(',');
        char buf[64];
        std::snprintf(buf, sizeof buf, "%g", std::stod(s.substr(comma + 1)));
        in_db.insert(s.substr(0, comma + 1) + buf);
      }
      EXPECT_EQ(in_db, in_file) << entry.path();
    }
  }
  auto p = fanout({"process_scaling_results", "results/tp"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_TRUE(fs::exists(d.path / "results/tp/processed/plots/aggregate_bandwidth_client_put_tensor.png") ||
              fs::exists(d.path / "results/tp/processed/aggregate_bandwidth_client_put_tensor.png"))
      << "the aggregate bandwidth plot throughput_standard's put_tensor gets";
}
#endif

}  // namespace
