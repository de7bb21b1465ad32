// run_guarded (ascend/common/guarded.h): the last resort of thread bodies and handlers. The expected lines
// are written out here from the header's contract, not taken from the code's output.
#include "ascend/common/guarded.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <stdexcept>
#include <string>

#include "ascend/common/fs.h"
#include "ascend/common/log.h"
#include "guarded_capture.h"
#include "test_dir.h"

namespace ascend {
namespace {

TEST(RunGuarded, ABodyThatReturnsIsTrueAndSaysNothing) {
  testing::GuardedCapture cap;
  const auto before = guarded_catches().load();
  int ran = 0;
  EXPECT_TRUE(run_guarded("worker", [&] { ++ran; }));
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(guarded_catches().load(), before);
  EXPECT_TRUE(cap.lines().empty());
}

TEST(RunGuarded, AnExceptionIsOneLineNamingTheThreadACountAndFalse) {
  testing::GuardedCapture cap;
  const auto before = guarded_catches().load();
  EXPECT_FALSE(run_guarded("DCMI poll", [] { throw std::runtime_error("boom"); }));
  EXPECT_FALSE(run_guarded(
      "expiry", [] { throw 42; }, "stopping the scheduler"));
  EXPECT_EQ(guarded_catches().load(), before + 2);
  const auto lines = cap.lines();
  ASSERT_EQ(lines.size(), 2U);
  EXPECT_EQ(lines[0].text, "DCMI poll: internal error: boom (please report it); carrying on");
  EXPECT_FALSE(lines[0].repeat);
  EXPECT_EQ(lines[1].text,
            "expiry: internal error: an exception that is not a std::exception (please report it); "
            "stopping the scheduler");
}

TEST(RunGuarded, TheSameTextAgainIsARepeatUntilAPassReturnsOrTheTextChanges) {
  testing::GuardedCapture cap;
  std::string last;
  auto fail = [](const char* what) { return [what] { throw std::runtime_error(what); }; };
  EXPECT_FALSE(run_guarded("loop", fail("a"), "carrying on", &last));
  EXPECT_EQ(last, "a");
  EXPECT_FALSE(run_guarded("loop", fail("a"), "carrying on", &last));
  EXPECT_FALSE(run_guarded("loop", fail("b"), "carrying on", &last));
  EXPECT_TRUE(run_guarded(
      "loop", [] {}, "carrying on", &last));
  EXPECT_EQ(last, "");
  EXPECT_FALSE(run_guarded("loop", fail("b"), "carrying on", &last));
  const auto lines = cap.lines();
  ASSERT_EQ(lines.size(), 4U);
  const bool repeats[] = {false, true, false, false};
  for (std::size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(lines[i].repeat, repeats[i]) << i;
  EXPECT_EQ(cap.errors_with("loop: internal error: a").size(), 1U);
  EXPECT_EQ(cap.errors_with("loop: internal error: b").size(), 2U);
}

TEST(RunGuarded, SetupLoggingSendsTheLineToTheLogAsAnError) {
  testing::TempDir d;
  LogOptions o;
  o.level = "warn";  // an error shows at warn; a repeat (debug) does not
  o.file = d / "daemon.log";
  o.also_stderr = false;
  ASSERT_TRUE(setup_logging(o).ok());
  std::string last;
  run_guarded(
      "reporter", [] { throw std::runtime_error("first"); }, "retrying", &last);
  run_guarded(
      "reporter", [] { throw std::runtime_error("first"); }, "retrying", &last);
  spdlog::default_logger()->flush();
  auto text = read_file(o.file);
  set_guarded_log(nullptr);
  ASSERT_TRUE(text.ok()) << text.error().message();
  const std::string line = "reporter: internal error: first (please report it); retrying";
  const auto at = text->find(line);
  ASSERT_NE(at, std::string::npos) << *text;
  EXPECT_NE(text->rfind("[error]", at), std::string::npos) << *text;
  EXPECT_EQ(text->find(line, at + 1), std::string::npos) << "the repeat is a debug line: " << *text;
}

}  // namespace
}  // namespace ascend
