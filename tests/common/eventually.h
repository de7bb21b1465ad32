// Waiting for an event in a test: poll a condition until it holds or a generous deadline passes, instead of
// sleeping a fixed time and asserting (which a busy machine, or the sanitizers on two cores, breaks sooner
// or later). The deadline only bounds a failing test; a passing one returns as soon as the condition holds.
#pragma once

#include <chrono>
#include <thread>

namespace ascend::testing {

inline constexpr std::chrono::seconds kEventually{30};

template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = kEventually,
                std::chrono::milliseconds every = std::chrono::milliseconds(5)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(every);
  }
  return true;
}

}  // namespace ascend::testing
