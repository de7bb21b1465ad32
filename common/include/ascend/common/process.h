// Running a helper program and reading what it prints: for the static binaries, which hand the work that
// needs a dynamically linked library (libdcmi.so) to a helper. No shell; the environment is exactly `env`.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "ascend/common/error.h"

namespace ascend {

struct ProcessOutput {
  int exit_code = 0;  // the exit status; 128 + signal when killed by one
  std::string out;    // its standard output (at most the limit given)
};

// Runs `argv[0]` (an absolute path) with `argv` and `env`, its stdin /dev/null and its stderr the caller's;
// waits for it. Fails (and kills it) when it prints more than `max_out` bytes or runs longer than `timeout`.
Result<ProcessOutput> run_capture(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                  std::size_t max_out, std::chrono::milliseconds timeout);

}  // namespace ascend
