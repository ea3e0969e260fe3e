#include "cpu_affinity.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace smartsim {

std::vector<int> hold_off_cpus(const std::vector<int>& avoid) {
  cpu_set_t allowed, mine;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) throw std::runtime_error(std::string("sched_getaffinity: ") + std::strerror(errno));
  CPU_ZERO(&mine);
  std::vector<int> left;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed) && std::find(avoid.begin(), avoid.end(), c) == avoid.end()) CPU_SET(c, &mine), left.push_back(c);
  if (!left.empty() && sched_setaffinity(0, sizeof mine, &mine) != 0) throw std::runtime_error(std::string("sched_setaffinity: ") + std::strerror(errno));
  return left;
}

}  // namespace smartsim
