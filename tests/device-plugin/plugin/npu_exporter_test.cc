// The NPU Exporter metrics (npu_exporter.h): the exposition of a fixed set of chips against a hand-written
// expected text (tests/fixtures/metrics/npu-exporter.prom, README there), and the pod attribution.
#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "ascend/common/fs.h"
#include "ascend/common/unique_fd.h"
#include "ascend/plugin/npu_exporter.h"
#include "guarded_capture.h"

namespace ascend::plugin {
namespace {

std::vector<ChipIdentity> two_chips() {
  return {{0, "910B3-Ascend-V1", "0A0A0A0A-0B0B0B0B-0C0C0C0C-0D0D0D0D-0E0E0E0E", "0000:C1:00.0", true},
          {1, "910B3-Ascend-V1", "1A1A1A1A-1B1B1B1B-1C1C1C1C-1D1D1D1D-1E1E1E1E", "0000:C2:00.0", true}};
}

std::vector<npu::ChipTelemetry> their_telemetry() {
  npu::ChipTelemetry idle;
  idle.phy_id = 0;
  idle.memory_total_mb = 65536;
  idle.memory_used_mb = 3318;
  idle.temp_c = 43;
  idle.power_w = 101.8;
  npu::ChipTelemetry busy;
  busy.phy_id = 1;
  busy.aicore_pct = 80;
  busy.aicpu_pct = 10;
  busy.memory_total_mb = 65536;
  busy.memory_used_mb = 19698;
  busy.temp_c = 67;
  busy.power_w = 338.4;
  busy.health = npu::Health::kWarning;
  busy.error_codes = {0x80E18402, 0x80C98008};
  busy.link_up = false;
  return {idle, busy};
}

std::string serialize(const std::vector<prometheus::MetricFamily>& f) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, f);
  return out.str();
}

TEST(NpuExporter, ExpositionMatchesTheHandWrittenText) {
  const Attribution holders = {{1, PodRef{"train", "job-0", "worker"}}};
  const std::string got = serialize(npu_families(two_chips(), their_telemetry(), holders));
  auto want = read_file(std::string(ASCEND_FIXTURES) + "/metrics/npu-exporter.prom");
  ASSERT_TRUE(want.ok()) << want.error().message();
  EXPECT_EQ(got, *want);
}

TEST(NpuExporter, ChipsWithoutPowerOrHbmLeaveThoseSeriesOutAndUnheldChipsHaveNoContainerSeries) {
  auto chips = two_chips();
  chips[1].has_hbm = false;  // a 310P: on-chip DDR, no HBM series
  auto t = their_telemetry();
  t[1].power_w.reset();  // die 1 of an A3 card, or a 310P
  const std::string got = serialize(npu_families(chips, t, {}));
  EXPECT_EQ(got.find("npu_chip_info_power{container_name=\"\",id=\"1\""), std::string::npos) << got;
  EXPECT_NE(got.find("npu_chip_info_power{container_name=\"\",id=\"0\""), std::string::npos) << got;
  EXPECT_EQ(got.find("npu_chip_info_hbm_used_memory{container_name=\"\",id=\"1\""), std::string::npos);
  EXPECT_EQ(got.find("container_npu_"), std::string::npos) << got;
  EXPECT_EQ(got.find("npu_container_info"), std::string::npos) << got;
}

TEST(NpuExporter, WithoutTelemetryOnlyTheChipCountIsAnswered) {
  NpuExporter::Sources s;
  s.telemetry = []() -> Result<std::vector<npu::ChipTelemetry>> { return Error(EIO, "driver gone"); };
  s.host = [] {
    npu::DeviceSnapshot snap;
    snap.chips.resize(3);
    return snap;
  };
  EXPECT_EQ(serialize(NpuExporter(s).Collect()),
            "# HELP machine_npu_nums Amount of npu installed on the machine.\n"
            "# TYPE machine_npu_nums gauge\n"
            "machine_npu_nums 3\n");
}

// A scrape runs on the metrics server's threads: a source that throws must not cross into the server. The
// scrape is answered empty with one line logged, and the next scrape is whole.
TEST(NpuExporter, AScrapeThatThrowsIsAnsweredEmptyAndTheNextIsWhole) {
  ascend::testing::GuardedCapture cap;
  std::atomic<int> reads{0};
  NpuExporter::Sources s;
  s.telemetry = [&]() -> Result<std::vector<npu::ChipTelemetry>> {
    if (++reads == 1) throw std::runtime_error("telemetry bug");
    return Error(EIO, "driver gone");
  };
  s.host = [] {
    npu::DeviceSnapshot snap;
    snap.chips.resize(2);
    return snap;
  };
  NpuExporter exporter(s);
  EXPECT_TRUE(exporter.Collect().empty());
  EXPECT_EQ(cap.errors_with("metrics scrape: internal error: telemetry bug (please report it); answering "
                            "without the NPU metrics")
                .size(),
            1U);
  EXPECT_EQ(serialize(exporter.Collect()),
            "# HELP machine_npu_nums Amount of npu installed on the machine.\n"
            "# TYPE machine_npu_nums gauge\n"
            "machine_npu_nums 2\n");
}

TEST(NpuExporter, IdentityNamesTheModelAsNpuExporterDoes) {
  npu::DeviceSnapshot s;
  s.chip_type = "Ascend";
  npu::Chip c;
  c.phy_id = 5;
  c.name = "910B3";
  c.chip_version = "V1";
  c.vdie_id = "X";
  c.bus_id = "0000:01:00.0";
  c.hbm_total_mb = 65536;
  s.chips = {c};
  ASSERT_EQ(identities(s).size(), 1U);
  EXPECT_EQ(identities(s)[0], (ChipIdentity{5, "910B3-Ascend-V1", "X", "0000:01:00.0", true}));
}

TEST(NpuExporter, AttributionTakesWholeChipIdsOnly) {
  const std::map<std::string, int> phy_of = {{"Ascend910-0", 0}, {"Ascend910-1", 1}, {"Ascend910-3", 3}};
  const std::vector<PodDevices> pods = {
      {"train", "job-0", "worker", "huawei.com/Ascend910", {"Ascend910-0", "Ascend910-1"}},
      {"infer", "svc-1", "main", "huawei.com/npu-core", {"npu-core-3-0"}},  // AICore units: not a chip
      {"infer", "svc-2", "main", "huawei.com/Ascend910", {"Ascend910-9"}},  // not this node's
  };
  const Attribution a = attribute(pods, phy_of);
  const Attribution want = {{0, PodRef{"train", "job-0", "worker"}}, {1, PodRef{"train", "job-0", "worker"}}};
  EXPECT_EQ(a, want);
}

// Telegraf's lines for the same chips, written by hand from npu_exporter.h's field list (NPU Exporter's
// Telegraf input): HBM in bytes (3318 MB = 3479175168 B), its utilization the whole percent in use
// (3318 * 100 / 65536 = 5), error codes from _0 as unsigned integers (0x80E18402 = 2162263042), fields in
// byte order, integers with an i.
TEST(NpuExporterTelegraf, LinesMatchTheHandWrittenText) {
  const std::string want =
      "Ascend910-0 npu_chip_info_hbm_used_memory=3479175168i,npu_chip_info_hbm_utilization=5,"
      "npu_chip_info_health_status=1i,npu_chip_info_link_status=1i,npu_chip_info_network_status=1i,"
      "npu_chip_info_power=101.8,npu_chip_info_temperature=43,npu_chip_info_utilization=0 "
      "1700000000123456789\n"
      "Ascend910-1 npu_chip_info_error_code_0=2162263042i,npu_chip_info_error_code_1=2160689160i,"
      "npu_chip_info_hbm_used_memory=20654850048i,npu_chip_info_hbm_utilization=30,"
      "npu_chip_info_health_status=0i,npu_chip_info_link_status=0i,npu_chip_info_network_status=0i,"
      "npu_chip_info_power=338.4,npu_chip_info_temperature=67,npu_chip_info_utilization=80 "
      "1700000000123456789\n";
  EXPECT_EQ(telegraf_lines(two_chips(), their_telemetry(), "Ascend910", 1700000000123456789LL), want);
}

TEST(NpuExporterTelegraf, AChipWithoutHbmOrPowerLeavesThoseFieldsOut) {
  auto chips = two_chips();
  chips[0].has_hbm = false;  // a 310P: on-chip DDR, no HBM
  auto t = their_telemetry();
  t[0].power_w.reset();
  t.resize(1);
  EXPECT_EQ(telegraf_lines(chips, t, "Ascend310P", 5),
            "Ascend310P-0 npu_chip_info_health_status=1i,npu_chip_info_link_status=1i,"
            "npu_chip_info_network_status=1i,npu_chip_info_temperature=43,npu_chip_info_utilization=0 5\n");
}

// A pipe whose ends close with it.
struct Pipe {
  UniqueFd r;
  UniqueFd w;
  Pipe() {
    int fds[2];
    if (::pipe(fds) == 0) {
      r.reset(fds[0]);
      w.reset(fds[1]);
    }
  }
};

// The execd loop: a gather at once, one per interval, one at each line on its input (Telegraf's STDIN
// signal), and the end when its input closes; a failing gather writes nothing.
TEST(NpuExporterTelegraf, GathersAtOnceOnEachSignalAndStopsWhenItsInputCloses) {
  Pipe in;
  Pipe out;
  Pipe stop;
  ASSERT_TRUE(in.w.valid() && out.w.valid() && stop.w.valid());
  std::atomic<int> reads{0};
  NpuExporter::Sources s;
  s.telemetry = [&]() -> Result<std::vector<npu::ChipTelemetry>> {
    if (++reads == 2) return Error(EIO, "driver gone");
    return their_telemetry();
  };
  s.host = [] {
    npu::DeviceSnapshot snap;
    for (int i = 0; i < 2; ++i) {
      npu::Chip c;
      c.phy_id = i;
      c.hbm_total_mb = 65536;
      snap.chips.push_back(c);
    }
    return snap;
  };
  Status result = Error(EINVAL, "not returned");
  std::thread loop([&] {
    // An hour between gathers: only the first one and the signals write.
    result = run_telegraf(s, "Ascend910", std::chrono::hours(1), in.r.get(), out.w.get(), stop.r.get());
  });
  auto read_lines = [&](std::size_t lines) {
    std::string got;
    char buf[4096];
    while (static_cast<std::size_t>(std::count(got.begin(), got.end(), '\n')) < lines) {
      ssize_t n = ::read(out.r.get(), buf, sizeof buf);
      if (n <= 0) break;
      got.append(buf, static_cast<std::size_t>(n));
    }
    return got;
  };
  std::string first = read_lines(2);
  EXPECT_EQ(first.rfind("Ascend910-0 ", 0), 0U) << first;
  EXPECT_NE(first.find("\nAscend910-1 npu_chip_info_error_code_0=2162263042i,"), std::string::npos) << first;
  ASSERT_EQ(::write(in.w.get(), "\n", 1), 1);  // the second gather fails: nothing written
  for (int i = 0; i < 3000 && reads.load() < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(reads.load(), 2) << "no gather on Telegraf's signal";
  ASSERT_EQ(::write(in.w.get(), "\n", 1), 1);  // the third is whole again
  std::string third = read_lines(2);
  EXPECT_EQ(std::count(third.begin(), third.end(), '\n'), 2) << third;
  in.w.reset();  // Telegraf stops the plugin
  loop.join();
  EXPECT_TRUE(result.ok()) << (result.ok() ? "" : result.error().message());
  EXPECT_EQ(reads.load(), 3);
}

TEST(NpuExporterTelegraf, AnOutputThatCannotBeWrittenEndsTheLoopWithAnError) {
  Pipe in;
  Pipe out;
  Pipe stop;
  out.r.reset();  // Telegraf is gone: the write fails with EPIPE (SIGPIPE ignored, as the plugin's main does)
  auto old = std::signal(SIGPIPE, SIG_IGN);
  NpuExporter::Sources s;
  s.telemetry = []() -> Result<std::vector<npu::ChipTelemetry>> { return their_telemetry(); };
  s.host = [] { return npu::DeviceSnapshot{}; };
  Status st = run_telegraf(s, "Ascend910", std::chrono::hours(1), in.r.get(), out.w.get(), stop.r.get());
  std::signal(SIGPIPE, old);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), EPIPE);
  EXPECT_NE(st.error().message().find("writing the Telegraf lines"), std::string::npos)
      << st.error().message();
}

}  // namespace
}  // namespace ascend::plugin
