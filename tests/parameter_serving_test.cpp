// The parameter-serving plugin: staleness on a scripted timeline, the checkpoint store's atomicity (a reader
// racing a writer, checked by checksum), multicast over loopback with loss counting (real UDP sockets; lost
// chunks are produced by sending crafted datagrams with gaps), and whole runs through fanout.
#include <gtest/gtest.h>

#include <algorithm>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "plugins/parameter_serving/checkpoint_store.h"
#include "plugins/parameter_serving/control_channel.h"
#include "plugins/sdk/fanout_sdk.hpp"
#include "plugins/parameter_serving/multicast.h"
#include "plugins/parameter_serving/staleness.h"
#include "common/files.h"
#include "tests/expect_throw.h"
#include "tests/test_util.h"

using namespace parameter_serving;
namespace fs = std::filesystem;
namespace test = fanout::test;

namespace {

constexpr int64_t kSec = 1000000000;


// The key of the tests' benchmark; hand-made datagrams are signed with it as the trainer signs its own.
const McastKey kKey = *McastKey::from_hex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");

McastConfig loopback(int port) {
  McastConfig c;
  c.group = "239.255.41.7";
  c.port = port;
  c.interface_ip = "127.0.0.1";
  return c;
}

// A UDP socket that sends to loopback()'s group on port through the loopback interface (hand-made datagrams).
int multicast_sender(int port, sockaddr_in& to) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  in_addr lo{};
  inet_pton(AF_INET, "127.0.0.1", &lo);
  setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &lo, sizeof lo);
  to = sockaddr_in{};
  to.sin_family = AF_INET;
  to.sin_port = htons(uint16_t(port));
  inet_pton(AF_INET, "239.255.41.7", &to.sin_addr);
  return fd;
}

std::vector<char> bytes_of(size_t n, uint64_t seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = char((i * 131 + seed * 7919) >> 3);
  return v;
}

}  // namespace

TEST(Staleness, KnownPushesAndStepsGiveKnownStaleness) {
  // Versions 1, 2, 3 published at t = 1 s, 2 s, 3 s.
  std::vector<Publication> timeline = {{1, 1 * kSec}, {2, 2 * kSec}, {3, 3 * kSec}};
  std::vector<StepSample> steps = {
      {kSec / 2, 0},         // nothing published yet: 0
      {3 * kSec / 2, 0},     // v1 out for 0.5 s, nothing held: 1 version, 0.5 s
      {5 * kSec / 2, 1},     // v2 out since 2 s: 1 version, 0.5 s
      {7 * kSec / 2, 1},     // v2 since 2 s, v3 since 3 s: 2 versions, stale since v2 = 1.5 s
      {7 * kSec / 2, 3},     // current: 0
      {2 * kSec, 1},         // v2 published exactly now: counts, 0 s
      {5 * kSec / 2, 3},     // held before its publication time (clock skew across nodes): clamped to 0
  };
  auto s = staleness_of(timeline, steps);
  ASSERT_EQ(s.size(), steps.size());
  int64_t versions[] = {0, 1, 1, 2, 0, 1, 0};
  double secs[] = {0, 0.5, 0.5, 1.5, 0, 0, 0};
  for (size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i].versions, versions[i]) << "step " << i;
    EXPECT_DOUBLE_EQ(s[i].seconds, secs[i]) << "step " << i;
  }
  EXPECT_EQ(decode_timeline(encode_timeline(timeline)).size(), 3u);
  EXPECT_EQ(decode_timeline(encode_timeline(timeline))[2].wall_ns, 3 * kSec);
}

TEST(CheckpointStore, KeepsTheNewestVersionsAndLeavesNoTemporaries) {
  test::TempDir d;
  CheckpointStore store((d.path / "db").string(), 3, false);
  for (uint64_t v = 1; v <= 10; ++v) store.publish(v, bytes_of(4096, v), 0);
  std::vector<std::string> names;
  for (auto& e : fs::directory_iterator(d.path / "db")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  ASSERT_EQ(names.size(), 3u) << "older versions are removed, no temporary is left";
  EXPECT_EQ(names[0], "v00000000000000000008.ckpt");
  EXPECT_EQ(store.newest_version(), 10u);
  std::vector<char> got;
  CheckpointHeader h{};
  ASSERT_EQ(store.read(10, got, h), ReadStatus::Ok);
  EXPECT_EQ(got, bytes_of(4096, 10));
  EXPECT_EQ(store.read(2, got, h), ReadStatus::Gone);
  EXPECT_EQ(fs::status(d.path / "db").permissions() & fs::perms::others_all, fs::perms::none);
}

TEST(CheckpointStore, ChecksumCatchesTruncatedAndAlteredFiles) {
  // The negative control for the race test below: a torn file is detected, so "never torn" means something.
  test::TempDir d;
  CheckpointStore store((d.path / "db").string(), 3, false);
  store.publish(1, bytes_of(100000, 1), 0);
  store.publish(2, bytes_of(100000, 2), 0);
  fs::resize_file(store.path_of(1), fs::file_size(store.path_of(1)) - 1);
  {
    std::fstream f(store.path_of(2), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(5000);
    f.put('\x7f');
  }
  std::vector<char> got;
  CheckpointHeader h{};
  EXPECT_EQ(store.read(1, got, h), ReadStatus::Torn);
  EXPECT_EQ(store.read(2, got, h), ReadStatus::Torn);
}

TEST(CheckpointStore, ReadersRacingTheWriterNeverSeeATornCheckpoint) {
  test::TempDir d;
  const std::string dir = (d.path / "db").string();
  CheckpointStore writer(dir, 2, false);
  std::atomic<bool> done{false};
  std::atomic<uint64_t> ok{0}, gone{0}, torn{0}, mismatched{0};
  auto reader = [&] {
    CheckpointStore store(dir, 2, false);
    std::vector<char> got;
    CheckpointHeader h{};
    while (!done) {
      uint64_t v = store.newest_version();
      if (v == 0) continue;
      switch (store.read(v, got, h)) {
        case ReadStatus::Ok:
          ++ok;
          if (got != bytes_of(got.size(), v)) ++mismatched;  // the payload is the one of its version
          break;
        case ReadStatus::Gone: ++gone; break;
        case ReadStatus::Torn: ++torn; break;
      }
    }
  };
  std::thread r1(reader), r2(reader);
  // At least 300 versions, and on until the readers have read 10 while the writer wrote (event-driven: a starved
  // reader on a loaded machine makes the race longer, never a failure; 60 s bounds it).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (uint64_t v = 1; v <= 300 || (ok.load() <= 10 && std::chrono::steady_clock::now() < deadline); ++v)
    writer.publish(v, bytes_of(256 * 1024, v), 0);
  done = true;
  r1.join();
  r2.join();
  EXPECT_EQ(torn.load(), 0u);
  EXPECT_EQ(mismatched.load(), 0u);
  EXPECT_GT(ok.load(), 10u) << "the readers did read while the writer wrote (gone: " << gone << ")";
}

TEST(Multicast, VersionsArriveWholeOverLoopback) {
  std::vector<McastVersion> got;
  std::mutex mu;
  // Port 0: the kernel picks the receiver's port, so parallel test processes never share a group/port.
  McastReceiver rx(loopback(0), 42, kKey, [&](const McastVersion& v) {
    std::lock_guard<std::mutex> l(mu);
    got.push_back(v);
  });
  McastSender tx(loopback(rx.port()), 42, kKey);
  EXPECT_GT(tx.chunk_bytes(), 60000u) << "loopback's MTU allows big datagrams";
  for (uint64_t v = 1; v <= 5; ++v) tx.send(v, bytes_of(3 * 1000 * 1000 + 17, v));
  ASSERT_TRUE(test::wait_for([&] { std::lock_guard<std::mutex> l(mu); return got.size() == 5; }, 10));
  McastCounts c = rx.stop();
  EXPECT_EQ(c.versions_complete, 5u);
  EXPECT_EQ(c.versions_lost, 0u);
  EXPECT_EQ(c.chunks_lost, 0u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].version, i + 1);
    EXPECT_EQ(got[i].bytes, 3000017u);
    EXPECT_TRUE(got[i].checksum_ok);
  }
}

TEST(Multicast, LostChunksAndVersionsAreCounted) {
  std::atomic<int> complete{0};
  McastReceiver rx(loopback(0), 7, kKey, [&](const McastVersion&) { ++complete; });
  DatagramMac mac(kKey);
  sockaddr_in to{};
  int fd = multicast_sender(rx.port(), to);
  const uint32_t chunk = 1000, n = 4;
  // Sends the given chunks of a version of n * chunk bytes, in the wire format of multicast.h.
  auto send_chunks = [&](uint64_t token, uint64_t version, std::vector<uint32_t> chunks, bool corrupt = false) {
    std::vector<char> payload = bytes_of(n * chunk, version);
    McastHeader h{};
    h.magic = 0x4d535046;
    h.proto = 2;
    h.header_bytes = sizeof h;
    h.token = token;
    h.version = version;
    h.total_bytes = payload.size();
    h.checksum = fanout_sdk::checksum64(payload.data(), payload.size());
    h.n_chunks = n;
    h.chunk_bytes = chunk;
    if (corrupt) payload[0] ^= 1;
    for (uint32_t c : chunks) {
      h.chunk = c;
      mac.sign(h, payload.data() + size_t(c) * chunk, chunk);
      std::vector<char> dg(sizeof h + chunk);
      std::memcpy(dg.data(), &h, sizeof h);
      std::memcpy(dg.data() + sizeof h, payload.data() + size_t(c) * chunk, chunk);
      ASSERT_EQ(sendto(fd, dg.data(), dg.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to), ssize_t(dg.size()));
    }
  };
  send_chunks(7, 1, {0, 1, 2, 3});     // whole
  send_chunks(7, 2, {0, 2, 3});        // chunk 1 lost: noticed when version 3 starts
  send_chunks(99, 3, {0, 1, 2, 3});    // another benchmark's token: ignored
  send_chunks(7, 3, {3, 1, 0, 2});     // whole, out of order
  send_chunks(7, 3, {1});              // a duplicate of a finished version: ignored
  send_chunks(7, 5, {0, 1, 2, 3});     // version 4 never seen: 1 version, 4 chunks lost
  send_chunks(7, 6, {0, 1, 2, 3}, true);  // bytes altered in flight: fails its checksum
  send_chunks(7, 7, {0, 1});           // incomplete when the receiver stops
  ASSERT_TRUE(test::wait_for([&] { return complete.load() == 3; }, 10));
  // Every datagram sent has arrived before stop() counts what is missing (loopback delivers in order).
  send_chunks(7, 8, {0, 1, 2, 3});
  ASSERT_TRUE(test::wait_for([&] { return complete.load() == 4; }, 10));
  McastCounts c = rx.stop();
  close(fd);
  EXPECT_EQ(c.versions_complete, 4u);  // 1, 3, 5, 8
  EXPECT_EQ(c.corrupt, 1u);            // 6
  EXPECT_EQ(c.foreign, 4u);
  EXPECT_EQ(c.versions_lost, 3u);      // 2 (incomplete), 4 (unseen), 7 (incomplete)
  EXPECT_EQ(c.chunks_lost, 1u + 4u + 2u);
}

// Issue 41 item 4: the token travelled in clear in every datagram and any higher version was taken, so one forged
// datagram made a worker skip to version 60. Now a datagram counts only with the mac of the trainer's key: forged
// ones (a stranger's key, or the trainer's datagram with its version or payload changed) are dropped unread.
TEST(Multicast, ForgedDatagramsAreDroppedAndNeverSkipAVersion) {
  std::vector<uint64_t> got;
  std::mutex mu;
  McastReceiver rx(loopback(0), 5, kKey, [&](const McastVersion& v) {
    std::lock_guard<std::mutex> l(mu);
    got.push_back(v.version);
  });
  sockaddr_in to{};
  int fd = multicast_sender(rx.port(), to);
  const McastKey stranger = McastKey::random();
  ASSERT_NE(stranger.hex(), kKey.hex());
  // One datagram carrying a whole version of 1000 bytes, signed with `key`; `tamper` changes it after signing.
  auto send = [&](const McastKey& key, uint64_t version, const std::function<void(McastHeader&, std::vector<char>&)>& tamper = {}) {
    std::vector<char> payload = bytes_of(1000, version);
    McastHeader h{};
    h.magic = 0x4d535046, h.proto = 2, h.header_bytes = sizeof h, h.token = 5, h.version = version;
    h.total_bytes = payload.size(), h.checksum = fanout_sdk::checksum64(payload.data(), payload.size());
    h.chunk = 0, h.n_chunks = 1, h.chunk_bytes = 1000;
    DatagramMac(key).sign(h, payload.data(), payload.size());
    if (tamper) tamper(h, payload);
    std::vector<char> dg(sizeof h + payload.size());
    std::memcpy(dg.data(), &h, sizeof h);
    std::memcpy(dg.data() + sizeof h, payload.data(), payload.size());
    ASSERT_EQ(sendto(fd, dg.data(), dg.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to), ssize_t(dg.size()));
  };
  send(kKey, 1);
  send(stranger, 60);                                                      // the attack of the report
  send(kKey, 2, [](McastHeader& h, std::vector<char>&) { h.version = 59; });  // a genuine datagram, version raised
  send(kKey, 2, [](McastHeader&, std::vector<char>& p) { p[10] ^= 1; });       // its payload changed
  send(kKey, 2);
  send(kKey, 3);
  ASSERT_TRUE(test::wait_for([&] { std::lock_guard<std::mutex> l(mu); return got.size() == 3; }, 10));
  McastCounts c = rx.stop();
  close(fd);
  EXPECT_EQ(got, (std::vector<uint64_t>{1, 2, 3})) << "every version the trainer sent, and no other";
  EXPECT_EQ(c.forged, 3u);
  EXPECT_EQ(c.versions_lost, 0u) << "a forged version number never makes versions look lost";
  EXPECT_EQ(c.malformed + c.corrupt, 0u);
}

// ---------------------------------------------------------------------------------------------- via fanout

class ParameterServingRun : public ::testing::Test {
 protected:
  test::TempDir d;
  fs::path db() { return d.path / "results" / "ps" / "fanout.sqlite"; }
  std::string one(const std::string& sql) { return test::sql_one(db(), sql); }
  test::CommandResult run(std::vector<std::string> args) {
    args.insert(args.begin(), {"parameter_serving", "--exp_name=ps"});
    return test::run_fanout(d.path, args, 300);
  }
};

TEST_F(ParameterServingRun, FilesystemModeRecordsStalenessPerStep) {
  auto r = run({"--workers=2", "--push_frequency=0.05", "--pull_frequency=0.05", "--post_frequency=0.25", "--data_size=2",
                "--max_version=30", "--max_time=20"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(one("SELECT value FROM samples WHERE metric='versions_published'"), "30.0");
  EXPECT_EQ(one("SELECT count(*) FROM samples WHERE metric='push_time'"), "30");
  EXPECT_EQ(one("SELECT sum(value) FROM samples WHERE metric='torn_reads'"), "0.0");
  EXPECT_EQ(one("SELECT count(DISTINCT rank) FROM samples WHERE metric='staleness'"), "2");
  // Every step carries a staleness in versions and in seconds; none negative, none beyond what was published.
  EXPECT_EQ(one("SELECT count(*) FROM samples WHERE metric='staleness'"), one("SELECT count(*) FROM samples WHERE metric='staleness_time'"));
  EXPECT_EQ(one("SELECT count(*) FROM samples WHERE metric='staleness' AND (value < 0 OR value > 30)"), "0");
  EXPECT_GT(std::stoi(one("SELECT count(*) FROM samples WHERE metric='staleness' AND warmup=0")), 100);
  // Each worker saw some versions, and no more than were published; pulls moved whole checkpoints.
  for (auto& row : test::sql_rows(db(), "SELECT value FROM samples WHERE metric='versions_received'")) {
    EXPECT_GE(std::stod(row[0]), 1);
    EXPECT_LE(std::stod(row[0]), 30);
  }
  EXPECT_EQ(one("SELECT count(*) FROM samples WHERE metric='pull_bandwidth' AND value <= 0"), "0");
  EXPECT_NE(one("SELECT count(*) FROM samples WHERE metric='posted_staleness'"), "0") << "the seed's mean-of-posts is kept too";
  // The store is removed once the run is over.
  EXPECT_FALSE(fs::exists(fs::path(one("SELECT path FROM runs")) / "parameter_db" / "bench0"));
}

TEST_F(ParameterServingRun, MulticastModeDeliversEveryVersionOverLoopback) {
  auto r = run({"--mode=multicast", "--mcast_interface=lo", "--mcast_port=" + std::to_string(test::free_udp_port()), "--workers=2",
                "--push_frequency=0.05", "--post_frequency=0.25", "--data_size=1", "--max_version=20", "--max_time=20"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Every version is accounted for at each worker: received whole, or counted lost (a receiver descheduled on a
  // loaded machine overflows its socket buffer; loss is measured, not an error). Nothing torn; one receive_time
  // per version received.
  auto per_worker = test::sql_rows(db(), "SELECT s.rank, sum(s.value * (s.metric='versions_received')), sum(s.value * (s.metric='mcast_versions_lost')) "
                                         "FROM samples s WHERE s.metric IN ('versions_received', 'mcast_versions_lost') GROUP BY s.rank");
  ASSERT_EQ(per_worker.size(), 2u);
  int received = 0;
  for (auto& w : per_worker) {
    EXPECT_EQ(std::stod(w[1]) + std::stod(w[2]), 20.0) << "worker " << w[0] << ": received " << w[1] << ", lost " << w[2];
    received += int(std::stod(w[1]));
  }
  EXPECT_GE(received, 2) << "some versions arrived";
  EXPECT_EQ(one("SELECT sum(value) FROM samples WHERE metric='torn_reads'"), "0.0");
  EXPECT_EQ(one("SELECT count(*) FROM samples WHERE metric='receive_time'"), std::to_string(received));
}

TEST_F(ParameterServingRun, ConcurrentBenchmarksShareOneStore) {
  auto r = run({"--benchmarks=[1,3]", "--workers=1", "--push_frequency=0.05", "--pull_frequency=0.05", "--data_size=2",
                "--max_version=10", "--max_time=20", "--store_dir=" + (d.path / "store").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(one("SELECT count(*) FROM runs WHERE status='COMPLETED'"), "2");
  // With benchmarks=3, three trainers each published 10 versions and three workers each received some.
  auto rows = test::sql_rows(db(), "SELECT p.value, count(DISTINCT s.rank), sum(s.value) FROM samples s JOIN parameters p ON "
                                   "p.run_id=s.run_id AND p.name='benchmarks' WHERE s.metric='versions_published' GROUP BY p.value");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"1", "1", "10.0"}));
  EXPECT_EQ(rows[1], (std::vector<std::string>{"3", "3", "30.0"}));
  EXPECT_EQ(one("SELECT count(DISTINCT s.rank) FROM samples s JOIN parameters p ON p.run_id=s.run_id AND p.name='benchmarks' "
                "WHERE p.value='3' AND s.metric='versions_received' AND s.value >= 1"),
            "3");
  EXPECT_TRUE(fs::is_directory(d.path / "store")) << "the user's store folder stays; each run's own folder inside it goes";
  EXPECT_TRUE(fs::is_empty(d.path / "store"));
  // Issue 51: the report leads with each figure against what was swept (benchmarks).
  const auto plots = test::headline_plots(d.path, d.path / "results" / "ps");
  EXPECT_NE(std::find(plots.begin(), plots.end(), "median staleness (worker) by benchmarks"), plots.end()) << "median staleness (worker) by benchmarks";
  EXPECT_NE(std::find(plots.begin(), plots.end(), "median push_time (trainer) by benchmarks"), plots.end()) << "median push_time (trainer) by benchmarks";
  ASSERT_FALSE(plots.empty());
  EXPECT_EQ(plots.front().rfind("median ", 0), 0u) << "first: " << plots.front();
}

TEST_F(ParameterServingRun, BadValuesAreRefusedBeforeAnythingIsWritten) {
  struct Case {
    std::string flag, expect;
  };
  for (const Case& c : std::vector<Case>{{"--push_frequency=[0.2,0]", "--push_frequency: '0' is not > 0"},
                                         {"--step_frequency=-1", "--step_frequency: '-1' is not > 0"},
                                         {"--mode=carrier_pigeon", "--mode: 'carrier_pigeon' is not one of filesystem, multicast"},
                                         {"--workers=0", "--workers: '0' is not >= 1"},
                                         {"--data_size=64001", "--data_size: '64001' is not <= 64000"},
                                         {"--data_size=60000", "has "},  // 1001 x 60 GB in a folder of this disk
                                         {"--mcast_chunk=65452", "--mcast_chunk: '65452' is not <= 65451"},
                                         {"--LOGLEVEL=LOUD", "--LOGLEVEL: 'LOUD' is not one of DEBUG, INFO, WARNING, ERROR"}}) {
    std::vector<std::string> args = {c.flag};
    if (c.flag.rfind("--data_size", 0) == 0) args.insert(args.end(), {"--store_dir=" + d.path.string(), "--keep_versions=1000"});
    auto r = run(args);
    EXPECT_EQ(r.exit_code, 2) << c.flag;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.flag << ": " << r.err;
    if (c.expect == "has ") {  // refused by the plugin's own check()
      EXPECT_NE(r.err.find("parameter_serving refuses"), std::string::npos) << r.err;
    }
    EXPECT_FALSE(fs::exists(d.path / "results")) << c.flag << ": nothing is written for a refused sweep";
  }
}

// Issue 19: a forged post put fake posted_staleness samples into a COMPLETED run. The trainer's control port now
// takes only connections that present the job's token, and a peer posts only for the worker its HELLO named.
TEST(ControlChannel, ForgedPostsNeverReachTheTrainer) {
  const std::string token = fanout_sdk::channel_token();
  parameter_serving::ControlServer server("127.0.0.1", token);
  parameter_serving::ControlMessage forged{parameter_serving::kPost, 0, 1.0, 5};
  const std::string forged_bytes(reinterpret_cast<const char*>(&forged), sizeof forged);
  int no_token = test::connect_and_send(server.port(), forged_bytes + forged_bytes);                          // posts without the token
  int wrong = test::connect_and_send(server.port(), std::string(32, 'f') + forged_bytes);                     // a wrong token
  parameter_serving::ControlClient worker("127.0.0.1", server.port(), token, 5000);
  worker.send({parameter_serving::kHello, 1, 0, 0});
  worker.send({parameter_serving::kPost, 1, 2.0, 3});
  worker.send({parameter_serving::kPost, 0, 7.0, 3});  // for another worker: the connection is dropped
  std::vector<parameter_serving::ControlMessage> got;
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30); (server.refused() < 3) && std::chrono::steady_clock::now() < until;) server.poll_messages(100, got);
  close(no_token);
  close(wrong);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].type, parameter_serving::kHello);
  EXPECT_EQ(got[1].type, parameter_serving::kPost);
  EXPECT_EQ(got[1].worker, 1u);
  EXPECT_DOUBLE_EQ(got[1].mean_version, 2.0);
  EXPECT_EQ(server.hellos(), 1u);
  EXPECT_EQ(server.refused(), 3u) << "no token, a wrong token, a post for another worker";
}

// Issue 26: the chunk index was checked against the datagram's own n_chunks, not the version's, and the size
// came unbounded from the wire. Datagrams of one version that disagree with its first one, sizes beyond what the
// trainer sends, and chunk counts that do not fit the size are dropped and counted; the version still completes.
TEST(Multicast, DatagramsThatDisagreeWithTheirVersionAreDropped) {
  std::vector<McastVersion> got;
  std::mutex mu;
  McastConfig cfg = loopback(0);
  cfg.max_bytes = 4000;
  McastReceiver rx(cfg, 9, kKey, [&](const McastVersion& v) {
    std::lock_guard<std::mutex> l(mu);
    got.push_back(v);
  });
  sockaddr_in to{};
  int fd = multicast_sender(rx.port(), to);
  std::vector<char> payload = bytes_of(4000, 1);
  auto send = [&](uint32_t chunk, uint32_t n_chunks, uint64_t total, uint32_t chunk_bytes, size_t len) {
    McastHeader h{};
    h.magic = 0x4d535046;
    h.proto = 2;
    h.header_bytes = sizeof h;
    h.token = 9;
    h.version = 1;
    h.total_bytes = total;
    h.checksum = fanout_sdk::checksum64(payload.data(), payload.size());
    h.chunk = chunk;
    h.n_chunks = n_chunks;
    h.chunk_bytes = chunk_bytes;
    const char* slice = payload.data() + std::min<size_t>(size_t(chunk) * chunk_bytes, 4000 - len);
    DatagramMac(kKey).sign(h, slice, len);
    std::vector<char> dg(sizeof h + len);
    std::memcpy(dg.data(), &h, sizeof h);
    std::memcpy(dg.data() + sizeof h, slice, len);
    ASSERT_EQ(sendto(fd, dg.data(), dg.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to), ssize_t(dg.size()));
  };
  send(0, 4, 4000, 1000, 1000);         // the version's first datagram: 4 chunks of 1000
  send(7, 8, 4000, 500, 500);           // the same version claiming 8 chunks: chunk 7 would index past the table
  send(1, 1000000, 1000000000, 1000, 1000);  // a billion bytes announced (beyond max_bytes)
  send(2, 3, 4000, 1000, 1000);         // 3 chunks cannot hold 4000 bytes of 1000
  for (uint32_t c = 1; c < 4; ++c) send(c, 4, 4000, 1000, 1000);
  ASSERT_TRUE(test::wait_for([&] { std::lock_guard<std::mutex> l(mu); return got.size() == 1; }, 10));
  McastCounts counts = rx.stop();
  close(fd);
  EXPECT_EQ(counts.malformed, 3u);
  EXPECT_EQ(counts.versions_complete, 1u);
  EXPECT_TRUE(got[0].checksum_ok) << "the good chunks made the version whole";
  EXPECT_EQ(got[0].bytes, 4000u);
}

// The SDK's one write-then-rename (plugins/sdk/fanout_files.hpp), which every plugin now uses: writers of one
// file in several threads never mix their bytes (a fixed "<path>.tmp", as the torchloader trainer had, did), a
// reader sees a whole version or none, the mode is the one asked for, and no temporary file is left behind.
TEST(PluginFiles, ConcurrentWritersOfOneFileNeverMixTheirBytes) {
  test::TempDir d;
  const std::string path = (d.path / "shared.bin").string();
  constexpr size_t kBytes = 256 * 1024;
  std::atomic<bool> writing{true};
  std::atomic<int> torn{0}, seen{0};
  std::thread reader([&] {
    while (writing) {
      std::ifstream in(path, std::ios::binary);
      if (!in) continue;
      std::string got((std::istreambuf_iterator<char>(in)), {});
      ++seen;
      if (got.size() != kBytes || got.find_first_not_of(got[0]) != std::string::npos) ++torn;
    }
  });
  std::vector<std::thread> writers;
  for (char c = 'a'; c < 'e'; ++c)
    writers.emplace_back([&, c] {
      const std::string bytes(kBytes, c);
      for (int i = 0; i < 100; ++i) fanout_sdk::write_file_atomic(path, bytes, 0600);
    });
  for (auto& w : writers) w.join();
  writing = false;
  reader.join();
  EXPECT_EQ(torn, 0) << "of " << seen << " reads";
  EXPECT_GT(seen, 0);
  const std::string last = fanout::read_file(path);
  ASSERT_EQ(last.size(), kBytes);
  EXPECT_EQ(last.find_first_not_of(last[0]), std::string::npos);
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  size_t files = 0;
  for (auto& e : fs::directory_iterator(d.path)) files += e.path().filename() != "shared.bin" ? 1 : 0;
  EXPECT_EQ(files, 0u) << "a temporary file was left behind";
  // A failed write is an error naming the file, and leaves nothing under the real name.
  EXPECT_THROW_WITH(fanout_sdk::write_file_atomic((d.path / "no-such-dir" / "f").string(), "x"), std::runtime_error, "no-such-dir/f.tmp.");
  EXPECT_FALSE(fs::exists(d.path / "no-such-dir"));
}
