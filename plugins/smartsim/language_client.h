// SmartSim-Scaling's clients in other languages than C++ (--languages=c, fortran, python): a rank starts
// fanout-tensor-client-<language>, hands it the database through SmartRedis's environment (SSDB, SR_DB_TYPE,
// SR_DB_PASSWORD: never on a command line), and records the samples it reports as the rank's own.
//
// The program's standard output, a line each:
//   S <metric> <iteration> <t0_ns> <value> <unit>   a sample (CLOCK_MONOTONIC start; iteration < 0: warmup)
//   W <k>                                          a producer waits to start iteration k; the rank answers "G"
//   C <k>                                          a consumer has finished iteration k
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fanout_sdk.hpp"
#include "tensor_client.h"

namespace smartsim {

struct LanguageClientRun {
  std::string language;           // c, fortran, python
  std::vector<std::string> args;  // the program's arguments (mode first)
  const ClientOptions* database = nullptr;  // none: the program needs no database (a filesystem consumer)
  std::function<void(int64_t k)> before_iteration;  // returns once iteration k may start
  std::function<void(int64_t k)> consumed;          // the consumer finished iteration k
};

// The program for a language: <build>/fanout-tensor-client-<language> or <prefix>/bin/...
std::string language_client_program(const std::string& language);

// Runs the program to its end; throws naming it when it fails or reports something malformed.
void run_language_client(fanout_sdk::Host& host, const LanguageClientRun& run);

}  // namespace smartsim
