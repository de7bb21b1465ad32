// A temporary emulated host for tests: loaded without device nodes unless the test runs as root and asks
// for them.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "ascend/npu/emulator.h"
#include "ascend/npu/profiles.h"
#include "test_dir.h"

namespace ascend::npu::testing {

inline LoadOptions test_load_options(bool nodes = false) {
  LoadOptions o;
  o.make_nodes = nodes;
  o.majors = DeviceMajors{234, 235, 236, 237, 238};
  o.npu_smi_binary = std::string(ASCEND_BIN_DIR) + "/npu-smi";
  return o;
}

// Loads `profile` into a fresh temporary root; the root is removed at the end.
class EmulatedHost {
 public:
  explicit EmulatedHost(const std::string& profile = "atlas800t-a2", bool nodes = false)
      : emu_(dir_.path() + "/root") {
    auto p = load_profile(profile);
    EXPECT_TRUE(p.ok()) << p.error().message();
    auto s = emu_.load(*p, test_load_options(nodes));
    EXPECT_TRUE(s.ok()) << s.error().message();
  }
  Emulator& emu() { return emu_; }
  const std::string& root() const { return emu_.root(); }
  const std::string& dir() const { return dir_.path(); }

 private:
  ascend::testing::TempDir dir_;
  Emulator emu_;
};

}  // namespace ascend::npu::testing
