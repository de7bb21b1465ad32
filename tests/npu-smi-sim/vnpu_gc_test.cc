// Dynamic vNPU ownership and gc (issue 14), without root: the owner in the state file, the conditional
// destroy, the emulated reboot, and the liveness verdicts against a runc state folder written here and real
// processes (this one, a reaped child, a zombie child).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "ascend/npu/vnpu_gc.h"
#include "emulator_fixture.h"

namespace ascend::npu {
namespace {

using testing::EmulatedHost;

VnpuOwner owner_of(const std::string& id, const std::string& root) {
  VnpuOwner o;
  o.container_id = id;
  o.state_root = root;
  o.pid_ns = own_pid_ns("/proc");
  return o;
}

TEST(VnpuOwner, IsRecordedWithTheVnpuAndMakesItDynamic) {
  EmulatedHost h;
  VnpuOwner o = owner_of("c1", "/run/runc");
  o.pid = 4242;
  o.pid_start = 777;
  o.boot = "k:b";
  auto made = h.emu().create_vnpu(3, "vir05_1c_16g", std::nullopt, o);
  ASSERT_TRUE(made.ok()) << made.error().message();
  auto admin = h.emu().create_vnpu(3, "vir05_1c_16g", std::nullopt, {});
  ASSERT_TRUE(admin.ok());
  auto s = h.emu().read_state();
  ASSERT_TRUE(s.ok());
  const Vnpu* v = s->vnpu(made->id);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->owner, o);
  EXPECT_TRUE(v->dynamic());
  EXPECT_EQ(v->status, 1);
  EXPECT_FALSE(s->vnpu(admin->id)->dynamic());
  EXPECT_EQ(s->vnpu(admin->id)->status, 0);
}

TEST(VnpuOwner, DestroyWithAHolderOnlyWhileThatHolderHoldsIt) {
  EmulatedHost h;
  VnpuOwner o = owner_of("c1", "/run/runc");
  o.pid = 10;
  auto v = h.emu().create_vnpu(0, "vir05_1c_16g", std::nullopt, o);
  ASSERT_TRUE(v.ok());
  VnpuOwner other;
  other.container_id = "c2";
  auto st = h.emu().destroy_vnpu(v->id, std::nullopt, other);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ESTALE);
  VnpuOwner same_id_other_creator = o;
  same_id_other_creator.pid = 11;  // the same container id, created again by another runtime process
  EXPECT_EQ(h.emu().destroy_vnpu(v->id, std::nullopt, same_id_other_creator).error().code(), ESTALE);
  VnpuOwner by_id;
  by_id.container_id = "c1";  // what the poststop hook knows
  EXPECT_TRUE(h.emu().destroy_vnpu(v->id, std::nullopt, by_id).ok());
  EXPECT_EQ(h.emu().destroy_vnpu(v->id, std::nullopt, by_id).error().code(), ENOENT);
}

TEST(Reboot, RestoresVnpusWithTheirOwnersAndStartsANewBoot) {
  ascend::testing::TempDir dir;
  Emulator emu(dir.path() + "/root");
  auto p = load_profile("atlas800t-a2");
  ASSERT_TRUE(p.ok());
  LoadOptions opts = testing::test_load_options();
  opts.node_index = 3;
  ASSERT_TRUE(emu.load(*p, opts).ok());
  auto v = emu.create_vnpu(1, "vir10_3c_32g", std::nullopt, owner_of("gone-after-reboot", "/run/runc"));
  ASSERT_TRUE(v.ok());
  ASSERT_TRUE(emu.set_fault(2, 0x80E01801, Health::kCritical).ok());
  const HostState before = *emu.read_state();

  LoadOptions again = testing::test_load_options();
  again.majors = DeviceMajors{300, 301, 302, 303, 304};
  auto st = emu.reboot(again);
  ASSERT_TRUE(st.ok()) << st.error().message();
  auto after = emu.read_state();
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->vnpus.size(), 1U);
  EXPECT_EQ(after->vnpus[0].owner.container_id, "gone-after-reboot");
  EXPECT_EQ(after->vnpus[0].id, v->id);
  EXPECT_NE(after->boot_id, before.boot_id);
  EXPECT_FALSE(after->boot_id.empty());
  EXPECT_EQ(after->majors.davinci, 300);
  EXPECT_EQ(after->majors.vdavinci, 304);
  EXPECT_EQ(after->chip(2)->health(), Health::kOk);  // a reboot clears faults
  // Node 3's device IPs stay (docs/npu-sim.md: device p of node n has 10.<100+p>.<n/254>.<n%254+1>).
  EXPECT_EQ(after->chip(0)->device_ip, "10.100.0.4");
  EXPECT_EQ(after->chip(7)->device_ip, "10.107.0.4");
}

// ---- liveness --------------------------------------------------------------------------------------------

TEST(ProcessStart, LiveDeadAndZombie) {
  EXPECT_GT(process_start("/proc", static_cast<int>(::getpid())), 0U);
  pid_t reaped = ::fork();
  if (reaped == 0) ::_exit(0);
  ::waitpid(reaped, nullptr, 0);
  EXPECT_EQ(process_start("/proc", reaped), 0U);
  pid_t zombie = ::fork();
  if (zombie == 0) ::_exit(0);
  siginfo_t info{};
  ::waitid(P_PID, static_cast<id_t>(zombie), &info, WEXITED | WNOWAIT);  // exited, not reaped
  EXPECT_EQ(process_start("/proc", zombie), 0U);
  ::waitpid(zombie, nullptr, 0);
}

class Probe : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(root);
    reaped = ::fork();
    if (reaped == 0) ::_exit(0);
    ::waitpid(reaped, nullptr, 0);
  }
  void state(const std::string& id, const std::string& text) {
    std::filesystem::create_directories(root + "/" + id);
    std::ofstream(root + "/" + id + "/state.json") << text;
  }
  static std::string runc_state(int pid, std::uint64_t start) {
    return "{\"id\":\"x\",\"init_process_pid\":" + std::to_string(pid) +
           ",\"init_process_start\":" + std::to_string(start) + ",\"created\":\"2026-01-01T00:00:00Z\"}";
  }
  ascend::testing::TempDir dir;
  std::string root = dir.path() + "/runc";
  pid_t reaped = -1;
  ContainerProbe probe;
  const std::string boot = "kernel:host";
};

TEST_F(Probe, Verdicts) {
  using S = Liveness::State;
  const int me = static_cast<int>(::getpid());
  const std::uint64_t my_start = process_start("/proc", me);
  state("running", runc_state(me, my_start));
  state("stopped", runc_state(reaped, 12345));
  state("reused-pid", runc_state(me, my_start + 1));  // our pid, another start time: not its init
  state("string-start", "{\"init_process_pid\":" + std::to_string(me) + ",\"init_process_start\":\"" +
                            std::to_string(my_start) + "\"}");  // older runc
  state("garbage", "{not json");
  std::filesystem::create_directories(root + "/no-state-file");

  struct Case {
    std::string name;
    VnpuOwner owner;
    S want;
  };
  auto o = [&](const std::string& id) {
    VnpuOwner x = owner_of(id, root);
    x.boot = boot;
    return x;
  };
  VnpuOwner creating = o("not-yet-in-runc");
  creating.pid = me;
  creating.pid_start = my_start;
  VnpuOwner dead_creator = o("not-yet-in-runc");
  dead_creator.pid = reaped;
  dead_creator.pid_start = 999;
  VnpuOwner old_boot = o("running");
  old_boot.boot = "kernel:old-host-load";
  VnpuOwner other_ns = o("gone");
  other_ns.pid_ns = "pid:[1]";
  VnpuOwner unseen = o("gone");
  unseen.state_root = dir.path() + "/not-mounted-here";
  const Case cases[] = {
      {"init alive", o("running"), S::kHeld},
      {"init reaped", o("stopped"), S::kGone},
      {"pid reused by another process", o("reused-pid"), S::kGone},
      {"start time as a string", o("string-start"), S::kHeld},
      {"no such container", o("gone"), S::kGone},
      {"folder without state.json", o("no-state-file"), S::kGone},
      {"unreadable state", o("garbage"), S::kUnsure},
      {"creator still running", creating, S::kHeld},
      {"creator dead, no container", dead_creator, S::kGone},
      {"another boot, even with a live init", old_boot, S::kGone},
      {"another pid namespace", other_ns, S::kUnsure},
      {"state folder not visible", unseen, S::kUnsure},
      {"id with a slash", o("../etc"), S::kUnsure},
  };
  for (const auto& c : cases) {
    Liveness l = probe.check(c.owner, boot);
    EXPECT_EQ(l.state, c.want) << c.name << ": " << l.why;
    EXPECT_FALSE(l.why.empty()) << c.name;
  }
}

// "<kernel boot_id>:<host load id>"; the DCMI backend cannot tell the load id and leaves it empty, so a
// vNPU stamped by a shim on the emulator backend must not look rebooted to a plugin on DCMI (and back).
TEST(EarlierBoot, KernelAlwaysCountsTheLoadOnlyWhenBothSidesKnowIt) {
  EXPECT_FALSE(earlier_boot("k1:load1", "k1:load1"));
  EXPECT_TRUE(earlier_boot("k1:load1", "k1:load2"));  // the emulated host was reloaded
  EXPECT_TRUE(earlier_boot("k1:load1", "k2:load1"));  // the machine rebooted
  EXPECT_TRUE(earlier_boot("k1:", "k2:"));
  EXPECT_FALSE(earlier_boot("k1:load1", "k1:"));  // stamped through the emulator, judged through DCMI
  EXPECT_FALSE(earlier_boot("k1:", "k1:load1"));  // and the other way round
  EXPECT_TRUE(earlier_boot("k1:", "k2:load1"));
  EXPECT_FALSE(earlier_boot("", "k1:load1"));  // no stamp: no verdict by boot
}

TEST(PlanGc, StaticVnpusAreNeverListedAndOnlyGoneOnesAreDestroyed) {
  HostState s;
  auto add = [&](int id, const std::string& container) {
    Vnpu v;
    v.id = id;
    v.owner.container_id = container;
    s.vnpus.push_back(v);
  };
  add(100, "");  // static
  add(101, "gone");
  add(102, "alive");
  add(103, "unsure");
  add(104, "gone");
  add(105, "dra-claim/0f3c-uid/npu-0-vir05-1c-16g-0");  // a DRA claim's: the plugin destroys it
  GcPlan plan = plan_vnpu_gc(to_snapshot(s), [](const VnpuOwner& o) {
    if (o.container_id == "gone") return Liveness{Liveness::State::kGone, "gone"};
    if (o.container_id.starts_with("dra-claim/")) return Liveness{Liveness::State::kGone, "judged"};
    if (o.container_id == "alive") return Liveness{Liveness::State::kHeld, "alive"};
    return Liveness{Liveness::State::kUnsure, "?"};
  });
  std::vector<int> destroy;
  std::vector<int> keep;
  for (const auto& i : plan.destroy) destroy.push_back(i.vnpu.id);
  for (const auto& i : plan.keep) keep.push_back(i.vnpu.id);
  EXPECT_EQ(destroy, (std::vector<int>{101, 104}));
  EXPECT_EQ(keep, (std::vector<int>{102, 103}));
}

TEST(RunGc, DryRunDestroysNothingAndARealRunOnlyTheOrphans) {
  EmulatedHost h;
  ascend::testing::TempDir runc;
  const std::string boot = boot_of(*h.emu().snapshot(), "/proc");
  const int me = static_cast<int>(::getpid());
  std::filesystem::create_directories(runc.path() + "/alive");
  std::ofstream(runc.path() + "/alive/state.json")
      << "{\"init_process_pid\":" << me << ",\"init_process_start\":" << process_start("/proc", me) << "}";
  auto owner = [&](const std::string& id) {
    VnpuOwner o = owner_of(id, runc.path());
    o.boot = boot;
    return o;
  };
  auto orphan = h.emu().create_vnpu(0, "vir05_1c_16g", std::nullopt, owner("gone"));
  auto held = h.emu().create_vnpu(0, "vir05_1c_16g", std::nullopt, owner("alive"));
  auto admin = h.emu().create_vnpu(0, "vir05_1c_16g", std::nullopt, {});
  ASSERT_TRUE(orphan.ok() && held.ok() && admin.ok());
  ContainerProbe probe;

  auto dry = run_vnpu_gc(h.emu(), probe, true);
  ASSERT_TRUE(dry.ok());
  ASSERT_EQ(dry->destroyed.size(), 1U);
  EXPECT_EQ(dry->destroyed[0].vnpu.id, orphan->id);
  EXPECT_EQ(h.emu().read_state()->vnpus.size(), 3U);

  auto real = run_vnpu_gc(h.emu(), probe, false);
  ASSERT_TRUE(real.ok());
  EXPECT_TRUE(real->errors.empty());
  ASSERT_EQ(real->destroyed.size(), 1U);
  ASSERT_EQ(real->kept.size(), 1U);
  EXPECT_EQ(real->kept[0].vnpu.id, held->id);
  auto s = h.emu().read_state();
  EXPECT_EQ(s->vnpu(orphan->id), nullptr);
  EXPECT_NE(s->vnpu(held->id), nullptr);
  EXPECT_NE(s->vnpu(admin->id), nullptr);
}

}  // namespace
}  // namespace ascend::npu
