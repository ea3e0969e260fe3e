// The configuration every Redis test server has: loopback, a password, the tensor module from this build, its
// files in a folder of the test's own. For tests that start real redis-servers (smartsim_test,
// language_clients_test, ...).
#pragma once
#include <string>

#include "plugins/smartsim/redis_server.h"
#include "tests/test_util.h"

namespace fanout::test {

inline const char* kRedisTestPassword = "test-password";

inline smartsim::RedisServerConfig redis_test_config(const TempDir& d, int port, bool cluster = false) {
  smartsim::RedisServerConfig c;
  c.dir = (d.path / std::to_string(port)).string();
  c.bind = "127.0.0.1";
  c.port = port;
  c.password = kRedisTestPassword;
  c.module = (build_dir() / "plugins" / "redisai.so").string();
  c.cluster = cluster;
  return c;
}

}  // namespace fanout::test
