// Reads run_guarded's lines (ascend/common/guarded.h) in a test: while one of these lives, the lines are kept
// here instead of going to the log. One at a time per process.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "ascend/common/guarded.h"

namespace ascend::testing {

class GuardedCapture {
 public:
  struct Line {
    std::string text;
    bool repeat = false;
  };

  GuardedCapture() {
    {
      std::lock_guard lock(mu());
      kept().clear();
    }
    set_guarded_log(&keep);
  }
  ~GuardedCapture() { set_guarded_log(nullptr); }
  GuardedCapture(const GuardedCapture&) = delete;
  GuardedCapture& operator=(const GuardedCapture&) = delete;

  std::vector<Line> lines() const {
    std::lock_guard lock(mu());
    return kept();
  }
  // The lines logged as errors (not repeats) that contain `part`.
  std::vector<std::string> errors_with(std::string_view part) const {
    std::vector<std::string> out;
    for (auto& l : lines()) {
      if (!l.repeat && l.text.find(part) != std::string::npos) out.push_back(l.text);
    }
    return out;
  }
  // Waits until an error line containing `part` was logged.
  bool wait_for(std::string_view part, std::chrono::milliseconds timeout) const {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (errors_with(part).empty()) {
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::vector<Line>& kept() {
    static std::vector<Line> v;
    return v;
  }
  static void keep(std::string_view line, bool repeat) noexcept {
    try {
      std::lock_guard lock(mu());
      kept().push_back({std::string(line), repeat});
    } catch (...) {
    }
  }
};

}  // namespace ascend::testing
