// The plugin SDK's shared pieces (plugins/sdk), on real sockets and real processes: every plugin's channels and
// companion programs rely on these, so their edge cases are pinned here once.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <thread>

#include "plugins/sdk/fanout_gate.hpp"
#include "plugins/sdk/fanout_process.hpp"
#include "plugins/sdk/fanout_socket.hpp"

namespace {

// A port nobody listens on: bound by the kernel, then released.
int free_port() {
  int port = 0;
  int fd = fanout_sdk::tcp_listen("127.0.0.1", 0, 1, port);
  ::close(fd);
  return port;
}

// Polls until the server reports an event for a connection, or gives up after the deadline.
std::vector<fanout_sdk::GatedServer::Event> events_within(fanout_sdk::GatedServer& s, int timeout_ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < until) {
    auto ev = s.poll(100);
    if (!ev.empty()) return ev;
  }
  return {};
}

}  // namespace

TEST(SdkSocket, ConnectRefusedAtOnceWithoutATimeoutNamesTheEndpoint) {
  const int port = free_port();
  try {
    ::close(fanout_sdk::tcp_connect("127.0.0.1", port, 0));
    FAIL() << "connected to a port nobody listens on";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot connect to 127.0.0.1:" + std::to_string(port) + ": Connection refused");
  }
}

TEST(SdkSocket, ConnectRetriesUntilALateListenerAppears) {
  const int port = free_port();
  std::promise<void> refused_once;
  // The listener starts only after the client has been refused at least once (a peer that starts late).
  auto listener = std::async(std::launch::async, [&] {
    refused_once.get_future().wait();
    int bound = 0;
    int fd = fanout_sdk::tcp_listen("127.0.0.1", port, 4, bound);
    int peer = ::accept(fd, nullptr, nullptr);
    char c = 0;
    const bool got = fanout_sdk::recv_all(peer, &c, 1);
    ::close(peer);
    ::close(fd);
    return got ? c : '?';
  });
  EXPECT_THROW(::close(fanout_sdk::tcp_connect("127.0.0.1", port, 0)), std::runtime_error);
  refused_once.set_value();
  int fd = fanout_sdk::tcp_connect("127.0.0.1", port, 30000);
  ASSERT_TRUE(fanout_sdk::send_all(fd, "x", 1));
  EXPECT_EQ(listener.get(), 'x');
  ::close(fd);
}

TEST(SdkSocket, RecvAllTellsAPeerThatClosedFromAFailure) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ASSERT_TRUE(fanout_sdk::send_all(sv[0], "ab", 2));
  ::close(sv[0]);
  char buf[4] = {};
  errno = EINVAL;
  EXPECT_FALSE(fanout_sdk::recv_all(sv[1], buf, 4));  // 2 of 4 bytes, then the end
  EXPECT_EQ(errno, 0) << "a clean close is errno 0";
  EXPECT_EQ(std::string(buf, 2), "ab");
  ::close(sv[1]);
}

TEST(SdkSocket, HostPortIsSplitAtTheLastColonAndBadOnesAreNamed) {
  EXPECT_EQ(fanout_sdk::split_host_port("10.0.0.1:6780"), (std::pair<std::string, int>{"10.0.0.1", 6780}));
  EXPECT_EQ(fanout_sdk::split_host_port("node-a:0"), (std::pair<std::string, int>{"node-a", 0}));
  for (const char* bad : {"10.0.0.1", "host:", "host:12x", "host:70000", "host:-1"}) {
    try {
      fanout_sdk::split_host_port(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "'" + std::string(bad) + "' is not host:port");
    }
  }
}

TEST(SdkGate, BytesArriveByConnectionAndRefusedStrangersAreCounted) {
  fanout_sdk::GatedServer server("127.0.0.1", 8);
  int a = fanout_sdk::tcp_connect("127.0.0.1", server.port(), 5000);
  int b = fanout_sdk::tcp_connect("127.0.0.1", server.port(), 5000);
  ASSERT_TRUE(fanout_sdk::send_all(a, "stranger", 8));
  std::string got;
  size_t a_id = SIZE_MAX;
  for (int round = 0; round < 50 && got != "stranger"; ++round)
    for (auto& ev : events_within(server, 5000)) {
      a_id = ev.conn;
      got = server.conn(ev.conn).in;
    }
  ASSERT_EQ(got, "stranger");
  EXPECT_EQ(server.open_connections(), 2u);
  server.refuse(a_id);
  EXPECT_EQ(server.refused(), 1u);
  EXPECT_EQ(server.open_connections(), 1u);
  char c;
  EXPECT_EQ(::recv(a, &c, 1, 0), 0) << "the refused client sees its connection closed";
  // The other peer leaves: its connection reports its end, and keeps its id (ids are stable).
  ::close(b);
  bool eof = false;
  size_t b_id = SIZE_MAX;
  for (int round = 0; round < 50 && !eof; ++round)
    for (auto& ev : events_within(server, 5000))
      if (ev.eof) eof = true, b_id = ev.conn;
  ASSERT_TRUE(eof);
  EXPECT_NE(b_id, a_id);
  server.close(b_id);
  EXPECT_EQ(server.open_connections(), 0u);
  EXPECT_EQ(server.refused(), 1u) << "a peer that left is not a stranger";
  EXPECT_EQ(server.size(), 2u);
  EXPECT_FALSE(server.send(b_id, "x", 1)) << "a closed connection takes nothing";
  ::close(a);
}

TEST(SdkProcess, WaitWithinADeadlineKillsAProgramThatOutlivesIt) {
  auto sleeper = fanout_sdk::spawn_program({"sleep", "30"}, false);
  const auto t0 = std::chrono::steady_clock::now();
  const auto exit = fanout_sdk::wait_exit_within(sleeper.pid, 100);
  EXPECT_TRUE(exit.killed);
  EXPECT_EQ(exit.status, 128 + SIGKILL);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(25)) << "it did not wait for sleep's 30 s";
  auto quick = fanout_sdk::spawn_program({"sh", "-c", "exit 3"}, false);
  const auto done = fanout_sdk::wait_exit_within(quick.pid, 60000);
  EXPECT_FALSE(done.killed);
  EXPECT_EQ(done.status, 3);
  // One reaped elsewhere has no status to give, and is not waited for to its deadline nor killed (its pid may
  // be another process's by then).
  auto reaped = fanout_sdk::spawn_program({"sh", "-c", "exit 4"}, false);
  ASSERT_EQ(fanout_sdk::wait_exit(reaped.pid), 4);
  const auto lost = fanout_sdk::wait_exit_within(reaped.pid, 600000);
  EXPECT_FALSE(lost.killed);
  EXPECT_EQ(lost.status, -1);
}
