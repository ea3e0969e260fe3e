// fanout-redisai-check: loads one untrusted model or script for the RedisAI module, in a process of its own
// (sandbox_check.h): reads "<size>\n<bytes>" on stdin, answers "OK" or the error on stdout, exit 0 / 1.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "module_helper.h"
#include "sandbox_check.h"
#include "torch_backend.h"

namespace redisai {

int sandbox_child_main(int argc, char** argv) {
  auto answer = [](const std::string& s) {
    const std::string line = s + "\n";
    return ::write(1, line.data(), line.size()) == ssize_t(line.size());
  };
  if (argc < 4 || std::strlen(argv[1]) != 1) {
    answer("ERR usage: fanout-redisai-check M|S <device> <memory cap bytes> [entry point ...]  (request on stdin)");
    return 2;
  }
  std::string in;
  char buf[1 << 16];
  for (ssize_t n; (n = ::read(0, buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return answer("ERR cannot read the request"), 2;
    in.append(buf, size_t(n));
  }
  const size_t nl = in.find('\n');
  if (nl == std::string::npos || std::to_string(std::strtoull(in.c_str(), nullptr, 10)) != in.substr(0, nl) ||
      std::strtoull(in.c_str(), nullptr, 10) != in.size() - nl - 1)
    return answer("ERR malformed request to the checker"), 2;
  const std::string_view payload(in.data() + nl + 1, in.size() - nl - 1);
  try {
    install_memory_cap(std::strtoull(argv[3], nullptr, 10));
    if (argv[1][0] == char(PayloadKind::Model)) TorchModel::load(payload, argv[2]);
    else TorchScript::compile(payload, argv[2], std::vector<std::string>(argv + 4, argv + argc));
  } catch (const std::exception& e) {
    answer(e.what());
    return 1;
  }
  answer("OK");
  return 0;
}

}  // namespace redisai

int main(int argc, char** argv) {
  redisai::end_with_parent();
  return redisai::sandbox_child_main(argc, argv);
}
