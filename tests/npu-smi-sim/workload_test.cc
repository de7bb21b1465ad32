// Live telemetry of the emulated host (workload.h): the load model against values derived by hand from the
// model's formulas and the atlas800t-a2 profile's idle values (chip 1: HBM 3314 / 65536 MB, 92.0 W, 39 C),
// and the workloads' life in the state file (recorded, seen by every reader, ended by time, stop, load).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ascend/npu/workload.h"
#include "emulator_fixture.h"
#include "run_command.h"

namespace ascend::npu {
namespace {

using testing::EmulatedHost;

const std::string kSim = std::string(ASCEND_BIN_DIR) + "/npu-sim";

HostState a2() {
  auto p = load_profile("atlas800t-a2");
  EXPECT_TRUE(p.ok());
  return *p;
}

TEST(LoadModel, EightyPercentOnA910BChipMovesEveryValueAsDerived) {
  HostState s = a2();
  s.workloads.push_back(Workload{1, 80, 10, 16384, 0});
  apply_workloads(s, 1000);
  const Chip& c = *s.chip(1);
  EXPECT_EQ(c.aicore_usage_pct, 80);
  EXPECT_EQ(c.aicpu_usage_pct, 10);
  EXPECT_EQ(c.hbm_used_mb, 3314 + 16384);
  EXPECT_EQ(c.temp_c, 39 + 28);        // 35 * 80 / 100
  EXPECT_DOUBLE_EQ(c.power_w, 338.4);  // 92 + (400 - 92) * 0.8
  const Chip& idle = *s.chip(0);       // no work: the profile's values
  EXPECT_EQ(idle.aicore_usage_pct, 0);
  EXPECT_EQ(idle.hbm_used_mb, 3318);
  EXPECT_EQ(idle.temp_c, 43);
  EXPECT_DOUBLE_EQ(idle.power_w, 101.8);
}

TEST(LoadModel, MemoryStopsAtTheChipsSizeAndAnEndedWorkloadChangesNothing) {
  HostState s = a2();
  s.workloads.push_back(Workload{2, 100, 0, 1 << 20, 5000});
  HostState before = s;
  apply_workloads(s, 4999);
  EXPECT_EQ(s.chip(2)->hbm_used_mb, 65536);
  EXPECT_EQ(s.chip(2)->temp_c, 40 + 35);
  EXPECT_DOUBLE_EQ(s.chip(2)->power_w, 400.0);
  apply_workloads(before, 5000);  // until_ms is the first moment it no longer runs
  EXPECT_EQ(before.chip(2)->hbm_used_mb, 3314);
  EXPECT_EQ(before.chip(2)->aicore_usage_pct, 0);
}

TEST(LoadModel, AChipWithoutPowerOfItsOwnKeepsItAndUsesItsDdrWithoutHbm) {
  auto p = load_profile("atlas300i-duo");
  ASSERT_TRUE(p.ok());
  HostState s = *p;
  const Chip before = s.chips[0];
  ASSERT_EQ(before.hbm_total_mb, 0);
  s.workloads.push_back(Workload{before.phy_id, 50, 0, 1024, 0});
  apply_workloads(s, 0);
  const Chip& c = s.chips[0];
  EXPECT_EQ(c.mem_used_mb, std::min(before.mem_total_mb, before.mem_used_mb + 1024));
  EXPECT_EQ(c.temp_c, before.temp_c + 12);  // 25 * 50 / 100, rounded down
  EXPECT_EQ(c.power_w, before.power_w);
  EXPECT_EQ(c.power_na, before.power_na);
}

TEST(LoadModel, BadWorkloadsAreRefusedWithTheirValue) {
  EXPECT_NE(check_workload(Workload{0, 101, 0, 0, 0}).error().message().find("101%"), std::string::npos);
  EXPECT_FALSE(check_workload(Workload{0, 0, -1, 0, 0}).ok());
  EXPECT_FALSE(check_workload(Workload{0, 0, 0, -5, 0}).ok());
  EXPECT_TRUE(check_workload(Workload{0, 100, 100, 0, 0}).ok());
}

TEST(EmulatorWorkload, EveryReaderSeesTheWorkAndStopRestoresTheIdleValues) {
  EmulatedHost h;
  ASSERT_TRUE(h.emu().set_workload(Workload{1, 80, 10, 16384, 0}).ok());
  auto snap = h.emu().snapshot();
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->chip(1)->aicore_usage_pct, 80);
  auto t = h.emu().telemetry();
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 8U);
  EXPECT_EQ((*t)[1].aicore_pct, 80);
  EXPECT_EQ((*t)[1].aicpu_pct, 10);
  EXPECT_EQ((*t)[1].memory_used_mb, 19698);
  EXPECT_EQ((*t)[1].memory_total_mb, 65536);
  EXPECT_EQ((*t)[1].temp_c, 67);
  ASSERT_TRUE((*t)[1].power_w.has_value());
  EXPECT_DOUBLE_EQ(*(*t)[1].power_w, 338.4);
  // The state file keeps the idle values: the work is a record beside them.
  auto raw = h.emu().read_state();
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->chip(1)->aicore_usage_pct, 0);
  ASSERT_EQ(raw->workloads.size(), 1U);
  ASSERT_TRUE(h.emu().set_workload(Workload{1, 0, 0, 0, 0}).ok());
  auto after = h.emu().telemetry();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)[1].aicore_pct, 0);
  EXPECT_EQ((*after)[1].memory_used_mb, 3314);
  EXPECT_TRUE(h.emu().read_state()->workloads.empty());
}

TEST(EmulatorWorkload, LinkFaultAndReloadShowInTheTelemetry) {
  EmulatedHost h;
  ASSERT_TRUE(h.emu().set_link(3, false).ok());
  ASSERT_TRUE(h.emu().set_fault(2, 0x80E18402, std::nullopt).ok());
  ASSERT_TRUE(h.emu().set_workload(Workload{4, 50, 0, 0, 0}).ok());
  auto t = h.emu().telemetry();
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE((*t)[3].link_up);
  EXPECT_TRUE((*t)[2].link_up);
  EXPECT_EQ((*t)[2].health, Health::kWarning);  // 0x80......: bits 27..24 are 0, Warning
  EXPECT_EQ((*t)[2].error_codes, std::vector<std::uint32_t>{0x80E18402});
  EXPECT_TRUE((*t)[3].error_codes.empty());
  EXPECT_EQ(h.emu().set_link(9, false).error().code(), ENOENT);
  EXPECT_EQ(h.emu().set_workload(Workload{9, 10, 0, 0, 0}).error().code(), ENOENT);
  ASSERT_TRUE(h.emu().reboot(testing::test_load_options()).ok());
  auto r = h.emu().telemetry();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE((*r)[3].link_up);
  EXPECT_EQ((*r)[4].aicore_pct, 0);
}

TEST(NpuSimLoadGen, RecordsTheWorkloadForOtherProcessesAndEndsItBySecondsOrStop) {
  EmulatedHost h;
  auto r = ascend::testing::run_command(
      {kSim, "load-gen", "--device", "1", "--util", "80", "--hbm", "16", "--root", h.root()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto s = h.emu().read_state();
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->workloads.size(), 1U);
  EXPECT_EQ(s->workloads[0], (Workload{1, 80, 0, 16384, 0}));
  // --seconds: an end time that far from now (the clock is read around the call, not asserted on).
  const auto before = unix_now_ms();
  r = ascend::testing::run_command(
      {kSim, "load-gen", "--device", "2", "--util", "30", "--seconds", "600", "--root", h.root()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto after = unix_now_ms();
  s = h.emu().read_state();
  ASSERT_EQ(s->workloads.size(), 2U);
  EXPECT_GE(s->workloads[1].until_ms, before + 600000);
  EXPECT_LE(s->workloads[1].until_ms, after + 600000);
  r = ascend::testing::run_command({kSim, "load-gen", "--device", "1", "--stop", "--root", h.root()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(h.emu().read_state()->workloads.size(), 1U);
  r = ascend::testing::run_command({kSim, "link", "--device", "5", "down", "--root", h.root()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(h.emu().read_state()->chip(5)->link_up);
  // npu-sim status lists what runs and what is down under each chip.
  r = ascend::testing::run_command({kSim, "status", "--root", h.root()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("      load-gen AICore 30%, AICPU 0%, +0 MB, until "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("      link down\n"), std::string::npos) << r.out;
  // Usage: a percentage out of range, --stop with a load, an unknown link state.
  EXPECT_EQ(
      ascend::testing::run_command({kSim, "load-gen", "--device", "1", "--util", "101", "--root", h.root()})
          .exit_code,
      2);
  EXPECT_EQ(ascend::testing::run_command(
                {kSim, "load-gen", "--device", "1", "--util", "5", "--stop", "--root", h.root()})
                .exit_code,
            2);
  EXPECT_EQ(
      ascend::testing::run_command({kSim, "link", "--device", "1", "sideways", "--root", h.root()}).exit_code,
      2);
  // An unknown device: exit 1 with one line naming it.
  r = ascend::testing::run_command({kSim, "load-gen", "--device", "42", "--util", "5", "--root", h.root()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "npu-sim: load-gen: no device 42\n");
}

}  // namespace
}  // namespace ascend::npu
