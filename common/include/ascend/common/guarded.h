// The last resort of long-lived thread bodies and server handlers. Errors are values in this project
// (ascend::Error), so an exception escaping such a body is a bug or an exhausted machine; uncaught, it would
// end the whole daemon (std::terminate: an abort, no word of what happened). run_guarded runs one pass of a
// body and turns an exception into one error line naming the thread, a count, and `false`: the caller then
// carries on with its normal wait (so a body that throws every time does not spin), or, where carrying on
// is wrong (a listener thread that died), stops its daemon through its normal shutdown with the reason.
//
// The line goes to the process's log: setup_logging (log.h) routes it to spdlog's default logger; before
// that (and in the libraries that the static binaries and the emulated libdcmi.so link, which have no
// spdlog) it goes to stderr.
//
// Thread-safe: the state is a process-wide counter and the log function (set once, at start).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

namespace ascend {

// How many exceptions run_guarded has caught in this process.
inline std::atomic<std::uint64_t>& guarded_catches() noexcept {
  static std::atomic<std::uint64_t> caught{0};
  return caught;
}

// Where run_guarded's line goes: `line` is the whole line; `repeat` says it repeats the last one of its
// thread (a debug line, not an error). Must not throw.
using GuardedLog = void (*)(std::string_view line, bool repeat) noexcept;

namespace detail {

inline void guarded_log_stderr(std::string_view line, bool repeat) noexcept {
  if (!repeat) std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
}

inline std::atomic<GuardedLog>& guarded_log() noexcept {
  static std::atomic<GuardedLog> log{&guarded_log_stderr};
  return log;
}

// Counts and logs the caught exception: "<name>: internal error: <what> (please report it); <then>". With
// `last`, a text equal to the last one logged is said again only as a repeat (a body that throws on every
// pass says so once, and again when the text changes).
inline void note_caught(std::string_view name, const char* what, std::string_view then,
                        std::string* last) noexcept {
  guarded_catches().fetch_add(1, std::memory_order_relaxed);
  try {
    const bool repeat = last != nullptr && *last == what;
    if (last != nullptr) *last = what;
    std::string line(name);
    line.append(": internal error: ").append(what).append(" (please report it); ").append(then);
    guarded_log().load()(line, repeat);
  } catch (...) {  // out of memory building the line: the count still says it happened
  }
}

}  // namespace detail

// Sets where run_guarded's lines go (setup_logging does; tests may, to read them). nullptr: stderr.
inline void set_guarded_log(GuardedLog log) noexcept {
  detail::guarded_log() = log != nullptr ? log : &detail::guarded_log_stderr;
}

// Runs `body()`; true when it returned. An exception escaping it is logged as one line, counted
// (guarded_catches) and answered with false. `then` says what the caller does next ("carrying on",
// "stopping the scheduler"); `last`, when given, keeps the last text logged (see note_caught) and is
// cleared by a pass that returns.
template <typename Body>
bool run_guarded(std::string_view name, Body&& body, std::string_view then = "carrying on",
                 std::string* last = nullptr) noexcept {
  try {
    body();
    if (last != nullptr) last->clear();
    return true;
  } catch (const std::exception& e) {
    detail::note_caught(name, e.what(), then, last);
  } catch (...) {
    detail::note_caught(name, "an exception that is not a std::exception", then, last);
  }
  return false;
}

}  // namespace ascend
