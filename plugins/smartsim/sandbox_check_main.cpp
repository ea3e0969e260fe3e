// fanout-redisai-check: loads one untrusted model or script for the RedisAI module, in a process of its own
// (sandbox_check.h).
#include "sandbox_check.h"

int main(int argc, char** argv) { return redisai::sandbox_child_main(argc, argv); }
