#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "host/plugin_loader.h"
#include "tests/test_util.h"

using namespace fanout;
using fanout::test::broken_plugin;
using fanout::test::build_dir;

namespace {
PluginError open_error(const std::filesystem::path& p) {
  try {
    Plugin::open(p);
  } catch (const PluginError& e) {
    return e;
  }
  return PluginError(PluginErrorKind::NotFound, "no error");
}
ParamSpec spec(const char* name, fanout_param_type type) {
  ParamSpec p;
  p.name = name, p.type = type;
  return p;
}
}  // namespace

TEST(PluginLoader, OpensTheCalibrationPluginAndReadsItsDescription) {
  auto p = Plugin::open(build_dir() / "plugins" / "fanout_calibration.so");
  EXPECT_EQ(p->name(), "calibration");
  ASSERT_NE(p->param("sleep_us"), nullptr);
  EXPECT_EQ(p->param("sleep_us")->type, FANOUT_PARAM_INT);
  EXPECT_EQ(p->param("sleep_us")->default_value, "1000");
  EXPECT_NE(p->role("sleep"), nullptr);
  EXPECT_EQ(p->role("nope"), nullptr);
  std::vector<std::string> experiments;
  for (auto& e : p->experiments()) experiments.push_back(e.name);
  ASSERT_EQ(experiments, (std::vector<std::string>{"calibration_sleep", "calibration_copy", "calibration_sweep"}));
  EXPECT_EQ(p->experiments()[0].steps[0].nodes, "{nodes}");
}

TEST(PluginLoader, WrongAbiIsRefusedNamingFileAndBothVersions) {
  auto e = open_error(broken_plugin(1));
  EXPECT_EQ(e.kind(), PluginErrorKind::BadVersion);
  std::string m = e.what();
  EXPECT_NE(m.find(broken_plugin(1).string()), std::string::npos) << m;
  EXPECT_NE(m.find("ABI " + std::to_string(FANOUT_PLUGIN_ABI_VERSION + 98)), std::string::npos) << m;
  EXPECT_NE(m.find("expects ABI " + std::to_string(FANOUT_PLUGIN_ABI_VERSION)), std::string::npos) << m;
}

TEST(PluginLoader, FileWithoutEntryIsNotAPlugin) {
  // Refused from its file, before dlopen: its constructor (which would create the mark) never runs (issue 53).
  fanout::test::TempDir d;
  const auto mark = d.path / "constructor_ran";
  ::setenv("FANOUT_TEST_CONSTRUCTOR_MARK", mark.c_str(), 1);
  auto e = open_error(broken_plugin(3));
  ::unsetenv("FANOUT_TEST_CONSTRUCTOR_MARK");
  EXPECT_EQ(e.kind(), PluginErrorKind::NotAPlugin);
  EXPECT_NE(std::string(e.what()).find("is not a fanout plugin: it exports no fanout_plugin_entry() (read from the file; none of its code ran)"),
            std::string::npos) << e.what();
  EXPECT_FALSE(std::filesystem::exists(mark)) << "the library's constructor ran";
  // Not an ELF file at all, and a file that is no shared object: the same, without loading.
  std::ofstream(d.path / "text.so") << "#!/bin/sh\n";
  EXPECT_NE(std::string(open_error(d.path / "text.so").what()).find("it is not an ELF file"), std::string::npos);
  EXPECT_NE(std::string(open_error(fanout::test::build_dir() / "tests" / "exec_probe").what()).find("is not a fanout plugin: it"), std::string::npos);
}

TEST(PluginLoader, InitFailureIsItsOwnErrorWithThePluginsReason) {
  auto p = Plugin::open(broken_plugin(2));  // opening (peek) does not call init
  try {
    p->init();
    FAIL();
  } catch (const PluginError& e) {
    EXPECT_EQ(e.kind(), PluginErrorKind::InitFailed);
    EXPECT_NE(std::string(e.what()).find("init failed: the test plugin refuses to start"), std::string::npos) << e.what();
  }
}

TEST(PluginLoader, MissingFileAndUnknownName) {
  EXPECT_EQ(open_error("/nonexistent/fanout_x.so").kind(), PluginErrorKind::CannotOpen);
  try {
    find_plugin("no_such_plugin");
    FAIL();
  } catch (const PluginError& e) {
    EXPECT_EQ(e.kind(), PluginErrorKind::NotFound);
    EXPECT_NE(std::string(e.what()).find("unknown plugin 'no_such_plugin'"), std::string::npos);
  }
}

TEST(PluginLoader, SearchPathNeverIncludesTheCurrentDirectory) {
  fanout::test::TempDir dir;
  auto old = std::filesystem::current_path();
  std::filesystem::current_path(dir.path);
  setenv("FANOUT_PLUGIN_PATH", (".:relative/dir:" + dir.path.string() + ":/opt/plugins").c_str(), 1);
  auto path = plugin_search_path();
  unsetenv("FANOUT_PLUGIN_PATH");
  std::filesystem::current_path(old);
  for (auto& p : path) {
    EXPECT_TRUE(p.is_absolute()) << p;
    EXPECT_NE(p, dir.path) << "the current directory is on the plugin path";
  }
  ASSERT_FALSE(path.empty());
  EXPECT_EQ(path.front(), "/opt/plugins");
}

TEST(PluginLoader, ScanFindsBuiltPluginsAndReportsRefusals) {
  setenv("FANOUT_PLUGIN_PATH", FANOUT_BROKEN_DIR, 1);
  auto scan = scan_plugins();
  unsetenv("FANOUT_PLUGIN_PATH");
  bool calibration = false, init_fails = false;
  for (auto& p : scan.plugins) {
    calibration |= p->name() == "calibration";
    init_fails |= p->name() == "init_fails";  // opens fine: init is not run when listing
  }
  EXPECT_TRUE(calibration);
  EXPECT_TRUE(init_fails);
  // wrong ABI, not a plugin, no struct_size, bad choice, uses an unknown parameter, an unused list default, both
  // strong and weak scaling
  EXPECT_EQ(scan.refused.size(), 7u);
  bool named = false, hidden = false;
  for (auto& why : scan.refused) {
    named |= why.find("experiment 'uses_unknown' uses unknown parameter 'm'") != std::string::npos;
    hidden |= why.find("experiment 'hidden_list' does not use 'm' but its default is a list ([1,2])") != std::string::npos;
  }
  EXPECT_TRUE(named) << "the refusal names the experiment and the parameter";
  EXPECT_TRUE(hidden) << "an unused parameter may not sweep unseen";
}

// ABI 4.1 appended `uses` to fanout_experiment_spec: an experiment array laid out by ABI 4.0 (smaller
// struct_size) still loads, and its experiments use every parameter.
TEST(PluginLoader, AnAbi40ExperimentWithoutUsesUsesEveryParameter) {
  auto p = Plugin::open(std::string(FANOUT_BROKEN_DIR) + "/fanout_broken_7.so");
  ASSERT_EQ(p->experiments().size(), 2u);
  EXPECT_EQ(p->experiments()[1].name, "abi40_other") << "stepped through by the 4.0 struct_size";
  for (auto& e : p->experiments()) EXPECT_EQ(e.uses, (std::vector<std::string>{"n", "m"}));
}

TEST(PluginLoader, LoadsAPluginBuiltForAbi3FromTheFrozenHeader) {
  auto p = Plugin::open(FANOUT_ABI3_PLUGIN);
  EXPECT_EQ(p->abi_version(), 3u);
  EXPECT_EQ(p->name(), "abi3");
  EXPECT_EQ(p->version(), "3.0.0");
  ASSERT_EQ(p->params().size(), 3u);
  EXPECT_EQ(p->params()[0].name, "value");
  EXPECT_EQ(p->params()[0].type, FANOUT_PARAM_INT);
  EXPECT_EQ(p->params()[0].default_value, "7");
  EXPECT_TRUE(p->params()[0].choices.empty() && p->params()[0].min.empty());  // ABI 3 has no constraints
  ASSERT_NE(p->role("echo"), nullptr);
  EXPECT_NE(p->role("echo")->run, nullptr);
  ASSERT_EQ(p->experiments().size(), 1u);
  const auto& e = p->experiments()[0];
  EXPECT_EQ(e.name, "abi3_echo");
  ASSERT_EQ(e.steps.size(), 1u);
  EXPECT_EQ(e.steps[0].tasks_per_node, "{ranks}");
  EXPECT_EQ(e.defaults, (std::vector<std::pair<std::string, std::string>>{{"iterations", "4"}}));
  EXPECT_EQ(e.session_name, "abi3-{value}");
}

TEST(PluginLoader, Abi4ArraysMustCarryTheirStructSize) {
  auto e = open_error(broken_plugin(4));
  EXPECT_EQ(e.kind(), PluginErrorKind::BadDescriptor);
  EXPECT_NE(std::string(e.what()).find("params[0].struct_size is 0, smaller than ABI 4's"), std::string::npos) << e.what();
}

TEST(PluginLoader, ChoicesMustBeValuesOfTheParametersType) {
  auto e = open_error(broken_plugin(5));
  EXPECT_EQ(e.kind(), PluginErrorKind::BadDescriptor);
  EXPECT_NE(std::string(e.what()).find("parameter 'n' choice 'two' is not an integer"), std::string::npos) << e.what();
}

TEST(PluginLoader, ACountParameterIsStrongOrWeakScalingNotBoth) {
  auto e = open_error(broken_plugin(9));
  EXPECT_EQ(e.kind(), PluginErrorKind::BadDescriptor);
  EXPECT_NE(std::string(e.what()).find("parameter 'n' is flagged both strong and weak scaling"), std::string::npos) << e.what();
  auto p = Plugin::open(build_dir() / "plugins" / "fanout_pslite.so");
  EXPECT_EQ(p->param("workers")->scaling, "weak");
  EXPECT_EQ(p->param("len")->scaling, "");
  auto t = Plugin::open(build_dir() / "plugins" / "fanout_torchloader.so");
  EXPECT_EQ(t->param("cores")->scaling, "strong");
}

TEST(PluginLoader, ReadsBoundsAndChoicesOfAbi4Plugins) {
  auto p = Plugin::open(build_dir() / "plugins" / "fanout_calibration.so");
  EXPECT_EQ(p->abi_version(), FANOUT_PLUGIN_ABI_VERSION);
  ASSERT_NE(p->param("ranks_per_node"), nullptr);
  EXPECT_EQ(p->param("ranks_per_node")->min, "1");
  EXPECT_EQ(describe_constraints(*p->param("ranks_per_node")), ">= 1 and <= 4096");
}

TEST(PluginLoader, ValuesAreCheckedAgainstTypeChoicesAndBounds) {
  ParamSpec mode = spec("mode", FANOUT_PARAM_STRING);
  mode.choices = {"tcp", "uds"};
  EXPECT_EQ(check_param_value(mode, "uds"), "");
  EXPECT_EQ(check_param_value(mode, "udp"), "'udp' is not one of tcp, uds");
  ParamSpec level = spec("level", FANOUT_PARAM_INT);
  level.choices = {"1", "2", "3"};
  EXPECT_EQ(check_param_value(level, "4"), "'4' is not one of 1, 2, 3");
  EXPECT_EQ(check_param_value(level, "x"), "'x' is not an integer");
  ParamSpec count = spec("count", FANOUT_PARAM_INT);
  count.min = "1", count.max = "10";
  EXPECT_EQ(check_param_value(count, "1"), "");
  EXPECT_EQ(check_param_value(count, "10"), "");
  EXPECT_EQ(check_param_value(count, "0"), "'0' is not >= 1");
  EXPECT_EQ(check_param_value(count, "11"), "'11' is not <= 10");
  // Integers compare exactly, beyond a double's 53 bits.
  ParamSpec big = spec("big", FANOUT_PARAM_INT);
  big.max = "9007199254740993";
  EXPECT_EQ(check_param_value(big, "9007199254740993"), "");
  EXPECT_EQ(check_param_value(big, "9007199254740994"), "'9007199254740994' is not <= 9007199254740993");
  ParamSpec rate = spec("rate", FANOUT_PARAM_FLOAT);
  rate.min = "0", rate.min_exclusive = true;
  EXPECT_EQ(check_param_value(rate, "0.001"), "");
  EXPECT_EQ(check_param_value(rate, "0"), "'0' is not > 0");
  EXPECT_EQ(describe_constraints(rate), "> 0");
}
