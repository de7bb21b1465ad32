#include "ascend/common/log.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <thread>

#include "ascend/common/fs.h"
#include "log_capture.h"
#include "test_dir.h"

namespace ascend {
namespace {

TEST(Logging, WritesToFileAtLevel) {
  testing::TempDir d;
  LogOptions o;
  o.level = "info";
  o.file = d / "logs/hook.log";
  o.also_stderr = false;
  ASSERT_TRUE(setup_logging(o).ok());
  spdlog::debug("hidden line");
  spdlog::info("visible line {}", 42);
  spdlog::default_logger()->flush();
  auto text = read_file(o.file);
  ASSERT_TRUE(text.ok()) << text.error().message();
  EXPECT_NE(text->find("visible line 42"), std::string::npos);
  EXPECT_EQ(text->find("hidden line"), std::string::npos);
}

// A capture ends while the code under test still logs from its threads (a daemon that a fixture's TearDown
// stops only after the test body's captures are gone). spdlog's free functions log through a raw pointer to
// the default logger: the logger a capture installed must outlive the capture. Without that, the logging
// thread uses a freed logger (ASan: heap-use-after-free; Release: a rare SEGFAULT, as CI saw once).
TEST(Logging, ThreadsLoggingWhileCapturesComeAndGoKeepWorking) {
  auto before = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("quiet"));  // no sinks: between captures
  std::atomic<bool> stop{false};
  std::atomic<long> logged{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      while (!stop.load()) {
        spdlog::info("a line from a thread of the code under test {}", logged.fetch_add(1));
      }
    });
  }
  for (int i = 0; i < 2000; ++i) {
    testing::LogCapture capture;
    spdlog::info("a line of capture {}", i);
    // Its own line, or the threads' lines that pushed it out of the ring: the capture captures.
    EXPECT_GE(capture.count("a line "), 1);
  }
  stop = true;
  for (auto& t : threads) t.join();
  spdlog::set_default_logger(before);
  EXPECT_GT(logged.load(), 0);
}

TEST(Logging, RejectsUnknownLevel) {
  LogOptions o;
  o.level = "loud";
  Status s = setup_logging(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("loud"), std::string::npos);
}

TEST(Logging, FallsBackToStderrWhenFileCannotOpen) {
  LogOptions o;
  o.file = "/proc/version/cannot/log/here.log";
  EXPECT_TRUE(setup_logging(o).ok());
  spdlog::info("still logging");
}

}  // namespace
}  // namespace ascend
