#include "ascend/common/error.h"

#include <gtest/gtest.h>

namespace ascend {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return Error::invalid("value " + std::to_string(v) + " is not positive");
  return v;
}

Result<int> doubled(int v) {
  ASCEND_ASSIGN(int x, parse_positive(v), "double");
  return 2 * x;
}

Status check_both(int a, int b) {
  ASCEND_CHECK(doubled(a), "first");
  ASCEND_CHECK(doubled(b), "second");
  return {};
}

TEST(Error, FromErrnoNamesWhatAndReason) {
  Error e = Error::from_errno(ENOENT, "open /dev/davinci3");
  EXPECT_EQ(e.code(), ENOENT);
  EXPECT_EQ(e.message(), "open /dev/davinci3: No such file or directory");
}

TEST(Error, ContextIsPrependedAndCodeKept) {
  Error e = Error::from_errno(EPERM, "mknodat /dev/davinci3").context("inject device 3");
  EXPECT_EQ(e.code(), EPERM);
  EXPECT_EQ(e.message(), "inject device 3: mknodat /dev/davinci3: Operation not permitted");
  EXPECT_EQ(e.context("").message(), e.message());
}

TEST(Result, ValueAndErrorPaths) {
  auto ok = doubled(4);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 8);
  auto bad = doubled(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), EINVAL);
  EXPECT_EQ(bad.error().message(), "double: value -1 is not positive");
}

TEST(Status, ChecksChainContext) {
  EXPECT_TRUE(check_both(1, 2).ok());
  Status s = check_both(1, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(), "second: double: value 0 is not positive");
  Status c = std::move(s).context("top");
  EXPECT_EQ(c.error().message(), "top: second: double: value 0 is not positive");
  Status fine;
  EXPECT_TRUE(std::move(fine).context("unused").ok());
}

}  // namespace
}  // namespace ascend
