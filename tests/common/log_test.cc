#include "ascend/common/log.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "ascend/common/fs.h"
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
