// The SmartSim-like plugin against real redis-server processes: the RedisAI tensor module driven with raw
// redis-cli commands (RedisAI's documented forms), the tensor client on a standalone server and on a real
// 3-shard Redis Cluster (incl. a real MOVED redirection), timeouts, and throughput sweeps through fanout.
#include <gtest/gtest.h>

#include <algorithm>

#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numeric>
#include <set>

#include "common/files.h"
#include "common/text.h"
#include "plugins/smartsim/redis_server.h"
#include "tests/redis_test_server.h"
#include "plugins/smartsim/tensor_client.h"
#include "plugins/smartsim/tensor_wire.h"
#include "plugins/sdk/fanout_plugin.h"
#include "tests/test_util.h"

using namespace smartsim;
namespace fs = std::filesystem;
namespace test = fanout::test;

namespace {

// Redis needs its port before it starts (port 0 means "no TCP" to it, and a cluster also takes port + 10000): a
// block of 100 per test process (offsets reach +70), 21000-22999, apart from redisai_test's 27000-27999 and the
// Slurm tests' 23400-23501 and 26000-26015; RedisServer moves 100 up when a port is taken all the same.
int base_port() { return 21000 + (getpid() % 20) * 100; }

RedisServerConfig config(const test::TempDir& d, int port, bool cluster = false) { return test::redis_test_config(d, port, cluster); }

// A TCP socket listening on 127.0.0.1 at a port the kernel picked: (fd, port); fd -1 when that failed.
std::pair<int, int> listening_on_loopback() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
      listen(fd, 16) != 0)
    return {-1, 0};
  return {fd, ntohs(a.sin_port)};
}

std::string cli(int port, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/redis-cli", "-p", std::to_string(port), "--no-auth-warning", "-a", "test-password"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = test::run_command(argv, "/", {}, 20);
  return r.out + r.err;
}

ClientOptions options(const std::vector<std::string>& addrs, bool cluster) {
  ClientOptions o;
  o.addresses = addrs;
  o.cluster = cluster;
  o.password = "test-password";
  o.connect_timeout_ms = 2000;
  o.command_timeout_ms = 5000;
  return o;
}

// Every consumer iteration fetched each producer's whole dataset: bytes (bandwidth x time) = producers x
// tensors_per_dataset x tensor_bytes.
void expect_every_dataset_fetched(const fs::path& db, int producers, int tensor_bytes) {
  auto rows = test::sql_rows(db, "SELECT p.value, b.value * g.value FROM samples b JOIN samples g ON g.run_id=b.run_id AND "
                                 "g.iteration=b.iteration AND g.metric='get_list' JOIN parameters p ON p.run_id=b.run_id AND "
                                 "p.name='tensors_per_dataset' WHERE b.metric='get_list_bandwidth'");
  ASSERT_FALSE(rows.empty());
  for (auto& row : rows) {
    double expect = double(producers) * std::stoi(row[0]) * tensor_bytes;
    EXPECT_NEAR(std::stod(row[1]), expect, expect * 1e-6) << "tensors_per_dataset=" << row[0];
  }
}

// A throughput_standard sweep on the local launcher, with the flags every test here shares (one database CPU,
// one client node, loopback unless given, a port of its own); returns the experiment's database.
fs::path throughput_sweep(const test::TempDir& d, const std::string& exp, int port_offset, std::vector<std::string> flags,
                          int expect_exit = 0) {
  std::vector<std::string> args = {"throughput_standard", "--exp_name=" + exp, "--db_cpus=1", "--client_nodes=1"};
  if (std::none_of(flags.begin(), flags.end(), [](const std::string& f) { return f.rfind("--db_port=", 0) == 0; }))
    args.push_back("--db_port=" + std::to_string(base_port() + port_offset));
  args.insert(args.end(), flags.begin(), flags.end());
  if (std::none_of(flags.begin(), flags.end(), [](const std::string& f) { return f.rfind("--net_ifname=", 0) == 0; }))
    args.push_back("--net_ifname=lo");
  auto r = test::run_fanout(d.path, args, 600);
  EXPECT_EQ(r.exit_code, expect_exit) << r.err;
  return d.path / "results" / exp / "fanout.sqlite";
}

}  // namespace

TEST(RedisAiModule, RawCommandsFromTheRedisAiDocs) {
  test::TempDir d;
  RedisServer server(config(d, base_port()));
  const int port = server.port();  // the port it got: another test's server may hold the one asked for
  EXPECT_EQ(cli(port, {"AI.TENSORSET", "mytensor", "FLOAT", "2", "2", "VALUES", "1", "2", "3", "4"}), "OK\n");
  std::string meta = cli(port, {"AI.TENSORGET", "mytensor", "META", "VALUES"});
  EXPECT_NE(meta.find("dtype\nFLOAT\nshape\n2\n2\nvalues\n1\n2\n3\n4"), std::string::npos) << meta;
  EXPECT_EQ(cli(port, {"AI.TENSORSET", "ints", "INT8", "3", "VALUES", "-128", "0", "127"}), "OK\n");
  EXPECT_NE(cli(port, {"AI.TENSORGET", "ints", "VALUES"}).find("-128\n0\n127"), std::string::npos);
  // Errors in RedisAI's words, and the server survives them.
  EXPECT_NE(cli(port, {"AI.TENSORGET", "missing", "META"}).find("tensor key is empty"), std::string::npos);
  EXPECT_NE(cli(port, {"AI.TENSORSET", "t", "FLOAT", "2", "BLOB", "abc"}).find("data length does not match tensor shape and type"), std::string::npos);
  EXPECT_NE(cli(port, {"AI.TENSORSET", "t", "COMPLEX", "2"}).find("invalid data type"), std::string::npos);
  EXPECT_NE(cli(port, {"AI.TENSORSET", "t", "FLOAT", "-2"}).find("invalid or negative value found in tensor shape"), std::string::npos);
  EXPECT_NE(cli(port, {"AI.TENSORSET", "t", "INT8", "1", "VALUES", "300"}).find("invalid value"), std::string::npos);
  EXPECT_NE(cli(port, {"AI.TENSORSET", "t", "FLOAT", "2", "VALUES", "1"}).find("wrong number of values"), std::string::npos);
  cli(port, {"SET", "plain", "x"});
  EXPECT_NE(cli(port, {"AI.TENSORGET", "plain", "BLOB"}).find("WRONGTYPE"), std::string::npos);
  EXPECT_NE(cli(port, {"AI.TENSORSET"}).find("wrong number of arguments"), std::string::npos);
  EXPECT_EQ(cli(port, {"PING"}), "PONG\n");
  // Persistence paths must not crash: SAVE writes the tensors with the module type's RDB callbacks.
  EXPECT_EQ(cli(port, {"SAVE"}), "OK\n");
}

// A server that cannot start says why in Redis's own words, whole: here the module is not executable (as the
// installed copy once was), and the log's advisory warnings and start banner are not the reason shown.
TEST(RedisServer, AServerThatStopsAtStartSaysWhyInRedissWords) {
  test::TempDir d;
  RedisServerConfig c = config(d, base_port() + 90);
  const fs::path copy = d.path / "redisai-0644.so";
  fs::copy_file(c.module, copy);
  fs::permissions(copy, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
  c.module = copy.string();
  try {
    RedisServer server(c);
    FAIL() << "a server with a module it cannot load started";
  } catch (const std::runtime_error& e) {
    const std::string why = e.what();
    EXPECT_NE(why.find("stopped at start (exit status "), std::string::npos) << why;
    EXPECT_NE(why.find("does not have execute permissions"), std::string::npos) << why;
    EXPECT_EQ(why.find("WARNING"), std::string::npos) << why;
    EXPECT_EQ(why.find("Redis is starting"), std::string::npos) << why;
  }
}

// Found by the tensor_wire fuzzer: "-\r\n" (an error reply with no text) was returned as "", which callers read
// as a tensor. Any error reply is an error; a well-formed tensor reply fills the caller's buffer.
TEST(TensorWire, AnEmptyErrorReplyIsAnErrorAndATensorLandsInTheBuffer) {
  auto reply_to = [](const std::string& bytes, smartsim::TensorMeta& meta, std::vector<char>& blob) {
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    EXPECT_EQ(write(sv[1], bytes.data(), bytes.size()), ssize_t(bytes.size()));
    close(sv[1]);
    redisContext* c = redisConnectFd(sv[0]);
    std::string error = smartsim::read_tensor_reply(c, meta, [&](const smartsim::TensorMeta& m) {
      blob.resize(m.bytes);
      return blob.data();
    });
    redisFree(c);
    return error;
  };
  smartsim::TensorMeta meta;
  std::vector<char> blob;
  EXPECT_EQ(reply_to("-\r\n", meta, blob), "ERR (the database sent an empty error)");
  EXPECT_EQ(reply_to("-ERR tensor key is empty\r\n", meta, blob), "ERR tensor key is empty");
  const std::string tensor = "*6\r\n$5\r\ndtype\r\n$4\r\nINT8\r\n$5\r\nshape\r\n*2\r\n:1\r\n:3\r\n$4\r\nblob\r\n$3\r\nabc\r\n";
  EXPECT_EQ(reply_to(tensor, meta, blob), "");
  EXPECT_EQ(meta.dtype, "INT8");
  EXPECT_EQ(meta.dims, (std::vector<size_t>{1, 3}));
  EXPECT_EQ(std::string(blob.begin(), blob.end()), "abc");
  EXPECT_THROW(reply_to(tensor.substr(0, tensor.size() - 4), meta, blob), smartsim::WireError) << "a cut reply";
}

TEST(TensorClient, RoundTripsEveryDtypeAndShapeStandalone) {
  test::TempDir d;
  RedisServer server(config(d, base_port() + 1));
  Client client(options({server.address()}, false));
  const std::vector<std::vector<size_t>> shapes = {{7}, {3, 5}, {2, 3, 4}, {224, 224, 3}};
  for (DType t : {DType::Float, DType::Double, DType::Int8, DType::Int16, DType::Int32, DType::Int64, DType::UInt8, DType::UInt16})
    for (auto& shape : shapes) {
      size_t n = std::accumulate(shape.begin(), shape.end(), size_t(1), std::multiplies<>());
      std::vector<unsigned char> in(n * dtype_size(t)), out(in.size());
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<unsigned char>(i * 131 + 7);
      std::string key = std::string("t_") + dtype_name(t) + "_" + std::to_string(shape.size());
      client.put_tensor(key, t, shape, in.data(), in.size());
      client.unpack_tensor(key, t, shape, out.data(), out.size());
      EXPECT_EQ(in, out) << key;
    }
  std::vector<float> buf(7);
  try {
    client.unpack_tensor("t_FLOAT_1", DType::Double, {7}, buf.data(), 7 * 8);
    FAIL();
  } catch (const ClientError& e) {
    EXPECT_NE(std::string(e.what()).find("the stored tensor is FLOAT [7], asked for DOUBLE [7]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(client.unpack_tensor("t_FLOAT_1", DType::Float, {8}, buf.data(), 32), ClientError);
  EXPECT_THROW(client.put_tensor("bad", DType::Float, {3}, buf.data(), 8), ClientError);
  try {
    client.unpack_tensor("no_such_tensor", DType::Float, {7}, buf.data(), 28);
    FAIL();
  } catch (const ClientError& e) {
    EXPECT_NE(std::string(e.what()).find("unpack_tensor no_such_tensor: "), std::string::npos) << e.what();
  }
  // The refused tensors were read off the connection whole: the same connection still answers correctly.
  std::vector<float> again(7, -1.0f);
  client.unpack_tensor("t_FLOAT_1", DType::Float, {7}, again.data(), 28);
  std::vector<float> expect(7);
  std::vector<unsigned char> raw(28);
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<unsigned char>(i * 131 + 7);
  std::memcpy(expect.data(), raw.data(), 28);
  EXPECT_EQ(std::memcmp(again.data(), expect.data(), 28), 0);
}

// Tensors far larger than the socket buffers: the payload goes out in several writev calls and the blob comes
// in over many reads, straight into the caller's memory.
TEST(TensorClient, LargeTensorsCrossTheSocketInPieces) {
  test::TempDir d;
  RedisServer server(config(d, base_port() + 8));
  Client client(options({server.address()}, false));
  const size_t n = size_t(12) << 20;  // 48 MiB of floats
  std::vector<float> in(n), out(n, 0.0f);
  for (size_t i = 0; i < n; ++i) in[i] = float(i % 100003) * 0.5f;
  client.put_tensor("big", DType::Float, {n}, in.data(), n * 4);
  client.unpack_tensor("big", DType::Float, {n}, out.data(), n * 4);
  EXPECT_TRUE(in == out);
  std::vector<float> small(4, 1.0f), back(4);
  client.put_tensor("after", DType::Float, {4}, small.data(), 16);
  client.unpack_tensor("after", DType::Float, {4}, back.data(), 16);
  EXPECT_EQ(small, back);
}

TEST(TensorClient, DatasetsAndLists) {
  test::TempDir d;
  RedisServer server(config(d, base_port() + 2));
  Client client(options({server.address()}, false));
  std::vector<float> a(16, 1.5f), b(32, 2.5f);
  for (int r = 0; r < 3; ++r) {
    std::string name = "aggregation_rank_" + std::to_string(r);
    client.put_dataset(name, {{"a", DType::Float, {16}, a.data(), 64}, {"b", DType::Float, {4, 8}, b.data(), 128}});
    EXPECT_TRUE(client.dataset_exists(name));
    client.append_to_list("iteration_0", name);
  }
  EXPECT_EQ(client.get_list_length("iteration_0"), 3);
  EXPECT_TRUE(client.poll_list_length("iteration_0", 3, 1, 3));
  EXPECT_FALSE(client.poll_list_length("iteration_0", 4, 1, 3));
  std::vector<std::vector<char>> tensors;
  EXPECT_EQ(client.get_datasets_from_list("iteration_0", tensors), 3u * (64 + 128));
  ASSERT_EQ(tensors.size(), 6u);
  EXPECT_EQ(std::memcmp(tensors[1].data(), b.data(), 128), 0);
  client.delete_list("iteration_0");
  EXPECT_EQ(client.get_list_length("iteration_0"), 0);
  EXPECT_FALSE(client.dataset_exists("never_put"));
}

TEST(TensorClient, ThreeShardClusterRoutingAndARealMovedRedirection) {
  test::TempDir d;
  std::vector<std::unique_ptr<RedisServer>> shards;
  std::vector<std::string> addrs;
  std::vector<int> ports;  // the ports the shards got
  for (int i = 0; i < 3; ++i) {
    shards.push_back(std::make_unique<RedisServer>(config(d, base_port() + 3 + i, true)));
    addrs.push_back(shards.back()->address());
    ports.push_back(shards.back()->port());
  }
  double secs = create_cluster(addrs, "test-password", 60);
  EXPECT_LT(secs, 60);
  // Each node has its own config epoch from the start, as redis-cli --cluster create gives them: with all at 0
  // the collisions were still being settled by gossip when the slot below moved, and the old owner could claim
  // it back at a newly higher epoch (each node then sent the client to the other: "too many cluster
  // redirections", in full suite runs on 2026-11-26 and 2026-11-28).
  std::set<std::string> epochs;
  for (int p : ports) {
    std::string info = cli(p, {"CLUSTER", "INFO"});
    auto at = info.find("cluster_my_epoch:");
    ASSERT_NE(at, std::string::npos) << info;
    epochs.insert(info.substr(at + 17, info.find_first_of("\r\n", at) - at - 17));
  }
  EXPECT_EQ(epochs.size(), 3u);
  EXPECT_EQ(epochs.count("0"), 0u);
  // Our slot function agrees with Redis for plain keys and hash tags.
  for (std::string k : {"a", "throughput_rank_17", "{aggregation_rank_3}.meta", "{user1000}.following", "foo{}{bar}", "{}x"})
    EXPECT_EQ(std::to_string(key_slot(k)) + "\n", cli(ports[0], {"CLUSTER", "KEYSLOT", k})) << k;
  Client client(options({addrs[0]}, true));
  std::vector<int32_t> in(100), out(100);
  std::iota(in.begin(), in.end(), 0);
  for (int k = 0; k < 50; ++k) {
    std::string key = "key_" + std::to_string(k);
    client.put_tensor(key, DType::Int32, {10, 10}, in.data(), 400);
    client.unpack_tensor(key, DType::Int32, {10, 10}, out.data(), 400);
    ASSERT_EQ(in, out) << key;
  }
  // Move one (empty) slot to another shard behind the client's back: its next request gets MOVED.
  const std::string key = "moving_key";
  const std::string slot = std::to_string(key_slot(key));
  std::string owner_port, target_id, target_port;
  for (int i = 0; i < 3; ++i) {
    // Without -c, only the slot's owner accepts the key; the others answer MOVED.
    if (cli(ports[size_t(i)], {"AI.TENSORSET", key, "INT8", "1"}) == "OK\n") {
      owner_port = std::to_string(ports[size_t(i)]);
      cli(ports[size_t(i)], {"DEL", key});
    } else if (target_id.empty()) {
      target_id = cli(ports[size_t(i)], {"CLUSTER", "MYID"});
      target_id.pop_back();
      target_port = std::to_string(ports[size_t(i)]);
    }
  }
  ASSERT_FALSE(owner_port.empty());
  ASSERT_FALSE(target_id.empty());
  // As redis-cli --cluster reshard moves a slot: IMPORTING on the target, MIGRATING on the owner, then NODE on the
  // target first, which bumps its config epoch above the others'. With NODE alone on each node in port order, a
  // ping from the owner (still claiming the slot, at a higher epoch than the target's) could give the slot back on
  // the target before the owner let go of it.
  std::string owner_id = cli(std::stoi(owner_port), {"CLUSTER", "MYID"});
  owner_id.pop_back();
  EXPECT_EQ(cli(std::stoi(target_port), {"CLUSTER", "SETSLOT", slot, "IMPORTING", owner_id}), "OK\n");
  EXPECT_EQ(cli(std::stoi(owner_port), {"CLUSTER", "SETSLOT", slot, "MIGRATING", target_id}), "OK\n");
  EXPECT_EQ(cli(std::stoi(target_port), {"CLUSTER", "SETSLOT", slot, "NODE", target_id}), "OK\n");
  for (int p : ports) {
    if (std::to_string(p) == target_port) continue;
    EXPECT_EQ(cli(p, {"CLUSTER", "SETSLOT", slot, "NODE", target_id}), "OK\n");
  }
  client.put_tensor(key, DType::Int32, {10, 10}, in.data(), 400);  // routed to the old owner, MOVED, retried
  EXPECT_NE(cli(std::stoi(target_port), {"-c", "AI.TENSORGET", key, "META"}).find("INT32"), std::string::npos)
      << "the tensor landed on the slot's new owner";
  client.unpack_tensor(key, DType::Int32, {10, 10}, out.data(), 400);
  EXPECT_EQ(in, out);
}

// Fault injection: one shard of a 3-shard cluster is SIGKILLed while a client loops over keys on every shard:
// the client fails with an error naming a shard's address within its command timeout, instead of hanging.
TEST(TensorClient, KilledShardMidLoopFailsTheClientWithinTheTimeout) {
  test::TempDir d;
  std::vector<std::unique_ptr<RedisServer>> shards;
  std::vector<std::string> addrs;
  for (int i = 0; i < 3; ++i) {
    shards.push_back(std::make_unique<RedisServer>(config(d, base_port() + 6 + i, true)));
    addrs.push_back(shards.back()->address());
  }
  create_cluster(addrs, "test-password", 60);
  ClientOptions o = options({addrs[0]}, true);
  // The premise: no healthy command takes as long as the timeout, so the first error is the dead shard's. The
  // timeout comes from the slowest round trip this machine gives now (a probe client's 200 put+unpack pairs,
  // twenty times over), at least 1 s.
  double worst_s = 0;
  {
    Client probe(o);
    std::vector<float> v(256, 1.0f), out(256);
    for (int k = 0; k < 200; ++k) {
      const auto t = std::chrono::steady_clock::now();
      const std::string key = "probe_" + std::to_string(k % 64);
      probe.put_tensor(key, DType::Float, {256}, v.data(), v.size() * 4);
      probe.unpack_tensor(key, DType::Float, {256}, out.data(), out.size() * 4);
      worst_s = std::max(worst_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
    }
  }
  o.command_timeout_ms = std::max(1000, int(20 * worst_s * 1000));
  o.connect_timeout_ms = o.command_timeout_ms;
  const double guard_s = std::max(30.0, 4.0 * o.command_timeout_ms / 1000);
  Client client(o);
  std::atomic<long> loops{0};
  std::atomic<int64_t> failed_at{0};
  std::atomic<bool> give_up{false};
  std::string error;  // written by the worker before failed_at, read after it
  std::thread worker([&] {
    std::vector<float> v(256, 1.0f), out(256);
    try {
      for (long k = 0; k < 10000000 && !give_up; ++k) {
        const std::string key = "loop_" + std::to_string(k % 64);  // 64 keys: every shard's slots
        client.put_tensor(key, DType::Float, {256}, v.data(), v.size() * 4);
        client.unpack_tensor(key, DType::Float, {256}, out.data(), out.size() * 4);
        ++loops;
      }
    } catch (const ClientError& e) {
      error = e.what();
    }
    failed_at = std::chrono::steady_clock::now().time_since_epoch().count();
  });
  // However this test ends, the worker thread stops and is joined (a joinable thread at scope exit aborts).
  struct Joiner {
    std::atomic<bool>& stop;
    std::thread& t;
    ~Joiner() {
      stop = true;
      if (t.joinable()) t.join();
    }
  } joiner{give_up, worker};
  ASSERT_TRUE(test::wait_for([&] { return loops > 200 || failed_at != 0; }, 60));
  ASSERT_EQ(failed_at.load(), 0) << error;
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(shards[1]->pid(), SIGKILL), 0);
  ASSERT_TRUE(test::wait_for([&] { return failed_at != 0; }, guard_s)) << "the client still runs " << guard_s << " s after its shard died";
  const double seconds = double(failed_at - killed_at.time_since_epoch().count()) / 1e9;
  EXPECT_LT(seconds, guard_s) << "a hang guard; the cause is checked below";
  EXPECT_NE(error.find(shards[1]->address()), std::string::npos) << "names the dead shard: " << error;
}

// The database a run starts is never an open server: a password is required, it listens on one address,
// protected mode is on, and the password is not on redis-server's command line (visible to every user).
TEST(RedisServer, PasswordRequiredOneAddressAndNoPasswordOnTheCommandLine) {
  test::TempDir d;
  RedisServer s(config(d, base_port() + 9));
  auto anon = test::run_command({"/usr/bin/redis-cli", "-p", std::to_string(s.port()), "PING"}, "/", {}, 20);
  EXPECT_NE((anon.out + anon.err).find("NOAUTH"), std::string::npos) << anon.out << anon.err;
  EXPECT_EQ(cli(s.port(), {"CONFIG", "GET", "bind"}), "bind\n127.0.0.1\n");
  EXPECT_EQ(cli(s.port(), {"CONFIG", "GET", "protected-mode"}), "protected-mode\nyes\n");
  const std::string cmdline = fanout::read_file("/proc/" + std::to_string(s.pid()) + "/cmdline");
  EXPECT_FALSE(cmdline.empty());
  EXPECT_EQ(cmdline.find("test-password"), std::string::npos) << cmdline;
}

// jemalloc's background purge thread (Debian's redis-server runs the module's libtorch on jemalloc) woke thousands
// of times a second behind every forward's freed activations and slowed the forward in the server by 1-3 %
// (bench/why.txt): the servers fanout starts run without it.
TEST(RedisServer, RunsWithoutJemallocsBackgroundPurgeThread) {
  test::TempDir d;
  RedisServer s(config(d, base_port() + 10));
  EXPECT_EQ(cli(s.port(), {"CONFIG", "GET", "jemalloc-bg-thread"}), "jemalloc-bg-thread\nno\n");
  // Allocates and frees (the value stays under execve's 128 KiB limit for one argument): a purge thread would exist.
  ASSERT_EQ(cli(s.port(), {"SET", "k", std::string(100000, 'x')}), "OK\n");
  ASSERT_EQ(cli(s.port(), {"DEL", "k"}), "1\n");
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(s.pid()) + "/task"))
    EXPECT_EQ(fanout::read_file(task.path() / "comm").find("jemalloc_bg"), std::string::npos) << task.path();
}

// Issue 41 item 9: a CLUSTER SLOTS reply with a negative slot (or a host that is not a string) made the client
// index out of bounds (SIGSEGV). A peer on a real socket answers each malformed reply in turn; the client refuses
// each with an error naming the server, and a well-formed one still works.
TEST(TensorClient, AMalformedClusterSlotsReplyIsAnErrorNotACrash) {
  const auto [fd, port] = listening_on_loopback();
  ASSERT_GE(fd, 0);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  auto master = "*3\r\n$9\r\n127.0.0.1\r\n:" + std::to_string(port) + "\r\n$2\r\nid\r\n";
  const std::vector<std::pair<std::string, std::string>> replies = {
      {"*1\r\n*3\r\n:-5\r\n:16383\r\n" + master, "has slots outside 0..16383"},
      {"*1\r\n*3\r\n:0\r\n:99999\r\n" + master, "has slots outside 0..16383"},
      {"*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n:1\r\n:2\r\n", "has no master [host, port]"},
      {"*1\r\n*3\r\n:0\r\n:16383\r\n*1\r\n$1\r\nx\r\n", "has no master [host, port]"},
      {"*1\r\n:7\r\n", "is not [first, last, master, ...]"},
      {"*1\r\n*3\r\n$1\r\n0\r\n:16383\r\n" + master, "has slots outside 0..16383"}};
  std::thread peer([&] {
    for (auto& [reply, why] : replies) {
      const int c = accept(fd, nullptr, nullptr);
      if (c < 0) return;
      char buf[256];
      if (read(c, buf, sizeof buf) > 0) (void)!write(c, reply.data(), reply.size());  // the answer to CLUSTER SLOTS
      read(c, buf, sizeof buf);  // until the client closes
      close(c);
    }
  });
  ClientOptions o = options({address}, true);
  o.password.clear();
  for (auto& [reply, why] : replies) {
    try {
      Client c(o);
      ADD_FAILURE() << "a malformed reply was taken: " << reply;
    } catch (const ClientError& e) {
      EXPECT_NE(std::string(e.what()).find("malformed CLUSTER SLOTS reply from " + address + ": range 0 " + why), std::string::npos) << e.what();
    }
  }
  peer.join();
  close(fd);
}

TEST(TensorClient, UnreachableDatabaseFailsWithinTheTimeoutNamingTheAddress) {
  // A listening socket that never accepts: connecting succeeds, the first command times out.
  const auto [fd, port] = listening_on_loopback();
  ASSERT_GE(fd, 0);
  std::string address = "127.0.0.1:" + std::to_string(port);
  ClientOptions o = options({address}, false);
  o.password.clear();
  o.command_timeout_ms = 300;
  for (bool put : {true, false}) {  // each direction has its own I/O path: both must time out, naming the address
    auto t0 = std::chrono::steady_clock::now();
    try {
      Client c(o);
      std::vector<float> v(4);
      if (put) c.put_tensor("k", DType::Float, {4}, v.data(), 16);
      else c.unpack_tensor("k", DType::Float, {4}, v.data(), 16);
      FAIL() << "no error";
    } catch (const ClientError& e) {
      EXPECT_NE(std::string(e.what()).find(address), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("command timeout 300 ms"), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20)) << "a hang guard: the message names the timeout";
  }
  close(fd);
  // A closed port: refused at once, with the address.
  o.addresses = {"127.0.0.1:1"};
  try {
    Client c(o);
    FAIL();
  } catch (const ClientError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot connect to the database at 127.0.0.1:1"), std::string::npos) << e.what();
  }
  setenv("SSDB", "", 1);
  EXPECT_THROW(ClientOptions::from_env(), ClientError);
  setenv("SSDB", "10.0.0.1:6379,10.0.0.2:6379", 1);
  setenv("SR_DB_TYPE", "Clustered", 1);
  setenv("SR_CMD_TIMEOUT", "250", 1);
  auto env = ClientOptions::from_env();
  EXPECT_EQ(env.addresses.size(), 2u);
  EXPECT_TRUE(env.cluster);
  EXPECT_EQ(env.command_timeout_ms, 250);
  setenv("SR_CMD_TIMEOUT", "soon", 1);
  EXPECT_THROW(ClientOptions::from_env(), ClientError);
  unsetenv("SSDB");
  unsetenv("SR_DB_TYPE");
  unsetenv("SR_CMD_TIMEOUT");
}

TEST(ThroughputSweep, StandardAndColocatedOnTheLocalLauncher) {
  test::TempDir d;
  fs::path db = throughput_sweep(d, "tp", 10, {"--db_nodes=[1,3]", "--clients_per_node=2", "--tensor_bytes=[1024,65536]", "--iterations=5",
                                              "--max_parallel=4"});
  // One database per db_nodes value, reused by both tensor sizes (SmartSim-Scaling's rule): 4 runs + 2 services.
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM runs WHERE status='COMPLETED'"), "6");
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM provenance WHERE key='shared_step' AND value='db'"), "2");
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM samples WHERE metric='db_start'"), "4") << "1 + 3 servers, not one set per run";
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM samples WHERE metric='db_stop'"), "4") << "each stopped once, after its group";
  // Each run names the service it used; the two runs of a group used the same one, and it ran before and after them.
  auto uses = test::sql_rows(db, "SELECT p.value, count(*), min(r.started_at) >= s.started_at, max(r.ended_at) <= s.ended_at, "
                                 "group_concat(DISTINCT d.value) FROM runs r JOIN provenance p ON p.run_id=r.id AND p.key='service' "
                                 "JOIN runs s ON s.path=p.value JOIN parameters d ON d.run_id=r.id AND d.name='db_nodes' GROUP BY p.value");
  ASSERT_EQ(uses.size(), 2u);
  for (auto& u : uses) {
    EXPECT_EQ(u[1], "2") << u[0];
    EXPECT_EQ(u[2], "1") << "the database was up before its runs started";
    EXPECT_EQ(u[3], "1") << "and stopped after they ended";
  }
  EXPECT_EQ(uses[0][4] + "," + uses[1][4], "1,3");
  // Issue 51: the report leads with each figure against what was swept (db_nodes, tensor_bytes).
  const auto plots = test::headline_plots(d.path, db.parent_path());
  EXPECT_NE(std::find(plots.begin(), plots.end(), "median put_tensor (throughput) by tensor_bytes"), plots.end()) << "median put_tensor (throughput) by tensor_bytes";
  EXPECT_NE(std::find(plots.begin(), plots.end(), "median loop_time (throughput) by db_nodes"), plots.end()) << "median loop_time (throughput) by db_nodes";
  EXPECT_NE(std::find(plots.begin(), plots.end(), "strong scaling: speedup of loop_time (throughput) by db_nodes"), plots.end()) << "strong scaling: speedup of loop_time (throughput) by db_nodes";
  ASSERT_FALSE(plots.empty());
  EXPECT_EQ(plots.front().rfind("median ", 0), 0u) << "first: " << plots.front();
  // Even with --max_parallel=4 the runs of one database go one at a time (SmartSim-Scaling's inner loop).
  for (auto& u : uses) {
    auto spans = test::sql_rows(db, "SELECT r.started_at, r.ended_at FROM runs r JOIN provenance p ON p.run_id=r.id AND p.key='service' "
                                    "WHERE p.value='" + u[0] + "' ORDER BY r.started_at");
    ASSERT_EQ(spans.size(), 2u);
    EXPECT_LE(std::stod(spans[0][1]), std::stod(spans[1][0])) << "two runs used database " << u[0] << " at once";
  }
  // SmartSim-Scaling's session names, with fanout's parameter hash where it puts an id.
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM runs WHERE session LIKE 'throughput-sess-cpp-N1-T2-DBN3-DBCPU1-ITER5-TB65536-%'"), "1");
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM runs WHERE session LIKE 'db-service-db_nodes3-db_cpus1-%'"), "1");
  // Only what throughput_standard uses is stored, in run.toml and the database alike: not the inference flags
  // (device, batch_size, db_tpq ...) its roles get as fixed defaults.
  EXPECT_EQ(test::sql_one(db, "SELECT group_concat(name) FROM (SELECT DISTINCT name FROM parameters ORDER BY name)"),
            "client_nodes,clients_per_node,db_cpus,db_nodes,db_port,iterations,languages,net_ifname,run_db_as_batch,"
            "tensor_bytes,warmup");
  for (auto& path : test::sql_rows(db, "SELECT path FROM runs")) {
    const std::string toml = fanout::read_file(fs::path(path[0]) / "run.toml");
    EXPECT_NE(toml.find("tensor_bytes"), std::string::npos) << path[0];
    for (const char* unused : {"device", "db_tpq", "batch_size", "model_dir", "net_type", "fs_dir"})
      EXPECT_EQ(toml.find(unused), std::string::npos) << unused << " in " << path[0] << "/run.toml";
  }
  // Every client: client() and main() once, 5 measured + 1 warmup put/unpack/loop.
  for (auto& row : test::sql_rows(db, "SELECT run_id, rank, sum(metric='put_tensor' AND warmup=0), sum(metric='put_tensor' AND warmup=1), "
                                      "sum(metric='client()'), sum(metric='loop_bandwidth') FROM samples WHERE role='throughput' "
                                      "GROUP BY run_id, rank")) {
    EXPECT_EQ(row[2], "5");
    EXPECT_EQ(row[3], "1");
    EXPECT_EQ(row[4], "1");
    EXPECT_EQ(row[5], "6");
  }
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM samples WHERE metric='cluster_create'"), "1") << "one cluster, reused by both runs";
  // Each database's generated password lives only in its service's 0600 files (smartsim.password, redis.conf):
  // not in run.toml, job scripts, logs, CSVs or the results database. command.toml is 0600 too.
  const fs::path exp = d.path / "results" / "tp";
  std::set<std::string> passwords;
  for (auto& e : fs::recursive_directory_iterator(exp))
    if (e.is_regular_file() && e.path().filename() == "smartsim.password") passwords.insert(fanout::read_file(e.path()));
  ASSERT_EQ(passwords.size(), 2u) << "one per database";
  int scanned = 0;
  for (auto& e : fs::recursive_directory_iterator(exp)) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    const bool secret = name == "smartsim.password" || name == "redis.conf" || name == "env.SR_DB_PASSWORD";  // its users' environment
    if (secret || name == "command.toml" || name == "kv.addr") {
      EXPECT_EQ(e.status().permissions() & (fs::perms::group_all | fs::perms::others_all), fs::perms::none) << e.path();
    }
    if (secret) continue;
    const std::string content = fanout::read_file(e.path());
    for (auto& pw : passwords) EXPECT_EQ(content.find(pw), std::string::npos) << "the password is in " << e.path();
    ++scanned;
  }
  EXPECT_GT(scanned, 20) << "run.toml, logs and samples of 6 runs";
  EXPECT_TRUE(fs::exists(exp / "command.toml"));
  auto c = test::run_fanout(d.path, {"throughput_colocated", "--exp_name=colo", "--nodes=2", "--db_cpus=1", "--clients_per_node=1",
                                     "--tensor_bytes=4096", "--iterations=3", "--net_ifname=lo", "--net_type=[tcp,uds]",
                                     "--db_port=" + std::to_string(base_port() + 20)});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(test::sql_one(d.path / "results" / "colo" / "fanout.sqlite", "SELECT count(*) FROM runs WHERE status='COMPLETED'"), "2");
  // pin_app_cpus (SmartSim's limit_app_cpus): the application leaves its node's database the CPUs it is pinned to.
  auto p = test::run_fanout(d.path, {"throughput_colocated", "--exp_name=pin", "--nodes=1", "--db_cpus=1", "--clients_per_node=1",
                                     "--tensor_bytes=4096", "--iterations=2", "--net_ifname=lo", "--net_type=uds", "--pin_app_cpus=true",
                                     "--db_port=" + std::to_string(base_port() + 23)});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const fs::path run = test::sql_one(d.path / "results" / "pin" / "fanout.sqlite", "SELECT path FROM runs");
  auto word_after = [](const std::string& log, const std::string& what) {
    const size_t at = log.find(what);
    if (at == std::string::npos) return std::string();
    const size_t from = at + what.size();
    return log.substr(from, log.find_first_of(" \n", from) - from);
  };
  const std::string db_set = word_after(fanout::read_file(run / "db_colocated.err"), "pinned to CPUs ");
  const std::string app_set = word_after(fanout::read_file(run / "throughput_colocated.err"), "application pinned to CPUs ");
  ASSERT_FALSE(db_set.empty());
  ASSERT_FALSE(app_set.empty()) << fanout::read_file(run / "throughput_colocated.err");
  for (auto& cpu : fanout::split(app_set, ',')) {
    const auto db_cpus = fanout::split(db_set, ',');
    EXPECT_EQ(std::count(db_cpus.begin(), db_cpus.end(), cpu), 0) << "CPU " << cpu << " is the database's (" << db_set << ")";
  }
}

// A shared database that cannot start: its runs are recorded FAILED without running, naming the service and
// where its logs are, and the driver exits non-zero instead of waiting for a database that never comes.
// --no_reuse, run for real: the database is part of every run's job (started, used, stopped within the run), no
// shared service run exists, and its password reached the clients through the job's rendezvous only.
TEST(ThroughputSweep, NoReuseStartsTheDatabaseInEveryRun) {
  test::TempDir d;
  fs::path db = throughput_sweep(d, "fresh", 30, {"--db_nodes=1", "--clients_per_node=1", "--tensor_bytes=[1024,4096]", "--iterations=3",
                                                 "--no_reuse"});
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM runs WHERE status='COMPLETED'"), "2");
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM runs"), "2") << "no service run";
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM provenance WHERE key IN ('service', 'shared_step')"), "0");
  // Each run started and stopped its own server.
  auto per_run = test::sql_rows(db, "SELECT run_id, sum(metric='db_start'), sum(metric='db_stop'), sum(metric='put_tensor' AND warmup=0) "
                                    "FROM samples GROUP BY run_id ORDER BY run_id");
  ASSERT_EQ(per_run.size(), 2u);
  for (auto& r : per_run) EXPECT_EQ(std::vector<std::string>(r.begin() + 1, r.end()), (std::vector<std::string>{"1", "1", "3"})) << r[0];
  int passwords = 0;
  for (auto& e : fs::recursive_directory_iterator(d.path / "results" / "fresh")) passwords += e.path().filename() == "smartsim.password";
  EXPECT_EQ(passwords, 0) << "without a service the password is never written to a file";
}

// While a sweep runs, its database's generated password is on no process's command line on this machine (the
// servers read it from their 0600 redis.conf, the clients from the service folder or the job's rendezvous).
TEST(ThroughputSweep, ThePasswordIsOnNoCommandLineWhileTheSweepRuns) {
  test::TempDir d;
  pid_t pid = test::spawn_fanout(d.path, {"throughput_standard", "--exp_name=argv", "--db_cpus=1", "--client_nodes=1", "--db_nodes=1",
                                          "--clients_per_node=2", "--tensor_bytes=[1024,2048,4096]", "--iterations=200", "--net_ifname=lo",
                                          "--db_port=" + std::to_string(base_port() + 35)},
                                 d.path / "err.txt");
  ASSERT_GT(pid, 0);
  auto cmdlines = [] {
    std::vector<std::string> all;
    for (auto& e : fs::directory_iterator("/proc")) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      try {
        all.push_back(fanout::read_file(e.path() / "cmdline"));
      } catch (const std::exception&) {
        // the process ended between the listing and the read (ESRCH): nothing of it to check
      }
    }
    return all;
  };
  fs::path password_file;
  ASSERT_TRUE(test::wait_for([&] {
    std::error_code ec;
    for (auto& e : fs::recursive_directory_iterator(d.path / "results", ec))
      if (e.path().filename() == "smartsim.password") password_file = e.path();
    // The service's `ready` (fanout_plugin.h): its server answers. Waiting for the password alone and stopping the
    // driver then could stop the rendezvous the database rank still needed before it started its server (seen
    // under a loaded ctest -j2: no server in 60 s).
    return !password_file.empty() && fs::exists(password_file.parent_path() / FANOUT_SERVICE_READY_FILE);
  }, 60)) << fanout::read_file(d.path / "err.txt");
  // The database is ready, and only the driver stops its server: with the driver stopped now, the server stays up
  // while every command line is read, however fast or slow the machine (event-driven; the sweep could end between
  // two scans before). Resumed afterwards.
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  struct Resume {
    pid_t pid;
    ~Resume() { kill(pid, SIGCONT); }
  } resume{pid};
  size_t seen = 0, servers = 0;
  ASSERT_TRUE(test::wait_for([&] {
    auto all = cmdlines();
    servers = std::count_if(all.begin(), all.end(), [&](const std::string& c) {
      // redis-server retitles itself "redis-server <addr>:<port>" once it runs: the sweep's own port names it.
      return c.find("redis-server") != std::string::npos && c.find(":" + std::to_string(base_port() + 35)) != std::string::npos;
    });
    seen = all.size();
    return servers > 0;
  }, 60));
  const std::string password = fanout::read_file(password_file);
  ASSERT_EQ(password.size(), 32u);
  for (auto& c : cmdlines()) EXPECT_EQ(c.find(password), std::string::npos) << "a command line holds the password: " << c;
  EXPECT_GT(seen, 3u);
  kill(pid, SIGCONT);
  int st = 0;
  ASSERT_TRUE(test::wait_for([&] { return waitpid(pid, &st, WNOHANG) == pid; }, 120)) << fanout::read_file(d.path / "err.txt");
  EXPECT_EQ(test::exit_status(st), 0) << fanout::read_file(d.path / "err.txt");
}

TEST(ThroughputSweep, RunsOfADatabaseThatNeverStartsFailNamingIt) {
  test::TempDir d;
  fs::path db = throughput_sweep(d, "down", 40, {"--db_nodes=1", "--clients_per_node=1", "--tensor_bytes=[1024,2048]", "--iterations=2",
                                                "--net_ifname=nosuchif0"},
                                 1);
  EXPECT_EQ(test::sql_one(db, "SELECT status FROM runs WHERE session LIKE 'db-service-%'"), "FAILED");
  auto runs = test::sql_rows(db, "SELECT status, reason FROM runs WHERE session LIKE 'throughput-sess-%'");
  ASSERT_EQ(runs.size(), 2u);
  for (auto& run : runs) {
    EXPECT_EQ(run[0], "FAILED");
    EXPECT_NE(run[1].find("not started: its shared db service db-service-db_nodes1-"), std::string::npos) << run[1];
    EXPECT_NE(run[1].find("logs: " + (d.path / "results" / "down").string()), std::string::npos) << run[1];
  }
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM samples WHERE role='throughput'"), "0");
}

// Groups are consecutive runs: when the database's parameters are not the outermost axes (db_port is declared
// after tensor_bytes), groups with equal values come back, and each gets a database of its own.
TEST(ThroughputSweep, GroupsThatComeBackGetTheirOwnDatabase) {
  test::TempDir d;
  fs::path db = throughput_sweep(d, "alt", 50, {"--db_nodes=1", "--clients_per_node=1", "--tensor_bytes=[1024,2048]",
                                               "--db_port=[" + std::to_string(base_port() + 50) + "," + std::to_string(base_port() + 60) + "]",
                                               "--iterations=2"});
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM runs WHERE status='COMPLETED'"), "8") << "4 runs, 4 databases";
  EXPECT_EQ(test::sql_one(db, "SELECT count(DISTINCT path) FROM runs WHERE session LIKE 'db-service-%'"), "4");
  EXPECT_EQ(test::sql_one(db, "SELECT count(DISTINCT value) FROM provenance WHERE key='service'"), "4");
}

// A run of a group that fails is retried next, against the same database, which stays up for it (its wall time
// allows for retries) and stops after the last attempt; the driver does not wait for anything else.
TEST(ThroughputSweep, RetriesOfAGroupsRunUseItsDatabaseThenItStops) {
  test::TempDir d;
  fs::path db = throughput_sweep(d, "retry", 55, {"--db_nodes=1", "--clients_per_node=1", "--tensor_bytes=[1024,2048]",
                                                 "--iterations=1000000000", "--walltime=2", "--max_retries=1"},
                                 1);
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM runs WHERE session LIKE 'throughput-sess-%' AND status='TIMEOUT'"), "4")
      << "2 runs x (1 + 1 retry), each stopped by its wall time";
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM runs WHERE session LIKE '%-retry1'"), "2");
  EXPECT_EQ(test::sql_one(db, "SELECT count(DISTINCT value) FROM provenance WHERE key='service'"), "1") << "every attempt used one database";
  // A retry runs right after its failed attempt, before the group's next run.
  auto order = test::sql_rows(db, "SELECT session FROM runs WHERE session LIKE 'throughput-sess-%' ORDER BY started_at");
  ASSERT_EQ(order.size(), 4u);
  EXPECT_EQ(order[1][0], order[0][0] + "-retry1");
  EXPECT_EQ(order[3][0], order[2][0] + "-retry1");
  EXPECT_EQ(test::sql_one(db, "SELECT status FROM runs WHERE session LIKE 'db-service-%'"), "COMPLETED") << "stopped by the driver, not its wall time";
  EXPECT_EQ(test::sql_one(db, "SELECT s.ended_at >= max(r.ended_at) FROM runs s, runs r WHERE s.session LIKE 'db-service-%' "
                              "AND r.session LIKE 'throughput-sess-%'"),
            "1");
}

TEST(AggregationSweep, ProducersAndAConsumerEndToEnd) {
  test::TempDir d;
  auto r = test::run_fanout(d.path, {"aggregation_scaling", "--exp_name=agg", "--db_nodes=[1,3]", "--db_cpus=1", "--client_nodes=1",
                                     "--clients_per_node=3", "--tensor_bytes=4096", "--tensors_per_dataset=[1,4]",
                                     "--client_threads=2", "--iterations=4", "--net_ifname=lo",
                                     "--db_port=" + std::to_string(base_port() + 60)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  fs::path db = d.path / "results" / "agg" / "fanout.sqlite";
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM runs WHERE status='COMPLETED'"), "6") << "4 runs + one database per db_nodes";
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM samples WHERE metric='db_start'"), "4") << "1 + 3 servers for 4 runs";
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM runs WHERE session LIKE 'aggregate-sess-cpp-N1-T3-DBN3-ITER4-TB4096-TPD4-CT2-%'"), "1");
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM samples WHERE role='producer' AND metric='put_dataset' AND warmup=0"), std::to_string(4 * 3 * 4));
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM samples WHERE role='consumer' AND metric='poll_list' AND warmup=0"), std::to_string(4 * 4));
  // Every iteration the consumer fetched all 3 producers' datasets.
  expect_every_dataset_fetched(db, 3, 4096);
}

TEST(AggregationSweep, FilesystemVariantThroughASharedFolder) {
  test::TempDir d;
  fs::path shared = d.path / "shared";
  auto r = test::run_fanout(d.path, {"aggregation_scaling_fs", "--exp_name=fs", "--client_nodes=1", "--clients_per_node=3",
                                     "--tensor_bytes=8192", "--tensors_per_dataset=[1,2]", "--client_threads=2", "--iterations=4",
                                     "--fs_dir=" + shared.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  fs::path db = d.path / "results" / "fs" / "fanout.sqlite";
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM runs WHERE status='COMPLETED'"), "2");
  expect_every_dataset_fetched(db, 3, 8192);
  // The consumer removed every iteration's folder: nothing is left behind in the shared folder.
  EXPECT_TRUE(fs::is_empty(shared)) << "left over in " << shared;
}

TEST(ThroughputSweep, DryRunOfSmartSimScalingsRealDefaultsListsEveryRunAndScript) {
  // client_nodes [128,256,512] x db_nodes [16,32,64] x 11 tensor sizes, clients_per_node 32 (the defaults):
  // 99 runs, each with its job script, without a cluster of that size (nothing is submitted or checked).
  test::TempDir d;
  auto r = test::run_fanout(d.path, {"throughput_standard", "--launcher=slurm", "--dry-run", "--db_nodes=[16,32,64]"}, 120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("# dry run: 99 run(s) of smartsim 'throughput_standard'"), std::string::npos) << r.out.substr(0, 300);
  // One database per db_nodes value (db_cpus is one value): 3 service jobs of 16, 32 and 64 nodes, each
  // listed before the 33 runs that use it, and the runs' jobs hold their clients only.
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = 0; (at = r.out.find(what, at)) != std::string::npos; ++at) ++n;
    return n;
  };
  EXPECT_EQ(count("# ---- job script for "), 99u + 3u);
  EXPECT_EQ(count("# ---- job script for service db-service-db_nodes64-db_cpus2-"), 1u);
  EXPECT_EQ(count("\nservice db-service-db_nodes"), 3u);
  EXPECT_EQ(count("#SBATCH --nodes=512"), 33u) << "a job of 512 client nodes per tensor size and database";
  EXPECT_EQ(count("#SBATCH --nodes=576"), 0u) << "no run holds its database";
  EXPECT_NE(r.out.find("throughput-sess-cpp-N512-T32-DBN64-DBCPU2-ITER100-TB4096000-"), std::string::npos);
  // --no_reuse: the database in every run's job, as before.
  auto fresh = test::run_fanout(d.path, {"throughput_standard", "--launcher=slurm", "--dry-run", "--db_nodes=[16,32,64]", "--no_reuse"}, 120);
  ASSERT_EQ(fresh.exit_code, 0) << fresh.err;
  size_t big = 0;
  for (size_t at = 0; (at = fresh.out.find("#SBATCH --nodes=576", at)) != std::string::npos; ++at) ++big;  // 512 clients + 64 db
  EXPECT_EQ(big, 11u) << "one job of 576 nodes per tensor size";
  EXPECT_EQ(fresh.out.find("\nservice "), std::string::npos);
  EXPECT_NE(r.out.find("clients_per_node=32"), std::string::npos);
  EXPECT_FALSE(fs::exists(d.path / "results")) << "a dry run writes nothing";
}

// Issue 19: a results folder with a space made every smartsim run fail (dir, logfile and loadmodule unquoted in
// redis.conf). Now quoted as Redis' own parser reads them back: a space, a quote, a backslash and UTF-8 work.
TEST(ThroughputSweep, AResultsFolderWithSpacesAndQuotesWorks) {
  test::TempDir d;
  const std::string dir = "my results/it's \"q\" \\ caf\xc3\xa9";
  auto db = throughput_sweep(d, "sp", 7, {"--results_dir=" + dir, "--db_nodes=1", "--clients_per_node=1", "--tensor_bytes=1024", "--iterations=2"});
  EXPECT_FALSE(fs::exists(db)) << "the database is in the asked folder, not results/";
  const fs::path real = d.path / dir / "sp" / "fanout.sqlite";
  EXPECT_EQ(test::sql_one(real, "SELECT count(*) FROM runs WHERE status='COMPLETED'"), "2") << "one run and its database";
  EXPECT_EQ(test::sql_one(real, "SELECT count(*) FROM samples WHERE metric='put_tensor'"), "3") << "2 iterations + 1 warmup";
}

// The installed copy as a new user runs it (issue 38): `cmake --install` to a prefix, then the installed driver
// from another folder with PATH=/usr/bin:/bin. Its database is a redis-server that loads the installed module,
// which Redis refuses unless the file is executable (it was installed 0644 once, and no test loaded it).
TEST(InstalledCopy, ThroughputStandardStartsItsDatabaseFromTheInstalledModule) {
  test::TempDir d;
  const fs::path prefix = d.path / "prefix";
  auto inst = test::run_command({"/usr/bin/cmake", "--install", test::build_dir().string(), "--prefix", prefix.string()}, d.path, {}, 120);
  ASSERT_EQ(inst.exit_code, 0) << inst.err;
  const fs::path module = prefix / "lib" / "fanout" / "plugins" / "redisai.so";
  ASSERT_TRUE(fs::exists(module));
  EXPECT_NE(fs::status(module).permissions() & fs::perms::owner_exec, fs::perms::none) << "Redis loads only an executable module";
  EXPECT_TRUE(fs::exists(prefix / "share" / "fanout" / "sites" / "plain-slurm.toml")) << "the site profiles the docs name";
  const fs::path elsewhere = d.path / "elsewhere";
  fs::create_directories(elsewhere);
  auto r = test::run_command({(prefix / "bin" / "fanout").string(), "throughput_standard", "--exp_name=inst", "--db_nodes=1", "--db_cpus=1",
                              "--client_nodes=1", "--clients_per_node=1", "--tensor_bytes=1024", "--iterations=3",
                              "--db_port=" + std::to_string(test::free_tcp_port()), "--net_ifname=lo"},
                             elsewhere, {{"PATH", "/usr/bin:/bin"}, {"FANOUT_PLUGIN_PATH", ""}}, 300);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const fs::path db = elsewhere / "results" / "inst" / "fanout.sqlite";
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM runs WHERE status='COMPLETED'"), "2") << "the run and its database";
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM samples WHERE metric='put_tensor' AND warmup=0"), "3");
  // The database loaded the installed module, not the build tree's.
  size_t configs = 0;
  for (auto& e : fs::recursive_directory_iterator(elsewhere / "results" / "inst"))
    if (e.path().filename() == "redis.conf") {
      ++configs;
      EXPECT_NE(fanout::read_file(e.path()).find("loadmodule \"" + module.string() + "\""), std::string::npos) << fanout::read_file(e.path());
    }
  EXPECT_EQ(configs, 1u);
}
