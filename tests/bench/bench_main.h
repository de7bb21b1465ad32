// A bench program's main around its real one: an exception that escapes `run` (a set-up that failed in a way
// the program did not foresee) ends it with one line on stderr naming the program, and exit status 1, not
// std::terminate's abort.
#pragma once

#include <cstdio>
#include <exception>

namespace ascend::bench {

template <typename Run>
int guarded_main(const char* program, Run run, int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace ascend::bench
