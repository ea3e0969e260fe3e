// The module's helper programs (fanout-redisai-check, fanout-redisai-exec) sit beside its .so; each runs as a
// child of redis-server connected by a socket pair on its stdin and stdout, holding none of the server's other
// descriptors. One piece of code starts both.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace redisai {

// The helper's path: beside the module (the build's plugins/ folder, or lib/fanout/plugins); FANOUT_REDISAI_CHECK
// / FANOUT_REDISAI_EXEC override it for harnesses outside that folder.
std::string module_helper_path(const std::string& name, const char* override_env);
// Starts argv[0] with a socket pair on its stdin and stdout. Returns its pid and sets fd to the server's end, or
// returns -1 with the reason in `error`.
pid_t spawn_module_helper(const std::vector<std::string>& argv, int& fd, std::string& error);
// In a helper, first thing: it ends (status 1) as soon as the process that started it does. A helper busy in an
// endless script never reads its stdin again, so it would not see the server close it: a stopped redis-server left
// its executor burning a core (ppid 1). A pidfd of the parent, waited on by a thread, sees the server's end.
void end_with_parent();
// "SIGSEGV", or "signal N".
std::string signal_text(int sig);
bool send_all(int fd, const char* p, size_t n);

}  // namespace redisai
