// The last resort of every binary's main: errors are values in this project (ascend::Error), so an exception
// that reaches main is a bug; without this it would end in std::terminate, an abort (exit 134) and no word
// of what happened, which an engine reports as a crashed runtime. Thread-safe (no state).
#pragma once

#include <cstdio>
#include <exception>

namespace ascend {

// Runs `body` (main's real work, returning the exit code). An exception escaping it is printed as one line
// on stderr, "<program>: internal error: <what>", and the exit code is `exit_code`.
template <typename Body>
int guarded_main(const char* program, Body&& body, int exit_code = 1) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s (please report it)\n", program, e.what());
  } catch (...) {
    std::fprintf(stderr, "%s: internal error: an unknown exception (please report it)\n", program);
  }
  return exit_code;
}

}  // namespace ascend
