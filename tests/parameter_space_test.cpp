#include <gtest/gtest.h>

#include "common/error.h"
#include "orchestrator/parameter_space.h"
#include "tests/expect_throw.h"

using namespace fanout;

namespace {
std::vector<std::string> render(const std::vector<ParameterPoint>& pts) {
  std::vector<std::string> out;
  for (auto& p : pts) {
    std::string s;
    for (auto& [k, v] : p.pairs()) s += k + "=" + v + " ";
    out.push_back(s);
  }
  return out;
}
}  // namespace

TEST(ParameterSpace, ProductFirstAxisOutermost) {
  ParameterSpace s;
  s.add("a", {"1", "2"});
  s.add("b", {"x", "y", "z"});
  s.add("c", {"k"});
  EXPECT_EQ(s.cardinality().value_or(0), 6u);
  auto pts = render(s.expand());
  ASSERT_EQ(pts.size(), 6u);
  EXPECT_EQ(pts[0], "a=1 b=x c=k ");
  EXPECT_EQ(pts[1], "a=1 b=y c=k ");
  EXPECT_EQ(pts[3], "a=2 b=x c=k ");
  EXPECT_EQ(pts[5], "a=2 b=z c=k ");
}

// A point keeps its values; the names are one list for the whole space (a planned run's memory was half names).
TEST(ParameterSpace, PointsShareOneListOfNames) {
  ParameterSpace s;
  s.add("a", {"1", "2"});
  s.add("b", {"x", "y"});
  auto pts = s.expand();
  ASSERT_EQ(pts.size(), 4u);
  ASSERT_TRUE(pts[0].names);
  for (auto& p : pts) EXPECT_EQ(p.names.get(), pts[0].names.get());
  EXPECT_EQ(pts[3].name(1), "b");
  ASSERT_NE(pts[3].find("b"), nullptr);
  EXPECT_EQ(*pts[3].find("b"), "y");
  EXPECT_EQ(pts[3].find("c"), nullptr);
}

TEST(ParameterSpace, ZipAdvancesTogether) {
  ParameterSpace s;
  s.add("nodes", {"1", "2", "4"});
  s.add("mode", {"p", "q"});
  s.add("tasks", {"8", "16", "32"});
  s.zip({"nodes", "tasks"}, "--zip");
  auto pts = render(s.expand());
  ASSERT_EQ(pts.size(), 6u);
  EXPECT_EQ(pts[0], "nodes=1 tasks=8 mode=p ");
  EXPECT_EQ(pts[1], "nodes=1 tasks=8 mode=q ");
  EXPECT_EQ(pts[2], "nodes=2 tasks=16 mode=p ");
  EXPECT_EQ(pts[5], "nodes=4 tasks=32 mode=q ");
}

TEST(ParameterSpace, ZipOfUnequalListsIsAnError) {
  ParameterSpace s;
  s.add("a", {"1", "2"});
  s.add("b", {"1", "2", "3"});
  try {
    s.zip({"a", "b"}, "exp.toml:7");
    FAIL();
  } catch (const UserError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("exp.toml:7"), std::string::npos) << m;
    EXPECT_NE(m.find("equal length"), std::string::npos) << m;
  }
  EXPECT_THROW_WITH(s.zip({"a", "nope"}, "z"), UserError, "z: zip names unknown parameter 'nope'");
  EXPECT_THROW_WITH(s.zip({"a"}, "z"), UserError, "z: a zip needs at least two parameters");
}

TEST(ParameterSpace, ExclusionsDropMatchingPoints) {
  ParameterSpace s;
  s.add("a", {"1", "2", "3"});
  s.add("b", {"x", "y"});
  s.exclude({{{"a", {"2", "3"}}, {"b", {"y"}}}, "--exclude"});
  auto pts = render(s.expand());
  ASSERT_EQ(pts.size(), 4u);
  for (auto& p : pts) EXPECT_TRUE(p.find("b=y") == std::string::npos || p.find("a=1") != std::string::npos) << p;
  EXPECT_THROW_WITH(s.exclude({{{"zz", {"1"}}}, "--exclude"}), UserError, "--exclude: exclusion names unknown parameter 'zz'");
}

TEST(ParameterSpace, ScalarsAndDuplicates) {
  ParameterSpace s;
  s.add("a", {"1"});
  EXPECT_EQ(s.expand().size(), 1u);
  EXPECT_THROW_WITH(s.add("a", {"2"}), UserError, "parameter 'a' is declared twice");
  EXPECT_THROW_WITH(s.add("b", {}), UserError, "parameter 'b' has no values");
}
