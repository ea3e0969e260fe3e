// The exec plugin's parsers, settings and command words, each on the output forms their programs really write.
#include <gtest/gtest.h>

#include "fanout_placeholders.hpp"
#include "parsers.h"
#include "step_config.h"

namespace {

using exec::ParsedSample;
using exec::ParseSpec;

std::vector<ParsedSample> parse(const ParseSpec& spec, const std::vector<std::string>& lines) {
  auto p = exec::make_parser(spec);
  std::vector<ParsedSample> out;
  for (auto& l : lines) p->line(l, out);
  p->finish(out);
  return out;
}

ParseSpec spec(const std::string& text, const std::string& metric = "", const std::string& unit = "") {
  ParseSpec s = exec::parse_spec_text(text);
  s.metric = metric, s.unit = unit;
  return s;
}

TEST(ExecParsers, RegexEveryMatchIsASampleWithItsNamedGroups) {
  auto got = parse(spec(R"(regex:(?<metric>\w+)=(?<value>[0-9.eE+-]+)\s*(?<unit>ms|us))"), {"put=1.5ms get=2e-1 us", "nothing here"});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].metric, "put");
  EXPECT_DOUBLE_EQ(got[0].value, 1.5);
  EXPECT_EQ(got[0].unit, "ms");
  EXPECT_EQ(got[1].metric, "get");
  EXPECT_DOUBLE_EQ(got[1].value, 0.2);
  EXPECT_EQ(got[1].unit, "us");
  auto numbered = parse(spec(R"(regex:iter (?<iteration>\d+): (?<value>\d+))", "lat", "ns"), {"iter 7: 40"});
  ASSERT_EQ(numbered.size(), 1u);
  EXPECT_EQ(numbered[0].iteration, 7);
  EXPECT_EQ(numbered[0].metric, "lat");
  EXPECT_EQ(numbered[0].unit, "ns");
}

TEST(ExecParsers, RegexRefusesWhatCannotBeASample) {
  EXPECT_THROW(exec::make_parser(spec("regex:time: ([0-9]+)", "t", "s")), exec::ParseError);       // no value group
  EXPECT_THROW(exec::make_parser(spec("regex:(?<value>\\d+)", "t")), exec::ParseError);            // no unit
  EXPECT_THROW(exec::make_parser(spec("regex:(?<value>\\d+", "t", "s")), exec::ParseError);        // does not compile
  EXPECT_THROW(parse(spec("regex:v=(?<value>\\S+)", "t", "s"), {"v=abc"}), exec::ParseError);       // not a number
  EXPECT_THROW(exec::parse_spec_text("yaml"), exec::ParseError);
  // Settings a parser would not use are refused, never dropped.
  EXPECT_THROW(exec::make_parser(spec("time", "", "ms")), exec::ParseError);
  EXPECT_THROW(exec::make_parser(spec("google-benchmark", "t")), exec::ParseError);
  EXPECT_THROW(exec::make_parser(spec("smartsim-timing", "", "s")), exec::ParseError);
  EXPECT_EQ(exec::make_parser(spec("time", "elapsed", "s")), nullptr);
  // Issue 53: a line PCRE2 gives up on (its match limit) is an error of that line, never a silent "no sample".
  try {
    parse(spec("regex:^(?<value>(\\d+)+)$", "t", "s"), {std::string(40, '1') + "x"});
    ADD_FAILURE() << "a match limit passed as no match";
  } catch (const exec::ParseError& e) {
    EXPECT_NE(std::string(e.what()).find("match limit"), std::string::npos) << e.what();
  }
}

// Issue 52: a csv column names each record's metric (redis-benchmark's "test"), and each chosen column may carry
// its own unit.
TEST(ExecParsers, CsvLabelAndPerColumnUnits) {
  const std::vector<std::string> out = {R"("test","rps","avg_latency_ms")", R"("SET","51282.05","0.888")", R"("GET","40000","1.5")"};
  exec::ParseSpec s = spec("csv:rps:requests/s,avg_latency_ms:ms");
  s.label = "test";
  auto got = parse(s, out);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].metric, "SET.rps");
  EXPECT_EQ(got[0].unit, "requests/s");
  EXPECT_EQ(got[1].metric, "SET.avg_latency_ms");
  EXPECT_EQ(got[1].unit, "ms");
  EXPECT_EQ(got[3].metric, "GET.avg_latency_ms");
  EXPECT_DOUBLE_EQ(got[3].value, 1.5);
  exec::ParseSpec one = spec("csv:rps", "", "requests/s");
  one.label = "test";
  auto rps = parse(one, out);
  ASSERT_EQ(rps.size(), 2u);
  EXPECT_EQ(rps[0].metric, "SET");
  EXPECT_EQ(rps[1].metric, "GET");
  exec::ParseSpec missing = spec("csv:rps", "", "requests/s");
  missing.label = "name";
  EXPECT_THROW(parse(missing, out), exec::ParseError);  // no such label column
  EXPECT_THROW(exec::make_parser(spec("csv:rps,avg_latency_ms:ms")), exec::ParseError);  // rps has no unit
}

TEST(ExecParsers, CsvNeedsItsHeaderAndTakesNumericColumns) {
  // redis-benchmark --csv, as it prints it: quoted header and fields.
  const std::vector<std::string> out = {R"("test","rps","avg_latency_ms")", R"("SET","51282.05","0.888")",
                                        R"("test","rps","avg_latency_ms")", R"("SET","40000","1.5")"};
  auto all = parse(spec("csv", "", "x"), out);
  ASSERT_EQ(all.size(), 4u);  // rps and avg_latency_ms of two records; "test" is not a number; the repeated header skipped
  EXPECT_EQ(all[0].metric, "rps");
  EXPECT_DOUBLE_EQ(all[0].value, 51282.05);
  auto rps = parse(spec("csv:rps", "set_rate", "requests/s"), out);
  ASSERT_EQ(rps.size(), 2u);
  EXPECT_EQ(rps[1].metric, "set_rate");
  EXPECT_DOUBLE_EQ(rps[1].value, 40000);
  auto numbered = parse(spec("csv:seconds", "", "s"), {"iteration,seconds", "3,0.5"});
  EXPECT_EQ(numbered.at(0).iteration, 3);
  EXPECT_THROW(parse(spec("csv:nope", "", "s"), {"a,b"}), exec::ParseError);
  EXPECT_THROW(parse(spec("csv:a", "", "s"), {"a,b", "1"}), exec::ParseError);          // a short record
  EXPECT_THROW(parse(spec("csv:a", "", "s"), {"a,b", "x,1"}), exec::ParseError);        // a chosen column not a number
  EXPECT_THROW(exec::make_parser(spec("csv")), exec::ParseError);                       // no unit
}

TEST(ExecParsers, JsonlTakesSampleObjectsAndNumericFields) {
  auto got = parse(spec("jsonl", "", "s"), {"starting...", R"({"metric":"ops","value":12,"unit":"ops/s","iteration":4})",
                                            R"({"latency":0.5,"name":"x","iteration":5})"});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].metric, "ops");
  EXPECT_EQ(got[0].unit, "ops/s");
  EXPECT_EQ(got[0].iteration, 4);
  EXPECT_EQ(got[1].metric, "latency");
  EXPECT_EQ(got[1].unit, "s");
  EXPECT_THROW(parse(spec("jsonl", "", "s"), {"{not json"}), exec::ParseError);
  EXPECT_THROW(parse(spec("jsonl"), {R"({"latency":1})"}), exec::ParseError);  // no unit anywhere
  // Found by the fuzzer: an empty metric was a sample of no name; a field of no name is skipped.
  EXPECT_THROW(parse(spec("jsonl", "", "s"), {R"({"metric":"","value":1})"}), exec::ParseError);
  EXPECT_EQ(parse(spec("jsonl", "", "s"), {R"({"":1,"b":2})"}).size(), 1u);
}

TEST(ExecParsers, GoogleBenchmarkIterationRunsWithTheirTimeUnit) {
  // The shape of libbenchmark 1.7's --benchmark_format=json, repetitions and aggregates included.
  const std::vector<std::string> doc = {
      "{", R"("context": {"date": "2026-11-27", "library_build_type": "release"},)", R"("benchmarks": [)",
      R"({"name": "BM_copy/4096", "run_type": "iteration", "repetition_index": 0, "iterations": 10, "real_time": 1.5, "cpu_time": 1.4, "time_unit": "us", "bytes_per_second": 2.5e9},)",
      R"({"name": "BM_copy/4096", "run_type": "iteration", "repetition_index": 1, "iterations": 10, "real_time": 1.7, "cpu_time": 1.6, "time_unit": "us", "bytes_per_second": 2.4e9},)",
      R"({"name": "BM_copy/4096_mean", "run_type": "aggregate", "aggregate_name": "mean", "real_time": 1.6, "cpu_time": 1.5, "time_unit": "us"})",
      "]", "}"};
  auto got = parse(spec("google-benchmark"), doc);
  ASSERT_EQ(got.size(), 6u);  // 2 repetitions x (real, cpu, bytes/s); the mean is ours to compute
  EXPECT_EQ(got[0].metric, "BM_copy/4096.real_time");
  EXPECT_EQ(got[0].unit, "us");
  EXPECT_EQ(got[0].iteration, 0);
  EXPECT_EQ(got[1].metric, "BM_copy/4096.cpu_time");
  EXPECT_EQ(got[2].unit, "bytes/s");
  EXPECT_DOUBLE_EQ(got[3].value, 1.7);
  EXPECT_EQ(got[3].iteration, 1);
  EXPECT_THROW(parse(spec("google-benchmark"), {"{\"x\": 1}"}), exec::ParseError);
}

TEST(ExecParsers, SmartSimTimingReadsRankFilesAsTheImporterDoes) {
  auto got = parse(spec("smartsim-timing"), {"0,client(),0.0123", "0,put_tensor,1.5e-05", "0,put_tensor,2e-05", "", "0,main(),3"});
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].metric, "client()");
  EXPECT_EQ(got[0].unit, "s");
  EXPECT_EQ(got[2].metric, "put_tensor");
  EXPECT_EQ(got[2].iteration, 1);  // numbered per function
  EXPECT_DOUBLE_EQ(got[2].value, 2e-05);
  EXPECT_THROW(parse(spec("smartsim-timing"), {"rank,function,seconds"}), exec::ParseError);
}

TEST(ExecCommand, WordsSplitAsShDoesWithoutExpansion) {
  EXPECT_EQ(exec::split_words(R"(./b --x 'a b' "c \"d\" $HOME" e\ f)"),
            (std::vector<std::string>{"./b", "--x", "a b", "c \"d\" $HOME", "e f"}));
  EXPECT_THROW(exec::split_words("echo 'open"), std::runtime_error);
  EXPECT_EQ(exec::split_words(exec::shell_quote("it's; rm -rf /")), (std::vector<std::string>{"it's; rm -rf /"}));
}

TEST(ExecCommand, PlaceholdersNameParametersAndLeaveRegexBracesAlone) {
  EXPECT_EQ(fanout_sdk::placeholder_names("./b --size {size} {FANOUT_RANK} x{3} {2,5} {{literal}}"),
            (std::vector<std::string>{"size", "FANOUT_RANK"}));
  auto filled = fanout_sdk::fill_placeholders("{a}-{{b}}-{c}", [](const std::string& n) -> std::optional<std::string> {
    if (n == "a") return "1";
    return std::nullopt;
  });
  EXPECT_FALSE(filled);
  std::string unknown;
  fanout_sdk::fill_placeholders("{a}-{c}", [](const std::string& n) { return n == "a" ? std::optional<std::string>("1") : std::nullopt; }, &unknown);
  EXPECT_EQ(unknown, "c");
  EXPECT_EQ(*fanout_sdk::fill_placeholders("{a}-{{b}}", [](const std::string&) { return std::optional<std::string>("1"); }), "1-{b}");
}

TEST(ExecSettings, FileSettingsOverrideTheFlagsAndAreChecked) {
  auto params = [](const char* n) -> std::string {
    std::string k = n;
    if (k == "command") return "./a";
    if (k == "parse") return "time";
    if (k == "warmup" || k == "repeat_command") return "1";
    if (k == "from") return "stdout";
    return "";
  };
  exec::StepConfig base = exec::config_from_params(params);
  EXPECT_EQ(base.parsers.size(), 1u);
  auto c = exec::config_from_settings(base, R"J({"command":["./b","x y"],"env":{"A":"{size}"},"after":"db","parse":[{"kind":"regex","pattern":"(?<value>\\d+)","unit":"s","metric":"m"}]})J");
  EXPECT_EQ(c.words, (std::vector<std::string>{"./b", "x y"}));
  EXPECT_EQ(c.after, (std::vector<std::string>{"db"}));
  ASSERT_EQ(c.parsers.size(), 1u);
  EXPECT_EQ(c.parsers[0].kind, "regex");
  EXPECT_NO_THROW(exec::validate(c));
  EXPECT_THROW(exec::config_from_settings(base, R"({"parse":[{"kind":"regex","colour":"red"}]})"), std::runtime_error);
  EXPECT_THROW(exec::validate(exec::config_from_settings(base, R"({"env":{"1A":"x"}})")), std::runtime_error);
  EXPECT_THROW(exec::validate(exec::config_from_settings(base, R"({"ready":"socket:9"})")), std::runtime_error);
  EXPECT_THROW(exec::validate(exec::config_from_settings(base, R"({"service":true,"parse":"time"})")), std::runtime_error);
}

}  // namespace

// Issue 52: the program after launcher words, as common command lines write them (the plan checks it and makes a
// relative one the submit folder's).
TEST(ExecCommand, TheProgramAfterLauncherWords) {
  auto program = [](const std::string& line) {
    const auto words = exec::split_words(line);
    const size_t at = exec::program_word(words);
    return at < words.size() ? words[at] : std::string("<none>");
  };
  for (const char* line : {"./a 1", "mpirun -np 2 ./a", "mpirun --np 4 --map-by core --bind-to none ./a", "mpirun -np 2 --mca btl self,tcp ./a",
                           "mpiexec -n 4 -ppn 2 ./a", "srun -n 4 ./a", "srun --ntasks 4 --cpus-per-task 2 ./a", "srun -n4 --mpi=pmix ./a",
                           "env -u X A=1 B=2 ./a", "env A=1 taskset -c 0-3 ./a", "taskset 0x3 ./a", "numactl --cpunodebind=0 -m 0 ./a",
                           "timeout -s INT 10 ./a", "nice -n 5 ./a", "stdbuf -oL ./a", "/usr/bin/time -v ./a", "perf stat -e cycles ./a",
                           "perf record -F 99 --call-graph dwarf ./a", "chrt -f 10 ./a", "env -- ./a"})
    EXPECT_EQ(program(line), "./a") << line;
  EXPECT_EQ(program("mpirun -np 2"), "<none>");
}

// Issue 53: under shell = true a placeholder where bash evaluates a value again is refused.
TEST(ExecCommand, ShellPlaceholdersWhereBashEvaluatesAreRefused) {
  for (const char* command : {"echo $(( {n} * 2 ))", "(( {n} > 1 )) && echo big", "[[ {n} -eq 1 ]]", "echo ${x:{n}}"}) {
    exec::StepConfig c;
    c.shell = true;
    c.command = command;
    c.parsers.push_back(exec::parse_spec_text("time"));
    try {
      exec::validate(c);
      ADD_FAILURE() << command << " was accepted";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("{n} sits inside $(( )), (( )), [[ ]] or ${ }"), std::string::npos) << e.what();
    }
  }
  exec::StepConfig ok;
  ok.shell = true;
  ok.command = "N={n}; echo $((N * 2)) $HOME {n} # {n}";  // ${HOME} would be a placeholder {HOME}: $HOME or ${{HOME}}
  ok.parsers.push_back(exec::parse_spec_text("time"));
  EXPECT_NO_THROW(exec::validate(ok));
  std::vector<std::string> used;
  EXPECT_EQ(exec::shell_script(ok.command, &used), "N=\"${FANOUT_P_n}\"; echo $((N * 2)) $HOME \"${FANOUT_P_n}\" # \"${FANOUT_P_n}\"");
  EXPECT_EQ(used, std::vector<std::string>{"n"});
}
