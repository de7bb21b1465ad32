#include "ascend/npu/emulator.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "ascend/common/fs.h"
#include "ascend/npu/driver_files.h"
#include "emulator_fixture.h"
#include "run_command.h"

namespace ascend::npu {
namespace {

namespace fs = std::filesystem;
using testing::EmulatedHost;
using testing::test_load_options;

TEST(Majors, PicksUnregisteredCharMajors) {
  const std::string proc =
      "Character devices:\n  1 mem\n234 foo\n235 bar\n237 baz\n254 x\n\nBlock devices:\n236 blk\n";
  auto m = pick_free_majors(proc);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->davinci, 236);  // a block major does not count
  EXPECT_EQ(m->manager, 238);
  EXPECT_EQ(m->svm, 239);
  EXPECT_EQ(m->hdc, 240);
  EXPECT_EQ(m->vdavinci, 241);
  std::string full = "Character devices:\n";
  for (int i = 234; i <= 254; ++i) full += std::to_string(i) + " x\n";
  for (int i = 384; i <= 511; ++i) full += std::to_string(i) + " x\n";
  EXPECT_EQ(pick_free_majors(full).error().code(), ENOSPC);
}

TEST(Root, FlagThenEnvThenSlash) {
  ::setenv("ASCEND_SIM_ROOT", "/from/env", 1);
  EXPECT_EQ(resolve_root(std::string("/flag")), "/flag");
  EXPECT_EQ(resolve_root(std::nullopt), "/from/env");
  ::unsetenv("ASCEND_SIM_ROOT");
  EXPECT_EQ(resolve_root(std::nullopt), "/");
}

TEST(Load, LaysOutTheDriverTreeAndState) {
  EmulatedHost h("atlas800t-a2");
  const std::string r = h.root();
  for (const char* f :
       {"usr/local/Ascend/driver/version.info", "usr/local/Ascend/driver/lib64/driver/libascend_hal.so",
        "usr/local/Ascend/driver/lib64/common/libc_sec.so", "usr/local/Ascend/driver/include",
        "usr/local/Ascend/driver/tools/hccn_tool", "usr/local/dcmi/libdcmi.so", "usr/local/bin/npu-smi",
        "etc/ascend_install.info", "etc/hccn.conf", kStateFile}) {
    EXPECT_TRUE(fs::exists(r + "/" + f)) << f;
  }
  EXPECT_EQ(read_file(r + "/usr/local/Ascend/driver/version.info")->rfind("Version=24.1.rc1.b030\n", 0), 0U);
  auto hccn = *read_file(r + "/etc/hccn.conf");
  EXPECT_NE(hccn.find("address_0=10.100.0.1\n"), std::string::npos);
  EXPECT_NE(hccn.find("address_7=10.107.0.1\n"), std::string::npos);
  // Every driver file the query API lists exists under the root.
  for (const auto& f : driver_files()) EXPECT_TRUE(fs::exists(h.emu().host_path(f))) << f;
  auto s = h.emu().read_state();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->profile, "atlas800t-a2");
  EXPECT_EQ(s->majors.davinci, 234);
  EXPECT_EQ(s->generation, 1U);
}

TEST(Load, RefusesASecondLoadUnlessForced) {
  EmulatedHost h;
  auto p = *builtin_profile("atlas800t-a3");
  Status again = h.emu().load(p, test_load_options());
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), EEXIST);
  EXPECT_NE(again.error().message().find("npu-sim unload"), std::string::npos);
  auto opts = test_load_options();
  opts.force = true;
  ASSERT_TRUE(h.emu().load(p, opts).ok());
  EXPECT_EQ(h.emu().read_state()->chips.size(), 16U);
}

TEST(Load, MissingNpuSmiBinaryIsAClearError) {
  ascend::testing::TempDir d;
  Emulator e(d / "root");
  auto opts = test_load_options();
  opts.npu_smi_binary = d / "nope/npu-smi";
  Status s = e.load(*builtin_profile("atlas800t-a2"), opts);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("npu-smi binary not found"), std::string::npos);
  EXPECT_FALSE(e.loaded());
}

TEST(Unload, RemovesExactlyWhatLoadCreated) {
  ascend::testing::TempDir d;
  const std::string r = d / "root";
  fs::create_directories(r + "/etc");
  fs::create_directories(r + "/usr/local/bin");
  std::ofstream(r + "/etc/hostname") << "mine\n";
  std::ofstream(r + "/usr/local/bin/tool") << "mine\n";
  Emulator e(r);
  ASSERT_TRUE(e.load(*builtin_profile("atlas300i-duo"), test_load_options()).ok());
  ASSERT_TRUE(e.create_vnpu(0, "vir01", std::nullopt, {}).ok());
  ASSERT_TRUE(e.unload().ok());
  std::vector<std::string> left;
  for (const auto& p : fs::recursive_directory_iterator(r))
    left.push_back(fs::relative(p.path(), r).string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"etc", "etc/hostname", "usr", "usr/local", "usr/local/bin",
                                            "usr/local/bin/tool"}));
  Status again = e.unload();
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), ENOENT);
}

TEST(Snapshot, NotLoadedSaysWhatToDo) {
  Emulator e("/nonexistent-ascend-root");
  auto s = e.snapshot();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("npu-sim load"), std::string::npos);
}

TEST(Snapshot, CorruptStateNamesTheFile) {
  EmulatedHost h;
  ASSERT_TRUE(atomic_replace(h.emu().state_path(), "{\"schema\": 1, \"chips\": [}").ok());
  auto s = h.emu().read_state();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("state.json"), std::string::npos);
}

TEST(Vnpu, PlanPicksLowestFreeIdAndRefusesOvercommit) {
  auto s = *builtin_profile("atlas800t-a2");
  auto v1 = plan_vnpu(s, 2, "vir10_3c_32g", std::nullopt);
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ(v1->id, 132);
  s.vnpus.push_back(*v1);
  auto v2 = plan_vnpu(s, 2, "vir10_3c_32g", std::nullopt);
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ(v2->id, 133);
  EXPECT_EQ(v2->vgroup, 1);
  s.vnpus.push_back(*v2);
  auto full = plan_vnpu(s, 2, "vir05_1c_16g", std::nullopt);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code(), ENOSPC);
  EXPECT_NE(full.error().message().find("AICore"), std::string::npos);
  // Another chip is unaffected; explicit ids are range-checked and unique.
  EXPECT_TRUE(plan_vnpu(s, 3, "vir05_1c_16g", 150).ok());
  EXPECT_EQ(plan_vnpu(s, 3, "vir05_1c_16g", 132).error().code(), EINVAL);
  EXPECT_EQ(plan_vnpu(s, 2, "vir05_1c_16g", 133).error().code(), ENOSPC);
  EXPECT_EQ(plan_vnpu(s, 9, "vir05_1c_16g", std::nullopt).error().code(), ENOENT);
  auto bad = plan_vnpu(s, 0, "vir01", std::nullopt);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("vir10_3c_32g, vir05_1c_16g"), std::string::npos);
}

TEST(Vnpu, AicpuAndMemoryAreAccountedToo) {
  auto s = *builtin_profile("atlas300i-duo");  // 8 AICore, 24 GB, 7 AICPU
  for (int i = 0; i < 2; ++i) {
    auto v = plan_vnpu(s, 0, "vir04", std::nullopt);  // 4 cores, 12 GB, 4 AICPU
    if (i == 1) {
      ASSERT_FALSE(v.ok());
      EXPECT_NE(v.error().message().find("AICPU"), std::string::npos) << v.error().message();
      break;
    }
    ASSERT_TRUE(v.ok());
    s.vnpus.push_back(*v);
  }
  s.vnpus.clear();
  s.vnpu_capacity.memory_gb = 20;
  s.vnpus.push_back(*plan_vnpu(s, 0, "vir04_3c", std::nullopt));
  auto mem = plan_vnpu(s, 0, "vir04_3c", std::nullopt);
  ASSERT_FALSE(mem.ok());
  EXPECT_NE(mem.error().message().find("memory"), std::string::npos);
}

TEST(Vnpu, CreateAndDestroyThroughTheStateFile) {
  EmulatedHost h;
  auto v = h.emu().create_vnpu(1, "vir05_1c_16g", std::nullopt, {});
  ASSERT_TRUE(v.ok()) << v.error().message();
  EXPECT_EQ(v->id, 116);
  auto s = *h.emu().read_state();
  ASSERT_EQ(s.vnpus.size(), 1U);
  EXPECT_TRUE(s.holds_vnpus(1));
  EXPECT_FALSE(s.holds_vnpus(0));
  EXPECT_EQ(h.emu().destroy_vnpu(116, 2, std::nullopt).error().code(), ENOENT);  // wrong chip
  ASSERT_TRUE(h.emu().destroy_vnpu(116, 1, std::nullopt).ok());
  EXPECT_TRUE(h.emu().read_state()->vnpus.empty());
  auto again = h.emu().destroy_vnpu(116, std::nullopt, std::nullopt);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().message(), "destroy vNPU 116: no vNPU 116");
}

TEST(VnpuMode, SwitchRefusedWhileVnpusExist) {
  EmulatedHost h;
  ASSERT_TRUE(h.emu().set_vnpu_mode("vm").ok());
  ASSERT_TRUE(h.emu().set_vnpu_mode("docker").ok());
  ASSERT_TRUE(h.emu().create_vnpu(0, "vir05_1c_16g", std::nullopt, {}).ok());
  Status s = h.emu().set_vnpu_mode("vm");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("Destroy them before switching"), std::string::npos);
  EXPECT_FALSE(h.emu().set_vnpu_mode("both").ok());
}

TEST(Faults, SetAndClearChangeHealth) {
  EmulatedHost h;
  ASSERT_TRUE(h.emu().set_fault(3, 0x80E01801, std::nullopt).ok());
  EXPECT_EQ(h.emu().read_state()->chip(3)->health(), Health::kWarning);
  ASSERT_TRUE(h.emu().set_fault(3, 0x80E01801, Health::kCritical).ok());  // same code: severity replaced
  auto s = *h.emu().read_state();
  EXPECT_EQ(s.chip(3)->faults.size(), 1U);
  EXPECT_EQ(s.chip(3)->health(), Health::kCritical);
  EXPECT_EQ(s.chip(2)->health(), Health::kOk);
  ASSERT_TRUE(h.emu().clear_faults(3).ok());
  EXPECT_EQ(h.emu().read_state()->chip(3)->health(), Health::kOk);
  EXPECT_EQ(h.emu().set_fault(8, 1, std::nullopt).error().code(), ENOENT);
  EXPECT_FALSE(h.emu().set_fault(0, 1, Health::kOk).ok());
}

TEST(Update, AFailedChangeWritesNothing) {
  EmulatedHost h;
  auto before = *read_file(h.emu().state_path());
  Status s = h.emu().update([](HostState& st) -> Status {
    st.chips[0].temp_c = 99;
    return Error::invalid("changed my mind");
  });
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(*read_file(h.emu().state_path()), before);
}

// Eight processes change the state at once: no update is lost and no chip is over-committed.
TEST(Concurrency, EightWritersLoseNothingAndNeverOvercommit) {
  EmulatedHost h;
  constexpr int kWriters = 8;
  constexpr int kFaultsEach = 15;
  std::vector<pid_t> kids;
  for (int w = 0; w < kWriters; ++w) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      Emulator e(h.root());
      int made = 0;
      for (int i = 0; i < kFaultsEach; ++i) {
        if (!e.set_fault(w, 0x80000000U + static_cast<unsigned>(i), std::nullopt).ok()) ::_exit(10);
        // Every writer also races for vNPUs on chip 0 (room for four vir05_1c_16g).
        auto v = e.create_vnpu(0, "vir05_1c_16g", std::nullopt, {});
        if (v.ok()) {
          ++made;
        } else if (v.error().code() != ENOSPC) {
          ::_exit(11);
        }
      }
      ::_exit(made);
    }
    kids.push_back(pid);
  }
  int made_total = 0;
  for (pid_t k : kids) {
    int status = 0;
    ASSERT_EQ(::waitpid(k, &status, 0), k);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_LT(WEXITSTATUS(status), 10) << "writer failed with " << WEXITSTATUS(status);
    made_total += WEXITSTATUS(status);
  }
  auto s = *h.emu().read_state();
  for (int w = 0; w < kWriters; ++w)
    EXPECT_EQ(s.chip(w)->faults.size(), static_cast<std::size_t>(kFaultsEach));
  EXPECT_EQ(made_total, 4);
  EXPECT_EQ(s.vnpus.size(), 4U);
  // generation: load (1) + every committed change.
  EXPECT_EQ(s.generation, 1U + kWriters * kFaultsEach + 4);
}

TEST(Subscribe, HearsOfAHealthChange) {
  EmulatedHost h;
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Health> seen;
  auto sub = h.emu().subscribe([&](const DeviceSnapshot& s) {
    std::lock_guard<std::mutex> l(mu);
    seen = s.chip(5)->health();
    cv.notify_all();
  });
  ASSERT_TRUE(sub.ok());
  // Another process (npu-sim fault set) raises the fault. Exec'd, not a forked copy of this process: a
  // child of a multithreaded process that allocates can deadlock on a lock another thread held at the fork
  // (it did under ASan, scripts/test --sanitize).
  auto r = ascend::testing::run_command({std::string(ASCEND_BIN_DIR) + "/npu-sim", "fault", "set", "--device",
                                         "5", "--code", "0x8C084E00", "--root", h.root()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::unique_lock<std::mutex> l(mu);
  ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(2), [&] { return seen.has_value(); }));
  EXPECT_EQ(*seen, Health::kCritical);
  seen.reset();
  l.unlock();
  ASSERT_TRUE(h.emu().clear_faults(5).ok());
  l.lock();
  ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(2), [&] { return seen.has_value(); }));
  EXPECT_EQ(*seen, Health::kOk);
}

}  // namespace
}  // namespace ascend::npu
