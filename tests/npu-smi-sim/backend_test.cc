// The two backends of the device seam on one emulated host: the emulator (its state file) and DCMI (the
// emulated libdcmi.so that `npu-sim load` installs, through dlopen), walked through every built-in profile,
// faults, the vNPU mode and vNPU operations, their snapshots compared field by field. What DCMI does not
// give is named here and nowhere else: the backend's name, the driver load id (DCMI has none), each chip's
// processes (not read by the DCMI backend) and power (DCMI has one "none" where npu-smi tells "-" from "NA";
// telemetry_backend_test.cc compares the values), and, on a host loaded without device nodes (not
// root), the nodes' numbers (the DCMI backend stats the nodes; the emulator knows the numbers it would use).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "ascend/npu/backend.h"
#include "ascend/npu/vnpu_gc.h"
#include "ascend/npu/workload.h"
#include "emulator_fixture.h"
#include "eventually.h"
#include "guarded_capture.h"

namespace ascend::npu {
namespace {

using testing::EmulatedHost;

bool root() {
  return ::geteuid() == 0;
}

// The snapshot without what the DCMI backend cannot or does not report (see the file comment).
nlohmann::json comparable(DeviceSnapshot s, bool with_node_numbers, bool given_severities) {
  s.backend.clear();
  s.boot_id.clear();
  for (Chip& c : s.chips) {
    c.processes.clear();
    c.power_w = 0;
    c.power_na = false;
    if (given_severities) {
      // DCMI reports the codes and the chip's health, not a severity given to one code: the chip's health
      // stays comparable, which fault carries it does not.
      const Health h = c.health();
      for (Fault& f : c.faults) f.severity = severity_of_code(f.code);
      if (!c.faults.empty()) c.faults.front().severity = std::max(h, c.faults.front().severity);
    }
  }
  if (!with_node_numbers) {
    for (auto* nodes : {&s.chip_nodes, &s.vnpu_nodes, &s.control}) {
      for (DeviceNode& n : *nodes) n = DeviceNode{n.path, 0, 0, 0};
    }
  }
  return snapshot_to_json(s);
}

class BackendTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { ::unsetenv("ASCEND_SIM_ROOT"); }

  std::unique_ptr<DeviceQuery> open(const std::string& root, Backend b) {
    BackendOptions o;
    o.backend = b;
    o.root = root;
    o.poll_interval = std::chrono::milliseconds(50);
    auto dq = open_device_query(o);
    EXPECT_TRUE(dq.ok()) << dq.error().message();
    return dq ? std::move(*dq) : nullptr;
  }

  // Both backends' snapshots of `root`, compared; a difference is reported by its JSON path.
  void expect_same(const std::string& root, DeviceQuery& emu, DeviceQuery& dcmi,
                   bool given_severities = false) {
    auto a = emu.snapshot();
    auto b = dcmi.snapshot();
    ASSERT_TRUE(a.ok()) << a.error().message();
    ASSERT_TRUE(b.ok()) << b.error().message();
    EXPECT_EQ(a->backend, "emulator");
    EXPECT_EQ(b->backend, "dcmi");
    const nlohmann::json ja = comparable(*a, root_nodes_, given_severities);
    const nlohmann::json jb = comparable(*b, root_nodes_, given_severities);
    EXPECT_TRUE(ja == jb) << "differences (emulator -> dcmi): " << nlohmann::json::diff(ja, jb).dump(1)
                          << " at " << root;
  }

  bool root_nodes_ = root();
};

TEST_P(BackendTest, BothBackendsGiveTheSameSnapshotThroughFaultsModesAndVnpus) {
  EmulatedHost host(GetParam(), root_nodes_);
  auto emu = open(host.root(), Backend::kEmulator);
  auto dcmi = open(host.root(), Backend::kDcmi);
  ASSERT_TRUE(emu && dcmi);
  expect_same(host.root(), *emu, *dcmi);

  auto s = emu->snapshot();
  ASSERT_TRUE(s.ok());
  const int first = s->chips.front().phy_id;
  const int last = s->chips.back().phy_id;
  // Faults: a code of each severity class, and one whose given severity is worse than its code's.
  // (severity by code, bits 27..24: 0x80E.. Warning, 0x85C.. Alarm, 0x89.. and 0x8F.. Critical)
  ASSERT_TRUE(host.emu().set_fault(first, 0x80E01801, std::nullopt).ok());
  ASSERT_TRUE(host.emu().set_fault(last, 0x85C98008, std::nullopt).ok());
  ASSERT_TRUE(host.emu().set_fault(last, 0x8F078603, std::nullopt).ok());
  expect_same(host.root(), *emu, *dcmi);
  auto d0 = dcmi->snapshot();
  ASSERT_TRUE(d0.ok());
  EXPECT_EQ(d0->chip(first)->health(), Health::kWarning);
  EXPECT_EQ(d0->chip(last)->health(), Health::kCritical);
  // A severity given with the code (npu-sim fault set --severity): the chip's health is what DCMI reports.
  ASSERT_TRUE(host.emu().set_fault(first, 0x80CB8009, Health::kCritical).ok());
  ASSERT_TRUE(host.emu().clear_faults(last).ok());
  ASSERT_TRUE(host.emu().set_fault(last, 0x80CB8009, Health::kAlarm).ok());
  expect_same(host.root(), *emu, *dcmi, true);
  d0 = dcmi->snapshot();
  ASSERT_TRUE(d0.ok());
  EXPECT_EQ(d0->chip(first)->health(), Health::kCritical);
  EXPECT_EQ(d0->chip(last)->health(), Health::kAlarm);
  ASSERT_TRUE(host.emu().clear_faults(first).ok());
  ASSERT_TRUE(host.emu().clear_faults(last).ok());

  if (s->templates.empty()) {
    // A family without vNPUs: DCMI refuses a vNPU too.
    auto v = dcmi->create_vnpu(first, "vir02", std::nullopt, VnpuOwner{});
    EXPECT_FALSE(v.ok());
    return;
  }
  // vNPUs made through each backend, static and dynamic, are the same vNPUs on both.
  const std::string t0 = s->templates.front().name;
  const std::string t1 = s->templates.back().name;
  auto a = emu->create_vnpu(first, t0, std::nullopt, VnpuOwner{});
  ASSERT_TRUE(a.ok()) << a.error().message();
  auto b = dcmi->create_vnpu(last, t1, std::nullopt, VnpuOwner{});
  ASSERT_TRUE(b.ok()) << b.error().message();
  EXPECT_EQ(b->phy_id, last);
  EXPECT_EQ(b->template_name, t1);
  EXPECT_EQ(b->id, 100 + 16 * last);  // the lowest id of the chip
  expect_same(host.root(), *emu, *dcmi);

  // A dynamic vNPU made through DCMI: its owner is the DCMI backend's record (the emulator's state has none).
  VnpuOwner owner;
  owner.container_id = "c0ffee";
  owner.state_root = "/run/runc";
  owner.pid = 4242;
  auto d = dcmi->create_vnpu(first, t0, std::nullopt, owner);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->id, a->id + 1);
  EXPECT_EQ(d->owner, owner);
  auto ds = dcmi->snapshot();
  ASSERT_TRUE(ds.ok());
  ASSERT_NE(ds->vnpu(d->id), nullptr);
  EXPECT_EQ(ds->vnpu(d->id)->owner, owner);
  EXPECT_EQ(ds->vnpu(d->id)->status, 1);
  // A holder that is not the owner cannot destroy it; the owner can.
  VnpuOwner other;
  other.container_id = "other";
  auto st = dcmi->destroy_vnpu(d->id, std::nullopt, other);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ESTALE) << st.error().message();
  st = dcmi->destroy_vnpu(d->id, first, owner);
  ASSERT_TRUE(st.ok()) << st.error().message();
  expect_same(host.root(), *emu, *dcmi);

  // Errors: an unknown vNPU, a wrong chip, an unknown template, over-commit (the same codes as the emulator).
  st = dcmi->destroy_vnpu(999, std::nullopt, std::nullopt);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ENOENT);
  st = dcmi->destroy_vnpu(a->id, last, std::nullopt);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ENOENT);
  auto bad = dcmi->create_vnpu(first, "no-such-template", std::nullopt, VnpuOwner{});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("DCMI error"), std::string::npos) << bad.error().message();
  int made = 0;
  while (made < 40) {
    auto v = dcmi->create_vnpu(last, t1, std::nullopt, VnpuOwner{});
    if (!v) {
      EXPECT_NE(v.error().message().find("dcmi_create_vdevice failed: DCMI error -80"), std::string::npos)
          << v.error().message();
      break;
    }
    ++made;
  }
  EXPECT_LT(made, 40) << "DCMI never refused over-commit";
  expect_same(host.root(), *emu, *dcmi);

  // Destroyed through DCMI, gone for both.
  ASSERT_TRUE(dcmi->destroy_vnpu(a->id, std::nullopt, std::nullopt).ok());
  ASSERT_TRUE(emu->destroy_vnpu(b->id, last, std::nullopt).ok());
  expect_same(host.root(), *emu, *dcmi);
}

TEST_P(BackendTest, TheVnpuModeIsTheSameOnBoth) {
  EmulatedHost host(GetParam(), root_nodes_);
  auto s = host.emu().snapshot();
  ASSERT_TRUE(s.ok());
  if (s->templates.empty()) GTEST_SKIP() << GetParam() << " has no vNPUs, so no vNPU mode to set";
  ASSERT_TRUE(host.emu().set_vnpu_mode("vm").ok());
  auto emu = open(host.root(), Backend::kEmulator);
  auto dcmi = open(host.root(), Backend::kDcmi);
  ASSERT_TRUE(emu && dcmi);
  auto d = dcmi->snapshot();
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->vnpu_mode, "vm");
  expect_same(host.root(), *emu, *dcmi);
}

INSTANTIATE_TEST_SUITE_P(Profiles, BackendTest,
                         ::testing::Values("atlas800-9000", "atlas800t-a2", "atlas800t-a3", "atlas300i-duo"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

TEST(BackendFactory, ParsesTheThreeNamesAndNamesThemInItsError) {
  EXPECT_EQ(*parse_backend("auto"), Backend::kAuto);
  EXPECT_EQ(*parse_backend("emulator"), Backend::kEmulator);
  EXPECT_EQ(*parse_backend("dcmi"), Backend::kDcmi);
  auto bad = parse_backend("nvml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "backend 'nvml' (use auto, emulator or dcmi)");
}

TEST(BackendFactory, AutoPicksDcmiWhereTheDriverHasItAndTheEmulatorElsewhere) {
  ::unsetenv("ASCEND_SIM_ROOT");
  EmulatedHost host("atlas800t-a2");
  BackendOptions o;
  o.root = host.root();
  EXPECT_EQ(find_dcmi_library(o), host.root() + "/usr/local/dcmi/libdcmi.so");
  auto dq = open_device_query(o);
  ASSERT_TRUE(dq.ok()) << dq.error().message();
  EXPECT_EQ((*dq)->snapshot()->backend, "dcmi");
  // Without the driver's library, the emulator answers.
  for (const std::string& lib : dcmi_library_candidates(host.root()))
    ASSERT_EQ(::unlink(lib.c_str()), 0) << lib;
  EXPECT_EQ(find_dcmi_library(o), "");
  dq = open_device_query(o);
  ASSERT_TRUE(dq.ok()) << dq.error().message();
  EXPECT_EQ((*dq)->snapshot()->backend, "emulator");
  // Asked for by name, DCMI without a library is one line naming the path.
  o.backend = Backend::kDcmi;
  o.dcmi_library = host.root() + "/usr/lib/libdcmi.so";
  dq = open_device_query(o);
  ASSERT_FALSE(dq.ok());
  EXPECT_EQ(dq.error().message().find("backend dcmi: cannot load " + o.dcmi_library), 0U)
      << dq.error().message();
  EXPECT_EQ(dq.error().message().find('\n'), std::string::npos);
}

TEST(BackendFactory, ALibraryWithoutTheFunctionsIsAnErrorNamingTheMissingOne) {
  EmulatedHost host("atlas800t-a2");
  BackendOptions o;
  o.backend = Backend::kDcmi;
  o.root = host.root();
  // A library of the driver tree that is not DCMI (the driver stub).
  o.dcmi_library = host.root() + "/usr/local/Ascend/driver/lib64/driver/libascend_hal.so";
  auto dq = open_device_query(o);
  ASSERT_FALSE(dq.ok());
  EXPECT_NE(dq.error().message().find("has no dcmi_init"), std::string::npos) << dq.error().message();
}

TEST(BackendFactory, DcmiWithNoHostFailsAtInitWithTheDcmiCode) {
  ::unsetenv("ASCEND_SIM_ROOT");
  EmulatedHost host("atlas800t-a2");
  ASSERT_TRUE(host.emu().unload().ok());
  // The library installed by load is gone with the host; a copy of it elsewhere finds no host from there.
  BackendOptions o;
  o.backend = Backend::kDcmi;
  o.root = host.root();
  o.dcmi_library = std::string(ASCEND_LIB_DIR) + "/libdcmi.so";
  auto dq = open_device_query(o);
  ASSERT_FALSE(dq.ok());
  EXPECT_NE(dq.error().message().find("dcmi_init failed: DCMI error -8005 (internal error)"),
            std::string::npos)
      << dq.error().message();
}

TEST(BackendFactory, AMalformedOwnerFileIsOneErrorNamingItNotAnException) {
  ::unsetenv("ASCEND_SIM_ROOT");
  EmulatedHost host("atlas800t-a2");
  BackendOptions o;
  o.backend = Backend::kDcmi;
  o.root = host.root();
  auto dq = open_device_query(o);
  ASSERT_TRUE(dq.ok()) << dq.error().message();
  const std::string file = host.root() + "/run/ascend/dcmi-vnpu-owners.json";
  std::filesystem::create_directories(host.root() + "/run/ascend");
  for (const char* text : {R"([{"id": "101", "phy_id": 0, "template": "t", "owner": {}}])", "{not json",
                           R"([{"id": 101, "phy_id": 0, "template": 7, "owner": {}}])"}) {
    std::ofstream(file) << text;
    auto s = (*dq)->snapshot();
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_NE(s.error().message().find(file), std::string::npos) << s.error().message();
  }
}

// The DCMI backend of `host`, polling every `every`.
Result<std::unique_ptr<DeviceQuery>> open_poller(const EmulatedHost& host, std::chrono::milliseconds every) {
  ::unsetenv("ASCEND_SIM_ROOT");
  BackendOptions o;
  o.backend = Backend::kDcmi;
  o.root = host.root();
  o.poll_interval = every;
  return open_device_query(o);
}

TEST(BackendSubscribe, DcmiReportsAFaultAtAPoll) {
  EmulatedHost host("atlas800t-a2");
  auto dq = open_poller(host, std::chrono::milliseconds(200));
  ASSERT_TRUE(dq.ok()) << dq.error().message();
  std::atomic<int> calls{0};
  std::atomic<bool> faulted{false};
  auto sub = (*dq)->subscribe([&](const DeviceSnapshot& s) {
    ++calls;
    if (s.chip(3) != nullptr && s.chip(3)->health() == Health::kCritical) faulted = true;
  });
  ASSERT_TRUE(sub.ok()) << sub.error().message();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(calls.load(), 0) << "no change, no callback";
  // A code that is a Warning by itself, given Critical: only the chip's DCMI health shows it.
  ASSERT_TRUE(host.emu().set_fault(3, 0x80E01801, Health::kCritical).ok());
  EXPECT_TRUE(ascend::testing::eventually([&] { return faulted.load(); }));
  sub->reset();  // joins the poller
}

// Work on a chip moves its telemetry at every poll of a busy real host: that alone is not a change (the
// subscribers act on health, vNPUs and devices; telemetry() reads the values), while a fault still is.
TEST(BackendSubscribe, DcmiDoesNotReportTelemetryAloneAsAChange) {
  EmulatedHost host("atlas800t-a2");
  auto dq = open_poller(host, std::chrono::milliseconds(100));
  ASSERT_TRUE(dq.ok()) << dq.error().message();
  std::atomic<int> calls{0};
  auto sub = (*dq)->subscribe([&](const DeviceSnapshot&) { ++calls; });
  ASSERT_TRUE(sub.ok()) << sub.error().message();
  ASSERT_TRUE(host.emu().set_workload(Workload{2, 90, 5, 4096, 0}).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // five polls
  EXPECT_EQ(calls.load(), 0);
  auto t = (*dq)->telemetry();
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)[2].aicore_pct, 90);  // the values are there to read
  ASSERT_TRUE(host.emu().set_fault(2, 0x80E18402, std::nullopt).ok());
  EXPECT_TRUE(ascend::testing::eventually([&] { return calls.load() > 0; }));
  EXPECT_EQ(calls.load(), 1);
  sub->reset();
}

// A fault cleared and raised again between two polls: both polls see the fault, but a caller that read the
// host in between (the plugin's periodic driver check) saw the clear and applied it. The poll compares with
// the last snapshot the backend returned, so the second fault is still reported to that caller.
TEST(BackendSubscribe, DcmiReportsAFaultAgainWhenAReaderSawItClearedBetweenTwoPolls) {
  EmulatedHost host("atlas800t-a2");
  auto dq = open_poller(host, std::chrono::milliseconds(400));
  ASSERT_TRUE(dq.ok()) << dq.error().message();
  std::mutex mu;
  std::condition_variable cv;
  int faults_seen = 0;
  auto sub = (*dq)->subscribe([&](const DeviceSnapshot& s) {
    std::lock_guard<std::mutex> lock(mu);
    if (s.chip(3) != nullptr && s.chip(3)->health() == Health::kCritical) ++faults_seen;
    cv.notify_all();
  });
  ASSERT_TRUE(sub.ok()) << sub.error().message();
  ASSERT_TRUE(host.emu().set_fault(3, 0x8C204E00, std::nullopt).ok());
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, ascend::testing::kEventually, [&] { return faults_seen == 1; }));
  }
  // Just after a poll: clear, read (as the plugin's driver check does), raise again, all well inside the
  // 400 ms before the next poll.
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(host.emu().clear_faults(3).ok());
  auto cleared = (*dq)->snapshot();
  ASSERT_TRUE(cleared.ok());
  EXPECT_EQ(cleared->chip(3)->health(), Health::kOk);
  ASSERT_TRUE(host.emu().set_fault(3, 0x8C204E00, std::nullopt).ok());
  const auto window = std::chrono::steady_clock::now() - t0;
  if (window > std::chrono::milliseconds(300))
    GTEST_SKIP() << "the machine is too slow to stay between two polls";
  std::unique_lock<std::mutex> lock(mu);
  EXPECT_TRUE(cv.wait_for(lock, ascend::testing::kEventually, [&] { return faults_seen == 2; }))
      << "the second fault was never reported";
  lock.unlock();
  sub->reset();
}

// The subscription's thread (the emulator's watch, the DCMI poll) outlives a subscriber that throws: one line
// is logged, naming the thread, and the next change is reported.
TEST(BackendSubscribe, ACallbackThatThrowsIsLoggedAndTheNextChangeIsReported) {
  struct Case {
    Backend backend;
    const char* thread;
  };
  for (const Case c : {Case{Backend::kEmulator, "emulator watch"}, Case{Backend::kDcmi, "DCMI poll"}}) {
    SCOPED_TRACE(c.thread);
    ascend::testing::GuardedCapture cap;
    ::unsetenv("ASCEND_SIM_ROOT");
    EmulatedHost host("atlas800t-a2");
    BackendOptions o;
    o.backend = c.backend;
    o.root = host.root();
    o.poll_interval = std::chrono::milliseconds(50);
    auto dq = open_device_query(o);
    ASSERT_TRUE(dq.ok()) << dq.error().message();
    std::mutex mu;
    std::condition_variable cv;
    int calls = 0;
    bool chip4_failed = false;
    auto sub = (*dq)->subscribe([&](const DeviceSnapshot& s) {
      std::lock_guard<std::mutex> lock(mu);
      ++calls;
      cv.notify_all();
      if (calls == 1) throw std::runtime_error("subscriber bug");
      if (s.chip(4) != nullptr && s.chip(4)->health() == Health::kCritical) chip4_failed = true;
    });
    ASSERT_TRUE(sub.ok()) << sub.error().message();
    ASSERT_TRUE(host.emu().set_fault(3, 0x80E01801, Health::kCritical).ok());
    {
      std::unique_lock<std::mutex> lock(mu);
      ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(5), [&] { return calls >= 1; }));
    }
    ASSERT_TRUE(cap.wait_for(std::string(c.thread) + ": internal error: subscriber bug (please report it)",
                             std::chrono::seconds(5)));
    ASSERT_TRUE(host.emu().set_fault(4, 0x80E01801, Health::kCritical).ok());
    std::unique_lock<std::mutex> lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(5), [&] { return chip4_failed; }))
        << "the change after the throw was reported";
    lock.unlock();
    sub->reset();
  }
}

}  // namespace
}  // namespace ascend::npu
