// Captures what the code under test logs (spdlog's default logger, level info and up) for the capture's
// lifetime, and answers which captured lines contain a text.
//
// spdlog::info() and its kin log through a raw pointer to the default logger, which they read without a
// lock (spdlog documents set_default_logger() as unsafe while other threads log). The threads of the code
// under test may still be logging when a capture ends, so every logger a capture installs lives until the
// process ends: a thread that took the pointer just before the swap logs into a logger that still exists.
#pragma once

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ascend::testing {

class LogCapture {
 public:
  LogCapture()
      : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(4096)), old_(spdlog::default_logger()) {
    auto logger = std::make_shared<spdlog::logger>("capture", sink_);
    logger->set_level(spdlog::level::info);
    keep(logger);
    spdlog::set_default_logger(logger);
  }
  ~LogCapture() { spdlog::set_default_logger(old_); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // The captured lines that contain `needle`, oldest first.
  std::vector<std::string> lines(const std::string& needle) const {
    std::vector<std::string> out;
    for (const auto& l : sink_->last_formatted()) {
      if (l.find(needle) != std::string::npos) out.push_back(l);
    }
    return out;
  }
  int count(const std::string& needle) const { return static_cast<int>(lines(needle).size()); }

 private:
  static void keep(std::shared_ptr<spdlog::logger> logger) {
    static std::mutex mu;
    static auto* kept = new std::vector<std::shared_ptr<spdlog::logger>>();  // never freed: see above
    std::lock_guard<std::mutex> lock(mu);
    kept->push_back(std::move(logger));
  }

  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> old_;
};

}  // namespace ascend::testing
