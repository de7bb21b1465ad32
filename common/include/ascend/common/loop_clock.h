// A clock and a way to wait on it, for the daemons' periodic loops (the plugin's driver check and its
// inventory reporter, the scheduler's reservation expiry). Production code uses real_loop_clock(): now() is
// std::chrono::steady_clock, wall() std::chrono::system_clock, and wait_until a condition variable's
// wait_until. A test passes a clock that it advances (tests/common/test_clock.h), so that it drives each tick
// (a backoff, an expiry, a health check) without real waiting and without racing a busy machine.
//
// Thread-safe: every method may be called from any thread. A LoopClock must outlive every loop that uses it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

namespace ascend {

class LoopClock {
 public:
  using Steady = std::chrono::steady_clock;
  using Wall = std::chrono::system_clock;

  virtual ~LoopClock() = default;

  // For intervals and deadlines.
  virtual Steady::time_point now() const = 0;
  // For times that are recorded or compared with recorded ones (reservation stamps).
  virtual Wall::time_point wall() const = 0;
  // Waits until `deadline` (of now()) or until `stop()` is true, whichever comes first. `lock` holds the
  // mutex that guards what `stop` reads, on entry and on return (it is released while waiting), and whoever
  // changes it notifies `cv`. Returns stop().
  virtual bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                          Steady::time_point deadline, const std::function<bool()>& stop) = 0;

  bool wait_for(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, Steady::duration d,
                const std::function<bool()>& stop) {
    return wait_until(lock, cv, now() + d, stop);
  }
};

// The real clock: steady_clock, system_clock and the condition variable's own wait.
class RealLoopClock final : public LoopClock {
 public:
  Steady::time_point now() const override { return Steady::now(); }
  Wall::time_point wall() const override { return Wall::now(); }
  bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  Steady::time_point deadline, const std::function<bool()>& stop) override {
    return cv.wait_until(lock, deadline, stop);
  }
};

// The process's one real clock (what a loop uses when it is given none).
inline LoopClock& real_loop_clock() {
  static RealLoopClock clock;
  return clock;
}

}  // namespace ascend
