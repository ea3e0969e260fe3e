#include <gtest/gtest.h>

#include <cstdlib>

#include "orchestrator/plugin_loader.h"
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
  ASSERT_EQ(experiments, (std::vector<std::string>{"calibration_sleep", "calibration_copy", "quickstart"}));
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
  auto e = open_error(broken_plugin(3));
  EXPECT_EQ(e.kind(), PluginErrorKind::NotAPlugin);
  EXPECT_NE(std::string(e.what()).find("is not a fanout plugin"), std::string::npos) << e.what();
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
  EXPECT_EQ(scan.refused.size(), 2u);  // wrong ABI, not a plugin
}
