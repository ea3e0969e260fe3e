#include "common/identity.h"

#include <pwd.h>
#include <unistd.h>

namespace fanout {

const std::string& host_name() {
  static const std::string name = [] {
    char buf[256] = {0};
    gethostname(buf, sizeof buf - 1);
    return std::string(buf);
  }();
  return name;
}

const std::string& user_name() {
  static const std::string name = [] {
    if (auto* pw = getpwuid(getuid())) return std::string(pw->pw_name);
    return std::to_string(getuid());
  }();
  return name;
}

}  // namespace fanout
