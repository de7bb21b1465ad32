// A clock that a test advances (ascend/common/loop_clock.h): the daemons' loops wait on it instead of on real
// time, so a test drives each tick (a backoff, an expiry, a driver check) by advancing it, and learns where
// each loop waits (settle, waits) instead of sleeping and hoping a loop has run.
//
// A waiter polls the clock every millisecond of real time (advance() does not know the waiters' condition
// variables), so a tick follows an advance within about a millisecond plus scheduling. Thread-safe.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "ascend/common/loop_clock.h"

namespace ascend::testing {

class TestClock final : public LoopClock {
 public:
  Steady::time_point now() const override {
    std::lock_guard lock(mu_);
    return now_;
  }
  Wall::time_point wall() const override {
    std::lock_guard lock(mu_);
    return wall0_ + std::chrono::duration_cast<Wall::duration>(now_ - start_);
  }
  bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  Steady::time_point deadline, const std::function<bool()>& stop) override {
    const std::uint64_t id = enter(deadline);
    while (!stop() && now() < deadline) cv.wait_for(lock, std::chrono::milliseconds(1));
    leave(id);
    return stop();
  }

  void advance(Steady::duration d) {
    std::lock_guard lock(mu_);
    now_ += d;
  }

  // How far ahead of now() each waiting thread's deadline is, shortest first.
  std::vector<Steady::duration> waits() const {
    std::lock_guard lock(mu_);
    std::vector<Steady::duration> out;
    for (const auto& [id, deadline] : waiting_) out.push_back(deadline - now_);
    std::sort(out.begin(), out.end());
    return out;
  }

  // Waits (real time, at most `limit`) until exactly `n` threads wait on this clock, each for a moment after
  // now(): every loop has run what was due and sleeps again. False on the limit.
  bool settle(std::size_t n, std::chrono::milliseconds limit = std::chrono::seconds(30)) const {
    const auto until = Steady::now() + limit;
    for (;;) {
      {
        std::lock_guard lock(mu_);
        if (waiting_.size() == n &&
            std::all_of(waiting_.begin(), waiting_.end(), [&](const auto& w) { return w.second > now_; }))
          return true;
      }
      if (Steady::now() >= until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

 private:
  std::uint64_t enter(Steady::time_point deadline) {
    std::lock_guard lock(mu_);
    waiting_[++next_id_] = deadline;
    return next_id_;
  }
  void leave(std::uint64_t id) {
    std::lock_guard lock(mu_);
    waiting_.erase(id);
  }

  mutable std::mutex mu_;
  const Steady::time_point start_ = Steady::now();
  const Wall::time_point wall0_ = Wall::now();
  Steady::time_point now_ = start_;
  std::map<std::uint64_t, Steady::time_point> waiting_;  // by waiter, its deadline
  std::uint64_t next_id_ = 0;
};

}  // namespace ascend::testing
