// Issue 50: the verdict of `fanout results compare` on programs that print fixed figures (no timing): thresholds,
// small n, zero and non-finite baselines, declared directions, many figures, and the size of a change. Each case is
// two real sweeps of `fanout exec` on the local launcher, then a real compare, as a CI job runs them.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/files.h"
#include "common/text.h"
#include "tests/test_util.h"

using namespace fanout;
namespace fs = std::filesystem;

namespace {

class Verdict : public ::testing::Test {
 protected:
  test::TempDir d;
  test::CommandResult fanout(std::vector<std::string> args) { return test::run_fanout(d.path, args); }
  // A sweep of `repeat` runs of a program printing "v=<value>", read as metric t in `unit`; what echo costs
  // (resource.*) is left out: the verdicts here are on figures known exactly.
  void sweep(const std::string& name, const std::string& value, int repeat, const std::string& unit = "ms",
             std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"exec", "--exp_name=" + name, "--command=/bin/echo v={v}", "--param", "v=" + value,
                                  "--parse", "regex:v=(?<value>\\S+)", "--metric=t", "--unit=" + unit,
                                  "--repeat=" + std::to_string(repeat), "--resources=off"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = fanout(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  test::CommandResult compare(const std::string& a, const std::string& b, std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"results", "compare", "results/" + a, "results/" + b, "--ignore=v"};
    args.insert(args.end(), extra.begin(), extra.end());
    return fanout(args);
  }
  // The CSV row of metric m (compare --format=csv), as column -> value.
  static std::map<std::string, std::string> csv_row(const std::string& csv, const std::string& metric) {
    std::istringstream in(csv);
    std::string header, line;
    std::getline(in, header);
    const auto cols = split(header, ',');
    while (std::getline(in, line)) {
      const auto v = split(line, ',');  // no field of these rows holds a comma
      std::map<std::string, std::string> row;
      for (size_t i = 0; i < cols.size() && i < v.size(); ++i) row[cols[i]] = v[i];
      if (row["metric"] == metric) return row;
    }
    return {};
  }
};

// 100 ms against 102 ms, five runs a side: the test finds it (every run of B above every run of A), the 5 % threshold
// keeps it "unchanged"; the same data at --threshold=1 is a regression, so the threshold is what decided.
TEST_F(Verdict, ASignificantChangeUnderTheThresholdIsUnchanged) {
  sweep("a", "100", 5);
  sweep("b", "102", 5);
  auto r = compare("a", "b");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("0 regression(s), 0 improvement(s), 1 unchanged"), std::string::npos) << r.out;
  // What all runs share, said once: exec's settings left empty (env, cwd, label) say nothing and are left out.
  EXPECT_NE(r.out.find("all runs: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" metric=t "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("env=\"\""), std::string::npos) << r.out;
  auto csv = compare("a", "b", {"--format=csv"});
  auto row = csv_row(csv.out, "t");
  EXPECT_EQ(row["verdict"], "unchanged");
  EXPECT_LT(std::stod(row["p_adjusted"]), 0.05) << csv.out << ": significant, under the threshold";
  EXPECT_EQ(row["better"], "lower");
  EXPECT_EQ(row["better_from"], "unit");
  EXPECT_EQ(row["shift"], "2");
  EXPECT_EQ(row["shift_pct_low"], "2");
  auto tight = compare("a", "b", {"--threshold=1"});
  EXPECT_EQ(tight.exit_code, 1) << tight.out;
  // Its size: the Hodges-Lehmann shift of the run medians in percent, with its interval (a point: fixed figures).
  EXPECT_NE(tight.out.find("+2.0 % [+2.0 %, +2.0 %]"), std::string::npos) << tight.out;
  // Options out of range are refused, naming the option.
  for (auto bad : {std::vector<std::string>{"--threshold=-1"}, {"--threshold=5000"}, {"--alpha=0.9"}, {"--abs_threshold=-2ms"},
                   {"--abs_threshold=fast"}, {"--correction=bonferroni"}}) {
    auto refused = compare("a", "b", bad);
    EXPECT_EQ(refused.exit_code, 2) << bad[0] << ": " << refused.out;
    const std::string flag = bad[0].substr(0, bad[0].find('='));
    EXPECT_NE(refused.err.find(flag), std::string::npos) << refused.err;
  }
}

// Three runs a side cannot reach alpha 0.05 (the smallest two-sided p is 2/20): undecided, exit 3.
TEST_F(Verdict, ThreeRunsASideAreUndecided) {
  sweep("a", "100", 3);
  sweep("b", "150", 3);
  auto r = compare("a", "b");
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_NE(r.out.find("undecided"), std::string::npos) << r.out;
}

// 0 ms against 5 ms: a median of 0 has no percent; the change is said in the unit and judged by the test and the
// absolute threshold (0 when none is given).
TEST_F(Verdict, AChangeFromZeroIsJudgedInTheUnit) {
  sweep("a", "0", 5);
  sweep("b", "5", 5);
  auto r = compare("a", "b");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("regression"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("+5 ms from 0 [+5, +5]"), std::string::npos) << r.out;
  EXPECT_EQ(compare("a", "b", {"--abs_threshold=10ms"}).exit_code, 0) << "5 ms is under an absolute threshold of 10 ms";
  EXPECT_EQ(compare("a", "b", {"--abs_threshold=0.01s"}).exit_code, 0) << "0.01 s is 10 ms";
  EXPECT_EQ(compare("a", "b", {"--abs_threshold=t=4ms"}).exit_code, 1) << "t's own threshold of 4 ms: 5 ms is beyond it";
  EXPECT_EQ(compare("a", "b", {"--abs_threshold=other=10ms"}).exit_code, 1) << "a threshold of another metric does not apply";
}

// A benchmark whose runs land in one of two states (a copy at a cache's edge): A's runs 4 x 100 and 6 x 110 ms, B's
// the same states 10 % slower, 6 x 110 and 4 x 121. Both medians are 110: their difference says 0 %. The size
// judged is the Hodges-Lehmann shift (the median of the 100 differences: 36 of 0, 24 of 10, 24 of 11, 16 of 21, so
// 10 ms, +9.1 %), and U = 64 + 36 / 2 = 82 of 100 is significant: a regression.
TEST_F(Verdict, ABimodalBenchmarksShiftIsJudgedNotTheGapBetweenItsMedians) {
  for (int k = 0; k < 10; ++k)
    for (auto& [side, value] : std::vector<std::pair<std::string, int>>{{"a", k < 4 ? 100 : 110}, {"b", k < 6 ? 110 : 121}}) {
      std::ofstream(d.path / "figures.txt") << "t 0 " << value << " ms\nt 1 " << value << " ms\n";
      ASSERT_EQ(fanout({"results", "record", "results/" + side, "--run", "r" + std::to_string(k), "--file", "figures.txt", "--param", "v=2"})
                    .exit_code, 0);
    }
  auto csv = compare("a", "b", {"--format=csv"});
  EXPECT_EQ(csv.exit_code, 1) << csv.out << csv.err;
  auto row = csv_row(csv.out, "t");
  EXPECT_EQ(row["change_pct"], "0") << csv.out;
  EXPECT_EQ(row["shift"], "10") << csv.out;
  EXPECT_EQ(row["verdict"], "regression") << csv.out;
  EXPECT_LT(std::stod(row["p_adjusted"]), 0.05) << csv.out;
}

// Per figure, from a reference file (compare --reference): a [[reference]] table's abs_threshold, in its unit (time
// units convert), scoped by its role and parameters, the most specific first; a flag's before the file's at equal
// scope; one in a unit that does not convert is refused naming the file's line, as is a file with none.
TEST_F(Verdict, AbsoluteThresholdsPerFigureFromAReferenceFile) {
  sweep("a", "0", 5, "ms", {"--param", "w=[1,2]"});
  sweep("b", "5", 5, "ms", {"--param", "w=[1,2]"});
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(d.path / name) << text;
    return "--reference=" + name;
  };
  auto verdict_of = [&](const test::CommandResult& csv, const std::string& w) {
    std::istringstream in(csv.out);
    std::string header, line;
    std::getline(in, header);
    const auto cols = split(header, ',');
    while (std::getline(in, line)) {
      std::map<std::string, std::string> row;
      const auto v = split(line, ',');
      for (size_t i = 0; i < cols.size() && i < v.size(); ++i) row[cols[i]] = v[i];
      if (row["param.w"] == w) return row["verdict"];
    }
    return std::string("(no row for w=" + w + ")");
  };
  EXPECT_EQ(compare("a", "b").exit_code, 1) << "5 ms from 0 with no threshold: a regression";
  const auto all = write("all.toml", "[[reference]]\nmetric = \"t\"\nunit = \"ms\"\nabs_threshold = 10\n");
  auto r = compare("a", "b", {all});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  // In seconds: converted, 4 ms is less than the 5 ms change.
  EXPECT_EQ(compare("a", "b", {write("s.toml", "[[reference]]\nmetric = \"t\"\nunit = \"s\"\nabs_threshold = 0.004\n")}).exit_code, 1);
  // One point's own: w=1 held by 10 ms, w=2 by nothing.
  const auto point = write("point.toml", "[[reference]]\nmetric = \"t\"\nunit = \"ms\"\nparameters = { w = 1 }\nabs_threshold = 10\n");
  auto csv = compare("a", "b", {point, "--format=csv"});
  EXPECT_EQ(csv.exit_code, 1) << csv.out << csv.err;
  EXPECT_EQ(verdict_of(csv, "1"), "unchanged") << csv.out;
  EXPECT_EQ(verdict_of(csv, "2"), "regression") << csv.out;
  // The point's own before a metric-wide one, whichever comes first; a flag before the file at equal scope.
  const auto both = write("both.toml", "[[reference]]\nmetric = \"t\"\nunit = \"ms\"\nabs_threshold = 1\n\n"
                                       "[[reference]]\nmetric = \"t\"\nunit = \"ms\"\nparameters = { w = 2 }\nabs_threshold = 10\n");
  csv = compare("a", "b", {both, "--format=csv"});
  EXPECT_EQ(verdict_of(csv, "1"), "regression") << csv.out;
  EXPECT_EQ(verdict_of(csv, "2"), "unchanged") << csv.out;
  EXPECT_EQ(compare("a", "b", {all, "--abs_threshold=t=1ms"}).exit_code, 1) << "the flag's 1 ms before the file's 10 ms";
  // A reference file holding values as well: results check reads the values, compare the thresholds.
  const auto mixed = write("mixed.toml", "[[reference]]\nmetric = \"t\"\nunit = \"ms\"\nvalue = 0.0\nlower = 0.0\nupper = 0.0\n"
                                         "abs_threshold = 10\n");
  EXPECT_EQ(compare("a", "b", {mixed}).exit_code, 0);
  EXPECT_EQ(fanout({"results", "check", "results/a", mixed}).exit_code, 0);
  // Refused, each naming where: a unit that does not convert (the file's line), a file with no threshold, a table
  // with neither a value nor a threshold, and a file of thresholds alone where values are checked (before a sweep runs).
  auto bad_unit = compare("a", "b", {write("kib.toml", "\n[[reference]]\nmetric = \"t\"\nunit = \"KiB\"\nabs_threshold = 1\n")});
  EXPECT_EQ(bad_unit.exit_code, 2) << bad_unit.out;
  EXPECT_NE(bad_unit.err.find("kib.toml:2"), std::string::npos) << bad_unit.err;
  auto none = compare("a", "b", {write("none.toml", "[[reference]]\nmetric = \"t\"\nunit = \"ms\"\nvalue = 1.0\n")});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("none.toml: no [[reference]] table has an abs_threshold"), std::string::npos) << none.err;
  auto empty = compare("a", "b", {write("empty.toml", "[[reference]]\nmetric = \"t\"\nunit = \"ms\"\n")});
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_NE(empty.err.find("empty.toml:1: a reference needs metric, unit and value"), std::string::npos) << empty.err;
  auto check = fanout({"results", "check", "results/a", all});
  EXPECT_EQ(check.exit_code, 2);
  EXPECT_NE(check.err.find("all.toml: no reference has a value to check"), std::string::npos) << check.err;
  auto swept = fanout({"exec", "--exp_name=c", "--command=/bin/echo v=1", "--parse", "regex:v=(?<value>\\S+)", "--metric=t",
                       "--unit=ms", all});
  EXPECT_EQ(swept.exit_code, 2) << swept.err;
  EXPECT_NE(swept.err.find("no reference has a value to check"), std::string::npos) << swept.err;
  EXPECT_FALSE(fs::exists(d.path / "results" / "c")) << "refused before anything ran";
}

// A median that is not finite has no size: undecided (no finite samples), never unchanged. A program may print
// finite figures whose median is not: the midpoint of -1.7e308 and 1.7e308 overflows.
TEST_F(Verdict, AnInfiniteMedianIsUndecided) {
  // Runs whose samples are all infinite (a program that printed "inf", stored by `results record`) have no finite
  // median. (Values of +-1.7e308 once gave an infinite median by overflow; they now give their true median:
  // Statistics.ValuesNearTheLargestDoubleStayFinite.)
  for (auto& [side, value] : std::vector<std::pair<std::string, std::string>>{{"a", "1"}, {"b", "inf"}})
    for (int k = 0; k < 5; ++k) {
      std::ofstream(d.path / "figures.txt") << "t 0 " << value << " ms\nt 1 " << value << " ms\n";
      ASSERT_EQ(fanout({"results", "record", "results/" + side, "--run", "r" + std::to_string(k), "--file", "figures.txt", "--param", "v=2"})
                    .exit_code, 0);
    }
  auto r = compare("a", "b");
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_NE(r.out.find("undecided (no finite samples)"), std::string::npos) << r.out;
}

// Which way is worse: declared (exec's parse tables and --better), else a unit that says (a time, a time per step,
// "<x>/s"), else "changed (no direction)", which fails the gate. One program, one figure read as eight metrics.
TEST_F(Verdict, DirectionsAreDeclaredOrTheUnitMustSay) {
  auto file = [&](const std::string& name, const std::string& v) {
    std::ofstream(d.path / (name + ".toml"))
        << "[experiment]\nplugin = \"exec\"\nname = \"" << name << "\"\n[parameters]\nv = " << v << "\n"
        << "[[steps]]\nname = \"run\"\ncommand = \"/bin/echo v={v}\"\n"
        << "[[steps.parse]]\nkind = \"regex\"\npattern = 'v=(?<value>\\S+)'\nmetric = \"pct_undeclared\"\nunit = \"%\"\n"
        << "[[steps.parse]]\nkind = \"regex\"\npattern = 'v=(?<value>\\S+)'\nmetric = \"pct_higher\"\nunit = \"%\"\nbetter = \"higher\"\n"
        << "[[steps.parse]]\nkind = \"regex\"\npattern = 'v=(?<value>\\S+)'\nmetric = \"pct_lower\"\nunit = \"%\"\nbetter = \"lower\"\n"
        << "[[steps.parse]]\nkind = \"regex\"\npattern = 'v=(?<value>\\S+)'\nmetric = \"pct_none\"\nunit = \"%\"\nbetter = \"none\"\n"
        << "[[steps.parse]]\nkind = \"regex\"\npattern = 'v=(?<value>\\S+)'\nmetric = \"step\"\nunit = \"ms/step\"\n"
        << "[[steps.parse]]\nkind = \"regex\"\npattern = 'v=(?<value>\\S+)'\nmetric = \"wait\"\nunit = \"min\"\n"
        << "[[steps.parse]]\nkind = \"regex\"\npattern = 'v=(?<value>\\S+)'\nmetric = \"rate\"\nunit = \"items/s\"\n"
        << "[[steps.parse]]\nkind = \"regex\"\npattern = 'v=(?<value>\\S+)'\nmetric = \"reqs\"\nunit = \"requests\"\nbetter = \"higher\"\n";
    auto r = fanout({"run", name + ".toml", "--repeat=5", "--resources=off"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  };
  file("a", "50");
  file("b", "60");
  auto csv = compare("a", "b", {"--format=csv"});
  EXPECT_EQ(csv.exit_code, 1) << csv.out;
  const std::map<std::string, std::pair<std::string, std::string>> expected{
      {"pct_undeclared", {"changed (no direction)", ""}}, {"pct_higher", {"improvement", "declared"}},
      {"pct_lower", {"regression", "declared"}},         {"pct_none", {"changed", "declared"}},
      {"step", {"regression", "unit"}},                   {"wait", {"regression", "unit"}},
      {"rate", {"improvement", "unit"}},                  {"reqs", {"improvement", "declared"}}};
  for (auto& [metric, want] : expected) {
    auto row = csv_row(csv.out, metric);
    EXPECT_EQ(row["verdict"], want.first) << metric << "\n" << csv.out;
    EXPECT_EQ(row["better_from"], want.second) << metric;
  }
  // Alone, each gates as its verdict says: an undeclared change fails, a declared "none" informs.
  EXPECT_EQ(compare("a", "b", {"--metric=pct_undeclared"}).exit_code, 1);
  EXPECT_EQ(compare("a", "b", {"--metric=pct_none"}).exit_code, 0);
  EXPECT_EQ(compare("a", "b", {"--metric=pct_higher", "--metric=rate", "--metric=reqs"}).exit_code, 0);
  auto text = compare("a", "b", {"--metric=pct_undeclared"});
  EXPECT_NE(text.out.find("changed with no direction (fails the gate: declare it"), std::string::npos) << text.out;
  // Eight figures, each p = 2/252 alone: Holm multiplies the smallest by 8 (0.063 > 0.05), so nothing is decided
  // beyond chance; Benjamini-Hochberg keeps them (all equal: p * 8 / 8).
  auto holm = compare("a", "b", {"--format=csv", "--correction=holm"});
  EXPECT_EQ(holm.exit_code, 0) << holm.out;
  EXPECT_NEAR(std::stod(csv_row(holm.out, "step")["p_adjusted"]), 8 * 2.0 / 252, 1e-9) << holm.out;
  EXPECT_NEAR(std::stod(csv_row(csv.out, "step")["p_adjusted"]), 2.0 / 252, 1e-9) << csv.out;
  EXPECT_NEAR(std::stod(csv_row(csv.out, "step")["p_value"]), 2.0 / 252, 1e-9);
  // The direction is stored with the runs, where SQL users find it.
  EXPECT_EQ(test::sql_one(d.path / "results/a/fanout.sqlite",
                          "SELECT group_concat(DISTINCT better) FROM metric_declarations WHERE metric='pct_higher'"), "higher");
  EXPECT_EQ(test::sql_one(d.path / "results/a/fanout.sqlite", "SELECT count(*) FROM metric_declarations WHERE metric='step'"), "0")
      << "nothing declared: the unit decides at compare time";
  // A direction that is no direction is refused before anything runs.
  auto bad = fanout({"exec", "--exp_name=bad", "--command=/bin/echo v=1", "--parse", "regex:v=(?<value>\\S+)", "--metric=t",
                     "--unit=ms", "--better=faster"});
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("better = 'faster': expected lower, higher or none"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(d.path / "results" / "bad" / "fanout.sqlite") && test::sql_one(d.path / "results/bad/fanout.sqlite", "SELECT count(*) FROM runs") != "0");
}

// The built-in plugins declare their metrics: calibration's copy_bandwidth is higher-is-better, its rendezvous a
// setup cost; exec's time parser is lower.
TEST_F(Verdict, BuiltInPluginsDeclareTheirMetrics) {
  auto r = fanout({"calibration_copy", "--exp_name=copy", "--copy_bytes=4096", "--iterations=3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path db = d.path / "results/copy/fanout.sqlite";
  EXPECT_EQ(test::sql_one(db, "SELECT better FROM metric_declarations WHERE metric='copy_bandwidth'"), "higher");
  EXPECT_EQ(test::sql_one(db, "SELECT better FROM metric_declarations WHERE metric='copy'"), "lower");
  auto t = fanout({"exec", "--exp_name=timed", "--command=/bin/true"});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_EQ(test::sql_one(d.path / "results/timed/fanout.sqlite", "SELECT better FROM metric_declarations WHERE metric='wall_time'"), "lower");
}

// A program whose figure alternates 100, 200, 100, ... from run to run (a counter in the submit folder, one run at a
// time on the local launcher): its across-runs interval never narrows. FANOUT_SUBMIT_DIR is in every rank's
// environment.
const char* kAlternating =
    "--command=c=$(cat $FANOUT_SUBMIT_DIR/count.{side}.{mode} 2>/dev/null || echo 0); echo $((c + 1)) > $FANOUT_SUBMIT_DIR/count.{side}.{mode}; "
    "if test {mode} = fixed; then echo v=100; else echo v=$((100 + c % 2 * 100)); fi";

// --repeat=auto: five runs of each permutation, then more only for those whose interval is still wider than
// --precision, up to --max_repeat; a program of fixed output stops at five, a noisy one runs to the cap.
TEST_F(Verdict, RepeatAutoAddsRunsOnlyWhereTheIntervalIsWide) {
  auto r = fanout({"exec", "--exp_name=auto", "--shell=true", kAlternating, "--param", "mode=[fixed,noisy]", "--param", "side=a",
                   "--parse", "regex:v=(?<value>\\S+)", "--metric=t", "--unit=ms", "--repeat=auto", "--max_repeat=8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path db = d.path / "results/auto/fanout.sqlite";
  auto runs_of = [&](const std::string& mode) {
    return test::sql_one(db, "SELECT count(*) FROM runs r JOIN parameters p ON p.run_id = r.id AND p.name = 'mode' WHERE p.value = '" + mode +
                                 "' AND r.status = 'COMPLETED'");
  };
  EXPECT_EQ(runs_of("fixed"), "5") << r.err;
  EXPECT_EQ(runs_of("noisy"), "8") << r.err;
  EXPECT_NE(r.err.find("--repeat=auto: 1 permutation(s) not yet within +-2 %: one more run each"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(": 8 runs"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("reached --max_repeat"), std::string::npos) << r.err;
  // The repeats are runs of their own, each with its index: 6/auto .. 8/auto for the added ones.
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM provenance WHERE key = 'repeat' AND value = '8/auto'"), "1");
  // Bad values are refused naming the flag.
  for (auto bad : {"--repeat=often", "--precision=0", "--max_repeat=2"}) {
    auto no = fanout({"exec", "--exp_name=bad", "--command=/bin/true", bad});
    EXPECT_EQ(no.exit_code, 2) << bad;
    EXPECT_NE(no.err.find(std::string(bad).substr(0, std::string(bad).find('='))), std::string::npos) << no.err;
  }
}

// The order of repeated runs: random differs from interleaved, and is the same again for the same experiment name.
TEST_F(Verdict, RandomRepeatOrderDiffersFromInterleaved) {
  auto order = [&](const std::string& how) {
    auto r = fanout({"calibration_sleep", "--exp_name=order", "--sleep_us=[1,2,3,4]", "--repeat=4", "--repeat_order=" + how, "--dry-run"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::string sessions;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);)
      if (line.rfind("[", 0) == 0) sessions += line.substr(line.find(' ') + 1, line.find(' ', line.find(' ') + 1) - line.find(' ') - 1) + "\n";
    return sessions;
  };
  const std::string interleaved = order("interleaved"), random = order("random");
  EXPECT_EQ(std::count(interleaved.begin(), interleaved.end(), '\n'), 16);
  EXPECT_NE(interleaved, random);
  EXPECT_EQ(random, order("random"));
  EXPECT_NE(interleaved.find("sleep_us1-r1-"), std::string::npos);
  EXPECT_LT(interleaved.find("sleep_us4-r1-"), interleaved.find("sleep_us1-r2-")) << "interleaved: every permutation once, then again";
}

// compare --until-decided runs both experiments' own commands again, in turn, until each figure is decided: a
// regression found with more runs, an equal pair shown within the threshold, a noisy pair left undecided at the cap.
TEST_F(Verdict, UntilDecidedRunsBothSidesUntilEachFigureIsDecided) {
  sweep("slow_a", "100", 3);
  sweep("slow_b", "150", 3);
  EXPECT_EQ(compare("slow_a", "slow_b").exit_code, 3) << "three runs a side decide nothing";
  auto r = compare("slow_a", "slow_b", {"--until-decided", "--max_repeat=10"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("regression"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("looks at 3 point(s) up to 10 runs a side, alpha 0.05 spent evenly: 0.0166667 each"), std::string::npos) << r.err;
  EXPECT_EQ(test::sql_one(d.path / "results/slow_a/fanout.sqlite", "SELECT count(*) FROM runs WHERE status = 'COMPLETED'"), "5")
      << "one look at 5 runs a side decided it";
  EXPECT_EQ(test::sql_one(d.path / "results/slow_b/fanout.sqlite", "SELECT count(*) FROM runs WHERE status = 'COMPLETED'"), "5");
  sweep("same_a", "100", 5);
  sweep("same_b", "100", 5);
  auto same = compare("same_a", "same_b", {"--until-decided"});
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;
  EXPECT_NE(same.err.find("1 of 1 figure(s) decided"), std::string::npos) << same.err;
  for (auto side : {"a", "b"}) {
    auto n = fanout({"exec", std::string("--exp_name=noisy_") + side, "--shell=true", kAlternating, "--param", "mode=noisy", "--param",
                     std::string("side=") + side, "--parse", "regex:v=(?<value>\\S+)", "--metric=t", "--unit=ms", "--repeat=5"});
    ASSERT_EQ(n.exit_code, 0) << n.err;
  }
  auto noisy = fanout({"results", "compare", "results/noisy_a", "results/noisy_b", "--ignore=side", "--until-decided", "--max_repeat=7"});
  EXPECT_EQ(noisy.exit_code, 3) << noisy.out << noisy.err;
  EXPECT_NE(noisy.out.find("undecided (neither beyond nor within the threshold after 7 runs)"), std::string::npos) << noisy.out;
  EXPECT_EQ(test::sql_one(d.path / "results/noisy_b/fanout.sqlite", "SELECT count(*) FROM runs WHERE status = 'COMPLETED'"), "7");
}

}  // namespace

namespace {

// Issue 51: `fanout results model` on a program that prints a figure computed from its parameter (3 + 0.002 p log2 p,
// no timing): the model named exactly, a prediction outside the data called an extrapolation, 4 values no model.
TEST(Models, AProgramOfKnownScalingIsModelled) {
  test::TempDir d;
  auto fanout = [&](std::vector<std::string> args) { return test::run_fanout(d.path, args); };
  // No brackets or commas in the command (a flag's value with them is a list): p comes through the environment.
  const std::string program = "--command=awk -v p=$P 'BEGIN { print \"t=\" 3 + 0.002 * p * log(p) / log(2) }'";
  auto r = fanout({"exec", "--exp_name=plogp", "--shell=true", program, "--env=P={p}", "--param", "p=[8,16,32,64,128,256]",
                   "--parse", "regex:t=(?<value>\\S+)", "--metric=t", "--unit=s"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto m = fanout({"results", "model", "results/plogp", "--predict=p=4096"});
  ASSERT_EQ(m.exit_code, 0) << m.err;
  EXPECT_NE(m.out.find("t(p) = 3 + 0.002 * p^(1) * log2(p)^(1) [s]"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("fitted on p 8..256 (6 values)"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("at p=4096: 101.3 [s]  (an extrapolation: outside the fitted 8..256)"), std::string::npos) << m.out;
  auto csv = fanout({"results", "model", "results/plogp", "--format=csv"});
  EXPECT_NE(csv.out.find(",t,s,p,,true,,"), std::string::npos) << csv.out;
  EXPECT_NE(csv.out.find(",1,1,p^(1) * log2(p)^(1),"), std::string::npos) << csv.out;
  auto few = fanout({"exec", "--exp_name=few", "--shell=true", program, "--env=P={p}", "--param", "p=[8,16,32,64]",
                     "--parse", "regex:t=(?<value>\\S+)", "--metric=t", "--unit=s"});
  ASSERT_EQ(few.exit_code, 0) << few.err;
  auto none = fanout({"results", "model", "results/few"});
  EXPECT_EQ(none.exit_code, 0);
  EXPECT_NE(none.out.find("t(p): no model: 4 distinct value(s) of p; a model needs 5"), std::string::npos) << none.out;
  auto flat = fanout({"results", "model", "results/few", "--param=nothing"});
  EXPECT_EQ(flat.exit_code, 2) << flat.out;
  EXPECT_NE(flat.err.find("varies no numeric parameter among those asked"), std::string::npos) << flat.err;
  EXPECT_EQ(fanout({"results", "model", "results/plogp", "--predict=p"}).exit_code, 2);
  // compare reads the models: the same figure growing as p^2 in A and as p^3 in B is a scaling regression.
  for (auto [name, expr] : {std::pair{"square", "1 + 0.01 * p * p"}, {"cube", "1 + 0.0001 * p * p * p"}}) {
    auto sweep = fanout({"exec", std::string("--exp_name=") + name, "--shell=true", std::string("--command=awk -v p=$P 'BEGIN { print \"t=\" ") + expr + " }'",
                         "--env=P={p}", "--param", "p=[8,16,32,64,128,256]", "--parse", "regex:t=(?<value>\\S+)", "--metric=t", "--unit=s"});
    ASSERT_EQ(sweep.exit_code, 0) << sweep.err;
  }
  auto grows = fanout({"results", "compare", "results/square", "results/cube", "--ignore=command"});
  EXPECT_EQ(grows.exit_code, 1) << grows.out << grows.err;
  EXPECT_NE(grows.out.find("scaling regression: t(p): p^(2) -> p^(3)"), std::string::npos) << grows.out;
  auto shrinks = fanout({"results", "compare", "results/cube", "results/square", "--ignore=command", "--format=json"});
  EXPECT_NE(shrinks.out.find("\"verdict\": \"scaling improvement\""), std::string::npos) << shrinks.out;
}

// Issue 51: speedup and parallel efficiency on known figures: t = 100 / threads + 10 (strong: at 4 threads the
// speedup is 110 / 35, the efficiency a quarter of that), and the same figure read as weak scaling.
TEST(Models, SpeedupAndEfficiencyOnKnownFigures) {
  test::TempDir d;
  auto fanout = [&](std::vector<std::string> args) { return test::run_fanout(d.path, args); };
  auto r = fanout({"exec", "--exp_name=threads", "--shell=true", "--command=awk -v n=$N 'BEGIN { print \"t=\" 100 / n + 10 }'", "--env=N={threads}",
                   "--param", "threads=[1,2,4,8]", "--parse", "regex:t=(?<value>\\S+)", "--metric=t", "--unit=s"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto p = fanout({"process_scaling_results", "results/threads"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  auto rows = [&] {
    std::map<std::string, std::vector<std::string>> out;  // count -> row
    std::ifstream in(d.path / "results/threads/csv/scaling.csv");
    std::string line;
    std::getline(in, line);
    EXPECT_EQ(line, "role,metric,unit,mode,param,series,count,base_count,median,speedup,ideal_speedup,efficiency");
    while (std::getline(in, line)) {
      auto v = split(line, ',');
      out[v[6]] = v;
    }
    return out;
  };
  auto strong = rows();
  ASSERT_EQ(strong.size(), 4u);
  EXPECT_EQ(strong["4"][3], "strong");
  EXPECT_NEAR(std::stod(strong["4"][9]), 110.0 / 35, 1e-9);
  EXPECT_NEAR(std::stod(strong["4"][10]), 4, 1e-12);
  EXPECT_NEAR(std::stod(strong["4"][11]), 110.0 / 35 / 4, 1e-9);
  EXPECT_NEAR(std::stod(strong["1"][11]), 1, 1e-12);
  EXPECT_TRUE(fs::exists(d.path / "results/threads/processed/plots/speedup_run_t_by_threads.png"));
  auto weak = fanout({"process_scaling_results", "results/threads", "--scaling=weak:threads"});
  ASSERT_EQ(weak.exit_code, 0) << weak.err;
  auto w = rows();
  EXPECT_EQ(w["8"][3], "weak");
  EXPECT_NEAR(std::stod(w["8"][11]), 110.0 / 22.5, 1e-9) << "weak: T(1) / T(8)";
  EXPECT_EQ(fanout({"process_scaling_results", "results/threads", "--scaling=fast:threads"}).exit_code, 2);
}

// What speedup means is said with the sweep (--scaling, an experiment file's scaling, a plugin's declared count
// parameters), stored with its runs, and read back by process_scaling_results without being told again.
TEST(Models, TheSweepsScalingIsStoredWithItsRuns) {
  test::TempDir d;
  auto fanout = [&](std::vector<std::string> args) { return test::run_fanout(d.path, args); };
  auto modes = [&](const std::string& exp) {
    std::set<std::string> out;  // mode:param of every row
    std::ifstream in(d.path / "results" / exp / "csv/scaling.csv");
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      auto v = split(line, ',');
      out.insert(v[3] + ":" + v[4]);
    }
    return out;
  };
  const std::vector<std::string> sweep = {"exec", "--shell=true", "--command=awk -v n=$N 'BEGIN { print \"t=\" 100 / n + 10 }'",
                                          "--env=N={threads}", "--param", "threads=[1,2,4]", "--parse", "regex:t=(?<value>\\S+)",
                                          "--metric=t", "--unit=s"};
  auto with = [&](std::vector<std::string> extra) {
    auto args = sweep;
    args.insert(args.end(), extra.begin(), extra.end());
    return fanout(args);
  };
  auto r = with({"--exp_name=weak", "--scaling=weak:threads"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(fanout({"process_scaling_results", "results/weak"}).exit_code, 0);
  EXPECT_EQ(modes("weak"), std::set<std::string>{"weak:threads"});
  ASSERT_EQ(fanout({"process_scaling_results", "results/weak", "--scaling=strong:threads"}).exit_code, 0);
  EXPECT_EQ(modes("weak"), std::set<std::string>{"strong:threads"}) << "the flag given here overrides what is stored";

  // Refused before anything runs, naming the flag: an unknown parameter, an unknown mode, a parameter twice.
  auto unknown = with({"--exp_name=bad1", "--scaling=weak:nodez"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("--scaling weak:nodez: the experiment has no parameter 'nodez'"), std::string::npos) << unknown.err;
  auto mode = with({"--exp_name=bad2", "--scaling=fast:threads"});
  EXPECT_EQ(mode.exit_code, 2);
  EXPECT_NE(mode.err.find("--scaling"), std::string::npos) << mode.err;
  auto twice = with({"--exp_name=bad3", "--scaling=weak:threads,strong:threads"});
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_NE(twice.err.find("threads is named twice"), std::string::npos) << twice.err;
  for (auto* exp : {"bad1", "bad2", "bad3"}) EXPECT_FALSE(fs::exists(d.path / "results" / exp)) << exp;

  // An experiment file says it in [experiment].
  {
    std::ofstream f(d.path / "weak.toml");
    f << "[experiment]\nplugin = \"exec\"\nname = \"file\"\nscaling = \"weak:threads\"\n"
         "[parameters]\nthreads = [1, 2, 4]\n"
         "[[steps]]\nshell = true\ncommand = \"awk -v n={threads} 'BEGIN { print 100 / n + 10 }'\"\n"
         "[[steps.parse]]\nkind = \"regex\"\npattern = '(?<value>\\S+)'\nmetric = \"t\"\nunit = \"s\"\n";
  }
  auto file = fanout({"run", "weak.toml"});
  ASSERT_EQ(file.exit_code, 0) << file.err;
  ASSERT_EQ(fanout({"process_scaling_results", "results/file"}).exit_code, 0);
  EXPECT_EQ(modes("file"), std::set<std::string>{"weak:threads"});

  // A plugin's declaration: calibration's ranks_per_node is weak scaling (every rank does its own iterations).
  auto cal = fanout({"calibration_sleep", "--exp_name=cal", "--ranks_per_node=[1,2]", "--iterations=3", "--warmup=0", "--sleep_us=100"});
  ASSERT_EQ(cal.exit_code, 0) << cal.err;
  ASSERT_EQ(fanout({"process_scaling_results", "results/cal"}).exit_code, 0);
  EXPECT_EQ(modes("cal"), std::set<std::string>{"weak:ranks_per_node"});
}

// Issue 55: a benchmark over time. A repository the test makes, 20 commits a day apart whose program prints 100 (+-0.3
// in a fixed pattern) and, from commit 11, 110: `history changes` over the 20 experiments (given newest first) orders
// them by commit time and finds the one step, at v11, +10 %, and the newest is after it: exit 1. Six more commits
// back at 100: an improvement at v21, and exit 0. (Ten points a side: a random order of them reaches the step's
// statistic in none of 1,000 permutations; with six a side, 3 in 1,000 did, too near Otava's p <= 0.001.)
TEST(History, AStepPlantedAtARevisionIsFoundThereAndNowhereElse) {
  test::TempDir d;
  const fs::path code = d.path / "code";
  fs::create_directories(code);
  auto git = [&](std::vector<std::string> args, const std::string& date = "") {
    args.insert(args.begin(), {"/usr/bin/git", "-C", code.string(), "-c", "user.name=t", "-c", "user.email=t@example.org"});
    std::vector<std::pair<std::string, std::string>> env;
    if (!date.empty()) env = {{"GIT_COMMITTER_DATE", date}, {"GIT_AUTHOR_DATE", date}};
    auto r = test::run_command(args, d.path, env);
    EXPECT_EQ(r.exit_code, 0) << r.err;
  };
  git({"init", "-q"});
  std::vector<std::string> dirs;
  auto commit_and_run = [&](int i, double level) {
    std::ofstream(code / "level.txt") << level << "\n";
    git({"add", "level.txt"});
    char date[64];
    std::snprintf(date, sizeof date, "2026-01-%02d 12:00:00 +0100", i);
    git({"commit", "-q", "-m", "v" + std::to_string(i)}, date);
    auto r = test::run_fanout(d.path, {"exec", "--exp_name=r" + std::to_string(i), "--source=code", "--revision=v" + std::to_string(i),
                                       "--command=/bin/cat " + (code / "level.txt").string(), "--parse", "regex:(?<value>\\S+)",
                                       "--metric=t", "--unit=ms", "--repeat=3", "--resources=off"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    dirs.insert(dirs.begin(), "results/r" + std::to_string(i));  // newest first: the order is history's to find
  };
  for (int i = 1; i <= 20; ++i) commit_and_run(i, (i >= 11 ? 110 : 100) + 0.3 * (i % 3 - 1));
  std::vector<std::string> args = {"history", "changes"};
  args.insert(args.end(), dirs.begin(), dirs.end());
  auto h = test::run_fanout(d.path, args);
  EXPECT_EQ(h.exit_code, 1) << "the newest is after a regression: " << h.out << h.err;
  EXPECT_NE(h.out.find("20 point(s), oldest first by their code's commit time: v1 v2 v3 v4 v5 v6 v7 v8 v9 v10 v11 v12 v13"), std::string::npos) << h.out;
  EXPECT_NE(h.out.find("t (run): 100 -> 110 ms (+10.0 %) from v10 to v11"), std::string::npos) << h.out;
  EXPECT_NE(h.out.find("1 change point(s) in 1 figure(s)"), std::string::npos) << h.out;
  // csv, and a step back down to 100: an improvement, and the newest is no longer after a regression.
  for (int i = 21; i <= 26; ++i) commit_and_run(i, 100 + 0.3 * (i % 3 - 1));
  args = {"history", "changes", "--format=csv"};
  args.insert(args.end(), dirs.begin(), dirs.end());
  auto csv = test::run_fanout(d.path, args);
  EXPECT_EQ(csv.exit_code, 0) << csv.out << csv.err;
  EXPECT_NE(csv.out.find(",improvement,v20,v21,"), std::string::npos) << csv.out;
  EXPECT_NE(csv.out.find(",regression,v10,v11,"), std::string::npos) << csv.out;
  // A figure is every parameter of its permutation: a night at another n is a series of its own, never a step.
  ASSERT_EQ(test::run_fanout(d.path, {"exec", "--exp_name=other", "--command=/bin/echo 500", "--parse", "regex:(?<value>\\S+)", "--metric=t",
                                      "--unit=ms", "--repeat=3", "--resources=off", "--param", "n=2"}).exit_code, 0);
  args.push_back("results/other");
  auto with_other = test::run_fanout(d.path, args);
  EXPECT_NE(with_other.out.find(",improvement,v20,v21,"), std::string::npos) << with_other.out;
  EXPECT_EQ(with_other.out.find("500"), std::string::npos) << "n=2's one point is no change: " << with_other.out;
  // The dashboard of the same, in a real browser: every plot decodes, no console message, the changes newest first.
  args = {"history", "report", "--out=site"};
  args.insert(args.end(), dirs.begin(), dirs.end());
  auto site = test::run_fanout(d.path, args);
  ASSERT_EQ(site.exit_code, 0) << site.out << site.err;
  const std::string html = read_file(d.path / "site" / "index.html");
  const size_t regression = html.find("<td class=\"l\">regression</td>"), improvement = html.find("<td class=\"l\">improvement</td>");
  ASSERT_NE(regression, std::string::npos) << html.substr(0, 3000);
  EXPECT_LT(improvement, regression) << "newest first";
  EXPECT_NE(html.find("<td class=\"l\">v10</td><td class=\"l\">v11</td>", regression), std::string::npos);
  EXPECT_NE(html.find("Changes at: <code>v11</code> <code>v21</code>"), std::string::npos) << "the figure's marks";
  auto page = test::run_command({"/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                                 "--disable-background-networking", "--disable-component-update", "--disable-sync", "--enable-logging=stderr",
                                 "--v=0", "--user-data-dir=" + (d.path / "chromium").string(), "--virtual-time-budget=10000", "--dump-dom",
                                 "file://" + (d.path / "site" / "index.html").string()},
                                d.path, {}, 120);
  size_t images = 0;
  for (size_t at = html.find("<img class=\"plot\""); at != std::string::npos; at = html.find("<img class=\"plot\"", at + 1)) ++images;
  EXPECT_EQ(images, 1u) << "one figure: t";
  EXPECT_NE(page.out.find("data-plots-rendered=\"" + std::to_string(images) + "\""), std::string::npos) << page.out.substr(0, 2000) << page.err.substr(0, 2000);
  EXPECT_EQ(page.err.find(":CONSOLE("), std::string::npos) << "a console message: " << page.err;
  // Written again into its own folder (named with a trailing slash too): replaced; never into a folder it did not
  // write, nor through a user's folder beside it (site2.old).
  EXPECT_EQ(test::run_fanout(d.path, args).exit_code, 0);
  args[2] = "--out=site/";
  EXPECT_EQ(test::run_fanout(d.path, args).exit_code, 0);
  EXPECT_TRUE(fs::exists(d.path / "site" / "index.html"));
  fs::create_directories(d.path / "site2.old");
  std::ofstream(d.path / "site2.old" / "keep.txt") << "mine\n";
  args[2] = "--out=site2";
  EXPECT_EQ(test::run_fanout(d.path, args).exit_code, 2);
  EXPECT_TRUE(fs::exists(d.path / "site2.old" / "keep.txt"));
  fs::create_directories(d.path / "mine");
  args[2] = "--out=mine";
  auto refused = test::run_fanout(d.path, args);
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("mine exists and is not a dashboard fanout wrote"), std::string::npos) << refused.err;
  // Bad input: too few points, a folder that is not an experiment.
  EXPECT_EQ(test::run_fanout(d.path, {"history", "changes", "results/r1", "results/r2"}).exit_code, 2);
  auto bad = test::run_fanout(d.path, {"history", "changes", "results/r1", "results/r2", "code"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("code is not an experiment folder"), std::string::npos) << bad.err;
}

}  // namespace
