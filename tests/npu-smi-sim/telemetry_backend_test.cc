// DeviceQuery::telemetry() on both backends of one emulated host (the emulator's state file, and DCMI
// through the emulated libdcmi.so: dcmi_get_device_utilization_rate, _hbm_info, _temperature, _power_info,
// _health, _errorcode_v2, _network_health), with work, a port down and a fault on every built-in profile:
// the two answers must be equal, and equal to what each backend's own snapshot says of its chips.
#include <gtest/gtest.h>

#include "ascend/npu/backend.h"
#include "ascend/npu/smi.h"
#include "ascend/npu/workload.h"
#include "emulator_fixture.h"

namespace ascend::npu {
namespace {

using testing::EmulatedHost;

std::string describe(const std::vector<ChipTelemetry>& ts) {
  std::string out;
  for (const auto& t : ts) {
    out += std::to_string(t.phy_id) + ": aicore " + std::to_string(t.aicore_pct) + " aicpu " +
           std::to_string(t.aicpu_pct) + " mem " + std::to_string(t.memory_used_mb) + "/" +
           std::to_string(t.memory_total_mb) + " temp " + std::to_string(t.temp_c) + " power " +
           (t.power_w ? std::to_string(*t.power_w) : "none") + " health " + std::string(to_string(t.health)) +
           " codes " + std::to_string(t.error_codes.size()) + " link " + (t.link_up ? "up" : "down") + "\n";
  }
  return out;
}

class TelemetryBackends : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { ::unsetenv("ASCEND_SIM_ROOT"); }
};

TEST_P(TelemetryBackends, DcmiAndTheEmulatorAgreeUnderLoadLinkDownAndFault) {
  EmulatedHost h(GetParam());
  auto state = h.emu().read_state();
  ASSERT_TRUE(state.ok());
  const int last = state->chips.back().phy_id;
  const int first = state->chips.front().phy_id;
  ASSERT_TRUE(h.emu().set_workload(Workload{first, 75, 20, 2048, 0}).ok());
  ASSERT_TRUE(h.emu().set_link(last, false).ok());
  ASSERT_TRUE(h.emu().set_fault(last, 0x80E18402, std::nullopt).ok());

  BackendOptions o;
  o.root = h.root();
  o.backend = Backend::kDcmi;
  auto dcmi = open_device_query(o);
  ASSERT_TRUE(dcmi.ok()) << dcmi.error().message();
  auto a = h.emu().telemetry();
  auto b = (*dcmi)->telemetry();
  ASSERT_TRUE(a.ok()) << a.error().message();
  ASSERT_TRUE(b.ok()) << b.error().message();
  EXPECT_EQ(*a, *b) << "emulator:\n" << describe(*a) << "dcmi:\n" << describe(*b);

  // The work shows (75 % AICore, 20 % AICPU, 2048 MB more), the port and the fault too.
  ASSERT_FALSE(a->empty());
  EXPECT_EQ(a->front().aicore_pct, 75);
  EXPECT_EQ(a->front().aicpu_pct, 20);
  EXPECT_EQ(a->front().memory_used_mb,
            std::min<long long>(a->front().memory_total_mb,
                                (state->chips.front().hbm_total_mb > 0 ? state->chips.front().hbm_used_mb
                                                                       : state->chips.front().mem_used_mb) +
                                    2048));
  EXPECT_FALSE(a->back().link_up);
  EXPECT_EQ(a->back().error_codes, std::vector<std::uint32_t>{0x80E18402});

  // Each backend's snapshot says the same of its chips (the default telemetry() path).
  for (DeviceQuery* q : {static_cast<DeviceQuery*>(&h.emu()), dcmi->get()}) {
    auto s = q->snapshot();
    ASSERT_TRUE(s.ok()) << s.error().message();
    std::vector<ChipTelemetry> from_snapshot;
    for (const auto& c : s->chips) from_snapshot.push_back(telemetry_of(c));
    EXPECT_EQ(from_snapshot, *a) << s->backend << ":\n" << describe(from_snapshot);
  }
}

// A chip's VDIE id in the seam (NPU Exporter's vdie_id label) is what npu-smi -t board prints as "VDie ID"
// ("Die ID" on a 310P, which prints no VDie line), its five words joined by '-', on both backends.
TEST_P(TelemetryBackends, TheVdieIdIsTheOneNpuSmiPrints) {
  EmulatedHost h(GetParam());
  BackendOptions o;
  o.root = h.root();
  o.backend = Backend::kDcmi;
  auto dcmi = open_device_query(o);
  ASSERT_TRUE(dcmi.ok()) << dcmi.error().message();
  auto a = h.emu().snapshot();
  auto b = (*dcmi)->snapshot();
  ASSERT_TRUE(a.ok() && b.ok());
  for (std::size_t i = 0; i < a->chips.size(); ++i) {
    const Chip& c = a->chips[i];
    auto out =
        smi::run({"info", "-t", "board", "-i", std::to_string(c.card_id), "-c", std::to_string(c.chip_index)},
                 h.root());
    auto at = out.out.find("VDie ID");
    if (at == std::string::npos) at = out.out.find("\tDie ID");
    ASSERT_NE(at, std::string::npos) << out.out;
    std::string words = out.out.substr(out.out.find(':', at) + 2);
    words = words.substr(0, words.find('\n'));
    for (char& ch : words) ch = ch == ' ' ? '-' : ch;
    EXPECT_EQ(c.vdie_id, words) << "chip " << c.phy_id;
    EXPECT_EQ(b->chips[i].vdie_id, words) << "chip " << c.phy_id;
    EXPECT_EQ(c.chip_version, "V1");
  }
}

INSTANTIATE_TEST_SUITE_P(Profiles, TelemetryBackends,
                         ::testing::Values("atlas800-9000", "atlas800t-a2", "atlas800t-a3", "atlas300i-duo"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

}  // namespace
}  // namespace ascend::npu
