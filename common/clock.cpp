#include "common/clock.h"

#include <cstdio>

namespace fanout {

static std::tm utc(int64_t ns) {
  time_t secs = static_cast<time_t>(ns / 1000000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return tm;
}

std::string iso8601_utc(int64_t ns) {
  std::tm tm = utc(ns);
  char buf[96];  // room for any int the compiler can imagine (-Wformat-truncation)
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>((ns / 1000000) % 1000));
  return buf;
}

std::string compact_utc_stamp(int64_t ns) {
  std::tm tm = utc(ns);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d%02d%02d-%02d%02d%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                tm.tm_min, tm.tm_sec);
  return buf;
}

}  // namespace fanout
