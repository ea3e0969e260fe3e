#include <gtest/gtest.h>

#include "common/error.h"
#include "common/files.h"
#include "results/sample_file.h"
#include "tests/expect_throw.h"
#include "tests/test_util.h"

using namespace fanout;

TEST(SampleFile, RoundTripConvertsMonotonicToWallTime) {
  test::TempDir dir;
  auto f = dir.path / "r.samples";
  {
    SampleWriter w(f, 3, "client", "n7", /*mono*/ 1'000'000'000, /*wall*/ 1'700'000'000'000'000'000);
    ASSERT_TRUE(w.record("put_tensor", "s", -1, 1'500'000'000, 0.25, true));
    ASSERT_TRUE(w.record("put_tensor", "s", 0, 2'000'000'000, 0.5, false));
    ASSERT_TRUE(w.record("loop_time", "s", 0, 2'000'000'000, 1.5, false));
  }
  std::vector<std::tuple<std::string, int64_t, double, double, bool>> got;
  auto info = read_sample_file(f, [&](const Sample& s) {
    EXPECT_EQ(s.rank, 3);
    EXPECT_EQ(s.role, "client");
    got.emplace_back(std::string(s.metric), s.iteration, s.t_start_s, s.value, s.warmup);
  });
  EXPECT_EQ(info.samples, 3u);
  EXPECT_EQ(info.node, "n7");
  EXPECT_FALSE(info.truncated);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(std::get<0>(got[0]), "put_tensor");
  EXPECT_TRUE(std::get<4>(got[0]));
  EXPECT_NEAR(std::get<2>(got[1]), 1'700'000'001.0, 1e-6);  // wall anchor + 1 s
  EXPECT_EQ(std::get<0>(got[2]), "loop_time");
  EXPECT_DOUBLE_EQ(std::get<3>(got[2]), 1.5);
}

TEST(SampleFile, TruncatedTailIsReportedNotThrown) {
  test::TempDir dir;
  auto f = dir.path / "r.samples";
  {
    SampleWriter w(f, 0, "x", "n1", 0, 0);
    for (int i = 0; i < 10; ++i) w.record("m", "s", i, 0, i, false);
  }
  std::string data = read_file(f);
  data.resize(data.size() - 5);
  size_t n = 0;
  auto info = decode_samples(data, "t", [&](const Sample&) { ++n; });
  EXPECT_TRUE(info.truncated);
  EXPECT_EQ(n, 9u);
}

TEST(SampleFile, GarbageIsAClearError) {
  EXPECT_THROW_WITH(decode_samples("hello world, not samples at all", "f", [](const Sample&) {}), UserError,
                    "f: not a fanout sample file (bad header)");
  test::TempDir dir;
  auto f = dir.path / "r.samples";
  { SampleWriter w(f, 0, "x", "n1", 0, 0); }
  std::string data = read_file(f) + "Z";
  try {
    decode_samples(data, "f.samples", [](const Sample&) {});
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("f.samples: corrupt sample file at byte"), std::string::npos) << e.what();
  }
  std::string undefined = read_file(f) + std::string("S\x05\x00", 3) + std::string(25, '\0');
  EXPECT_THROW_WITH(decode_samples(undefined, "f", [](const Sample&) {}), UserError, "sample names undefined metric 5");
}

// A sample time so far from the anchor that t - anchor overflows int64 is corrupt, not undefined behaviour
// (found by tests/fuzz: corpus/sample_file/repro_time_overflow).
TEST(SampleFile, TimeFarFromTheAnchorIsCorrupt) {
  test::TempDir dir;
  auto f = dir.path / "r.samples";
  {
    SampleWriter w(f, 0, "x", "n1", /*mono*/ INT64_MAX, 0);
    ASSERT_TRUE(w.record("m", "s", 0, INT64_MIN, 1.0, false));
  }
  EXPECT_THROW_WITH(read_sample_file(f, [](const Sample&) {}), UserError, "sample time is out of range");
}

// Issue 50: a rank's declaration of a metric's direction travels in the file ('D' record) beside its samples; the
// table's entry is written when the metric first appears, and a role's own declaration comes first.
TEST(SampleFile, MetricDeclarationsRoundTrip) {
  test::TempDir dir;
  auto f = dir.path / "r.samples";
  std::vector<std::string> first_seen;
  {
    SampleWriter w(f, 0, "client", "n1", 0, 0);
    w.on_new_metric([&](const std::string& m) { first_seen.push_back(m); });
    ASSERT_TRUE(w.declare("latency", 1, 0));
    ASSERT_TRUE(w.record("latency", "ms", 0, 1, 2.0, false));
    ASSERT_TRUE(w.record("latency", "us", 1, 2, 2000.0, false));  // the same name in another unit: seen once
    ASSERT_TRUE(w.declare("db_start", 3, 1));
    ASSERT_TRUE(w.record("rate", "bytes/s", 0, 3, 1e9, false));
    EXPECT_FALSE(w.declare("", 1, 0));
    EXPECT_FALSE(w.declare("x", 4, 0));
  }
  EXPECT_EQ(first_seen, (std::vector<std::string>{"latency", "rate"}));
  auto info = read_sample_file(f, [](const Sample&) {});
  EXPECT_EQ(info.samples, 3u);
  ASSERT_EQ(info.declarations.size(), 2u);
  EXPECT_EQ(info.declarations[0].metric, "latency");
  EXPECT_STREQ(better_text(info.declarations[0].better), "lower");
  EXPECT_EQ(info.declarations[0].flags, 0u);
  EXPECT_EQ(info.declarations[1].metric, "db_start");
  EXPECT_STREQ(better_text(info.declarations[1].better), "none");
  EXPECT_EQ(info.declarations[1].flags, 1u);
  // A direction outside 1..3 in a file is corruption, named with its offset.
  std::string bytes = read_file(f);
  const auto at = bytes.find(std::string("D\x07\x00", 3) + "latency");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 10] = 9;
  EXPECT_THROW_WITH(decode_samples(bytes, "forged", [](const Sample&) {}), UserError, "direction 9");
}
