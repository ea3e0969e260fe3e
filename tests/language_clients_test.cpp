// The tensor client's C API and its C, Fortran and Python clients against real redis-servers running the
// module: in each language every dtype and shape round-trips, standalone and on a 3-shard Redis Cluster, and the
// C++ client reads what each language wrote, element for element. Then sweeps whose throughput clients,
// aggregation producers and Python consumers run in those languages through fanout, on the local launcher.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <tuple>
#include <memory>
#include <string>
#include <vector>

#include "plugins/smartsim/redis_server.h"
#include "tests/redis_test_server.h"
#include "plugins/smartsim/tensor_client.h"
#include "common/files.h"
#include "test_util.h"

using namespace smartsim;
namespace fs = std::filesystem;
namespace test = fanout::test;

namespace {

// Ports 24000-25999, a block of 100 per test process, apart from smartsim_test's and the Slurm tests'.
int base_port() { return 24000 + (getpid() % 20) * 100; }

RedisServerConfig config(const test::TempDir& d, int port, bool cluster = false) { return test::redis_test_config(d, port, cluster); }

struct Language {
  std::string name;
  std::vector<std::string> argv;  // the round-trip program, before its key prefix
};

std::vector<Language> languages() {
  const fs::path build = test::build_dir();
  return {{"c", {(build / "roundtrip-c").string()}},
          {"fortran", {(build / "roundtrip-fortran").string()}},
          {"python", {"/usr/bin/python3", (fs::path(FANOUT_SOURCE_DIR) / "tests" / "clients" / "roundtrip.py").string()}}};
}

// What every round-trip program stores under <prefix>_<dtype>_<ndims> (fanout_tensor_client.h's enum order).
const DType kEnumOrder[] = {DType::Float, DType::Double, DType::Int8, DType::Int16, DType::Int32, DType::Int64, DType::UInt8, DType::UInt16};
const std::vector<std::vector<size_t>> kShapes = {{7}, {3, 4}, {2, 3, 5}};

double element(const std::vector<char>& bytes, DType t, size_t i) {
  auto at = [&](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, bytes.data() + i * sizeof v, sizeof v);
    return double(v);
  };
  switch (t) {
    case DType::Float: return at(float{});
    case DType::Double: return at(double{});
    case DType::Int8: return at(int8_t{});
    case DType::Int16: return at(int16_t{});
    case DType::Int32: return at(int32_t{});
    case DType::Int64: return at(int64_t{});
    case DType::UInt8: return at(uint8_t{});
    case DType::UInt16: return at(uint16_t{});
  }
  return -1;
}

// Each language's program round-trips its tensors, then C++ reads every one with the dtype and shape it was
// stored with and finds element i == i % 100.
void every_language_round_trips(const std::string& ssdb, bool cluster, const ClientOptions& cxx) {
  Client reader(cxx);
  for (auto& lang : languages()) {
    const std::string prefix = lang.name + (cluster ? "_cluster" : "_standalone");
    auto argv = lang.argv;
    argv.push_back(prefix);
    auto r = test::run_command(argv, "/",
                               {{"SSDB", ssdb}, {"SR_DB_TYPE", cluster ? "Clustered" : "Standalone"}, {"SR_DB_PASSWORD", "test-password"},
                                {"PYTHONPATH", (test::build_dir() / "python").string()}},
                               120);
    ASSERT_EQ(r.exit_code, 0) << lang.name << ": " << r.out << r.err;
    EXPECT_EQ(r.out, "ok 24\n") << lang.name << " (8 dtypes x 3 shapes)";
    for (int d = 1; d <= 8; ++d)
      for (auto& dims : kShapes) {
        const DType t = kEnumOrder[d - 1];
        size_t n = 1;
        for (size_t x : dims) n *= x;
        std::vector<char> bytes(n * dtype_size(t));
        const std::string key = prefix + "_" + std::to_string(d) + "_" + std::to_string(dims.size());
        ASSERT_NO_THROW(reader.unpack_tensor(key, t, dims, bytes.data(), bytes.size())) << key;
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(element(bytes, t, i), double(i % 100)) << key << " element " << i;
      }
  }
}

}  // namespace

TEST(LanguageClients, EveryDtypeAndShapeRoundTripsInEachLanguageStandaloneAndOnACluster) {
  test::TempDir d;
  {
    RedisServer server(config(d, base_port()));
    ClientOptions o;
    o.addresses = {server.address()};
    o.password = "test-password";
    every_language_round_trips(server.address(), false, o);
  }
  std::vector<std::unique_ptr<RedisServer>> shards;
  std::vector<std::string> addrs;
  for (int i = 0; i < 3; ++i) {
    shards.push_back(std::make_unique<RedisServer>(config(d, base_port() + 10 + i, true)));
    addrs.push_back(shards.back()->address());
  }
  create_cluster(addrs, "test-password", 60);
  ClientOptions o;
  o.addresses = {addrs[0]};
  o.cluster = true;
  o.password = "test-password";
  every_language_round_trips(addrs[0], true, o);  // 72 keys per language over 3 shards: routing in every client
}

TEST(LanguageClients, ConnectingToNothingFailsWithAReasonInEachLanguage) {
  const int dead = test::free_tcp_port();  // nothing listens there
  for (auto& lang : languages()) {
    auto argv = lang.argv;
    argv.push_back("x");
    auto r = test::run_command(argv, "/",
                               {{"SSDB", "127.0.0.1:" + std::to_string(dead)}, {"SR_CONN_TIMEOUT", "500"},
                                {"PYTHONPATH", (test::build_dir() / "python").string()}},
                               60);
    EXPECT_NE(r.exit_code, 0) << lang.name;
    EXPECT_NE((r.out + r.err).find(std::to_string(dead)), std::string::npos) << lang.name << " names the address: " << r.out << r.err;
  }
}

// Each language's clients through fanout: one run per language, each client's samples recorded as the rank's own
// (measured and warmup apart, per-sample start times on the rank's clock), session names carrying the language.
TEST(LanguageClients, ThroughputSweepRunsEachLanguagesClients) {
  test::TempDir d;
  auto r = test::run_fanout(d.path, {"throughput_standard", "--exp_name=lang", "--languages=[cpp,c,fortran,python]", "--db_cpus=1",
                                     "--db_nodes=1", "--client_nodes=1", "--clients_per_node=2", "--tensor_bytes=4096", "--iterations=4",
                                     "--net_ifname=lo", "--db_port=" + std::to_string(base_port() + 30)},
                            300);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path db = d.path / "results" / "lang" / "fanout.sqlite";
  auto rows = test::sql_rows(db, "SELECT p.value, r.session, sum(s.metric='put_tensor' AND s.warmup=0), sum(s.metric='put_tensor' AND s.warmup=1), "
                                 "sum(s.metric='unpack_tensor' AND s.warmup=0), sum(s.metric='client()'), sum(s.metric='main()'), "
                                 "min(s.value * (s.metric='loop_bandwidth') + 1e30 * (s.metric!='loop_bandwidth')) "
                                 "FROM runs r JOIN parameters p ON p.run_id=r.id AND p.name='languages' JOIN samples s ON s.run_id=r.id "
                                 "WHERE s.role='throughput' GROUP BY r.id ORDER BY p.value");
  ASSERT_EQ(rows.size(), 4u);
  for (auto& row : rows) {
    EXPECT_EQ(row[1].rfind("throughput-sess-" + row[0] + "-N1-T2-", 0), 0u) << row[1];
    EXPECT_EQ(row[2], "8") << row[0] << ": 2 clients x 4 measured put_tensor";
    EXPECT_EQ(row[3], "2") << row[0] << ": 1 warmup each";
    EXPECT_EQ(row[4], "8") << row[0];
    EXPECT_EQ(row[5], "2") << row[0];
    EXPECT_EQ(row[6], "2") << row[0];
    EXPECT_GT(std::stod(row[7]), 0) << row[0];
  }
  // The clients' sample times lie within the rank's main(): one clock for every language.
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM samples s JOIN samples m ON m.run_id=s.run_id AND m.rank=s.rank AND m.role=s.role "
                              "AND m.metric='main()' WHERE s.metric='put_tensor' AND (s.t_start < m.t_start OR s.t_start > m.t_start + m.value)"),
            "0");
  // A language fanout has no client for is refused before anything runs; so are languages for experiments whose
  // clients are C++ only.
  auto bad = test::run_fanout(d.path, {"throughput_standard", "--exp_name=bad", "--languages=[c,julia]", "--dry_run"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("julia"), std::string::npos) << bad.err;
  auto inf = test::run_fanout(d.path, {"inference_standard", "--exp_name=bad2", "--languages=fortran", "--dry_run"});
  EXPECT_EQ(inf.exit_code, 2);
  EXPECT_NE(inf.err.find("--languages"), std::string::npos) << inf.err;
}

// Aggregation with producers in C, Fortran and Python, and SmartSim-Scaling's two Python-consumer variants: every
// consumer iteration fetched every producer's whole dataset.
TEST(LanguageClients, AggregationProducersAndPythonConsumers) {
  test::TempDir d;
  const std::string port = std::to_string(base_port() + 40);
  auto agg = test::run_fanout(d.path, {"aggregation_scaling", "--exp_name=agg", "--languages=[c,fortran,python]", "--db_nodes=1", "--db_cpus=1",
                                       "--client_nodes=1", "--clients_per_node=2", "--tensor_bytes=1024", "--tensors_per_dataset=3",
                                       "--client_threads=2", "--iterations=3", "--net_ifname=lo", "--db_port=" + port},
                              300);
  ASSERT_EQ(agg.exit_code, 0) << agg.err;
  auto py = test::run_fanout(d.path, {"aggregation_scaling_python", "--exp_name=aggpy", "--languages=[cpp,fortran]", "--db_nodes=1",
                                      "--db_cpus=1", "--client_nodes=1", "--clients_per_node=2", "--tensor_bytes=1024",
                                      "--tensors_per_dataset=3", "--client_threads=2", "--iterations=3", "--net_ifname=lo",
                                      "--db_port=" + std::to_string(base_port() + 50)},
                             300);
  ASSERT_EQ(py.exit_code, 0) << py.err;
  auto fsr = test::run_fanout(d.path, {"aggregation-scaling-python-fs", "--exp_name=aggfs", "--client_nodes=1", "--clients_per_node=2",
                                       "--tensor_bytes=1024", "--tensors_per_dataset=3", "--client_threads=2", "--iterations=3"},
                              300);
  ASSERT_EQ(fsr.exit_code, 0) << fsr.err;
  for (auto [exp, runs, consumer] : {std::tuple{"agg", 3, "consumer"}, std::tuple{"aggpy", 2, "consumer_python"},
                                     std::tuple{"aggfs", 1, "fs_consumer_python"}}) {
    const fs::path db = d.path / "results" / exp / "fanout.sqlite";
    EXPECT_EQ(test::sql_one(db, "SELECT count(DISTINCT run_id) FROM samples WHERE metric='get_list' AND warmup=0 AND role='" +
                                    std::string(consumer) + "'"),
              std::to_string(runs))
        << exp;
    // bytes = bandwidth x time = 2 producers x 3 tensors x 1024 bytes, every measured and warmup iteration.
    auto bytes = test::sql_rows(db, "SELECT b.value * g.value FROM samples b JOIN samples g ON g.run_id=b.run_id AND g.iteration=b.iteration "
                                    "AND g.metric='get_list' WHERE b.metric='get_list_bandwidth'");
    ASSERT_EQ(bytes.size(), size_t(runs * 4)) << exp << ": 3 measured + 1 warmup iterations per run";
    for (auto& b : bytes) EXPECT_NEAR(std::stod(b[0]), 2 * 3 * 1024, 1e-3) << exp;
    EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM samples WHERE metric='put_dataset' AND warmup=0"), std::to_string(runs * 2 * 3)) << exp;
  }
  EXPECT_EQ(test::sql_one(d.path / "results" / "aggfs" / "fanout.sqlite", "SELECT subcommand FROM experiments LIMIT 1"), "aggregation_scaling_python_fs")
      << "the hyphenated name is SmartSim-Scaling's (python-fire) spelling of the same experiment";
}

// Installed, the client is what a user's own simulation links against, as it would SmartRedis: a C program
// built with pkg-config, a Fortran program using the installed module, and the Python package imported from the
// prefix, each of them loading the installed library (they name the unreachable address they were given).
TEST(LanguageClients, TheInstalledClientBuildsAndLoadsInEachLanguage) {
  test::TempDir d;
  const fs::path prefix = d.path / "prefix";
  auto inst = test::run_command({"/usr/bin/cmake", "--install", test::build_dir().string(), "--prefix", prefix.string()}, d.path, {}, 120);
  ASSERT_EQ(inst.exit_code, 0) << inst.err;
  const std::vector<std::pair<std::string, std::string>> pc = {{"PKG_CONFIG_PATH", (prefix / "lib" / "pkgconfig").string()}};
  auto pkg_config = [&](const std::string& package) {
    auto flags = test::run_command({"/usr/bin/pkg-config", "--cflags", "--libs", package}, d.path, pc, 30);
    EXPECT_EQ(flags.exit_code, 0) << flags.err;
    EXPECT_NE(flags.out.find(prefix.string()), std::string::npos) << flags.out << ": the prefix it was installed to";
    std::vector<std::string> words;
    for (size_t i = 0, j; i < flags.out.size(); i = j + 1) {
      j = flags.out.find_first_of(" \n", i);
      if (j == std::string::npos) j = flags.out.size();
      if (j > i) words.push_back(flags.out.substr(i, j - i));
    }
    return words;
  };
  fanout::write_file_atomic(d.path / "user.c",
                     "#include <stdio.h>\n#include <fanout_tensor_client.h>\n"
                     "int main(void) { fanout_tc* c = fanout_tc_connect_env(); if (c) return 3;\n"
                     "  printf(\"v%d %s\\n\", fanout_tc_api_version(), fanout_tc_error(NULL)); return 0; }\n");
  fanout::write_file_atomic(d.path / "user.f90",
                     "program user\n  use fanout_tensor_client\n  type(tensor_client) :: c\n"
                     "  if (connect_env(c) == 0) error stop 3\n  print '(a)', client_error(c)\nend program\n");
  std::vector<std::string> cc = {"/usr/bin/cc", (d.path / "user.c").string(), "-o", (d.path / "user_c").string()};
  std::vector<std::string> fc = {"/usr/bin/gfortran", (d.path / "user.f90").string(), "-o", (d.path / "user_f").string()};
  for (auto& w : pkg_config("fanout-tensor-client")) cc.push_back(w);
  for (auto& w : pkg_config("fanout-tensor-client-fortran")) fc.push_back(w);
  for (auto& argv : {cc, fc}) {
    auto b = test::run_command(argv, d.path, {}, 120);
    ASSERT_EQ(b.exit_code, 0) << argv[0] << ": " << b.err;
  }
  const int dead = test::free_tcp_port();
  const std::vector<std::pair<std::string, std::string>> env = {{"SSDB", "127.0.0.1:" + std::to_string(dead)}, {"SR_CONN_TIMEOUT", "500"}};
  auto c = test::run_command({(d.path / "user_c").string()}, d.path, env, 30);
  EXPECT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(c.out.rfind("v1 ", 0), 0u) << c.out;
  EXPECT_NE(c.out.find(std::to_string(dead)), std::string::npos) << c.out;
  auto f = test::run_command({(d.path / "user_f").string()}, d.path, env, 30);
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_NE(f.out.find(std::to_string(dead)), std::string::npos) << f.out;
  // The package is where Debian's Python looks under /usr/local (lib/python3.X/dist-packages); the installed
  // scaling client finds it next to itself.
  auto py = test::run_command({(prefix / "bin" / "fanout-tensor-client-python").string(), "throughput", "0", "1024", "1", "0", "1"}, d.path, env, 30);
  EXPECT_EQ(py.exit_code, 1) << py.out << py.err;
  EXPECT_NE(py.err.find(std::to_string(dead)), std::string::npos) << py.err;
}
