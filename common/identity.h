#pragma once
// Who runs this process, and where: read once per process (getpwuid reads the user database each time, and every
// run's provenance and a scheduler's limits name them).
#include <string>

namespace fanout {

// This host's name (gethostname).
const std::string& host_name();
// The name of the user this process runs as, or its uid when the user database has none.
const std::string& user_name();

}  // namespace fanout
