// Device lifecycle when things go wrong (issue 14), end to end with real runc: the shim SIGKILLed between
// the vNPU's creation and config.json (the test switch ASCEND_RUNTIME_ABORT_AT of its test build), the
// container's runc init killed between create and start, a running container's vNPU kept by gc, 200 rounds of
// random kills (50 under the sanitizers), a simulated reboot, and the /dev/char links (made at start, the
// vNPU's removed by gc, ours removed by uninstall, udev's kept). Root only. Runs on both backends of the
// device seam (ASCEND_TEST_BACKEND, tests/common/test_backend.h): the runtime's `backend:`, and every
// question of what the host holds (vNPUs, their owners, device numbers), is asked of that backend; with DCMI
// the owners are the DCMI backend's owner file's, not the emulator's state.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <random>

#include "ascend/npu/backend.h"
#include "ascend/npu/vnpu_gc.h"
#include "sanitizers.h"
#include "splitmix.h"
#include "support.h"
#include "test_backend.h"

extern char** environ;

namespace ascend::hook {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): the test support helpers

std::string link_of(const std::string& path) {
  char buf[256];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

bool present(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

class Lifecycle : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (runc, device nodes)";
    if (!have_program("runc")) FAIL() << "runc is not installed (scripts/deps installs it)";
    if (::access("/bin/busybox", X_OK) != 0) FAIL() << "busybox-static is not installed (scripts/deps)";
    host_ = std::make_unique<EmulatedHost>(tmp_ / "host");
    ASSERT_TRUE(host_->ok()) << host_->error();
    config_ = write_hook_config(tmp_.path(), tmp_ / "host");
    // One rootfs for every container; each gets its own bundle folder (the shim rewrites config.json).
    Bundle model(tmp_ / "model");
    spec_ = model.spec();
    spec_["root"]["path"] = model.rootfs();
    spec_["root"]["readonly"] = true;
  }

  void TearDown() override {
    for (const auto& id : created_) runner_.remove(id);
  }

  // The host now, as the backend under test reports it (what the shim, the hook and gc read). Opened anew
  // each time: a reboot loads the driver again. An unreadable host is a failure and an empty snapshot.
  npu::DeviceSnapshot now() const {
    npu::BackendOptions o;
    auto b = npu::parse_backend(ascend::testing::test_backend());
    if (!b) {
      ADD_FAILURE() << b.error().message();
      return {};
    }
    o.backend = *b;
    o.root = tmp_ / "host";
    auto dq = npu::open_device_query(o);
    if (!dq) {
      ADD_FAILURE() << dq.error().message();
      return {};
    }
    auto s = (*dq)->snapshot();
    if (!s) {
      ADD_FAILURE() << s.error().message();
      return {};
    }
    EXPECT_EQ(s->backend, o.backend == npu::Backend::kDcmi ? "dcmi" : "emulator");
    return std::move(*s);
  }
  std::string state_root() const { return tmp_ / "runc-state"; }

  // A bundle whose container runs `args` and asks for a vNPU of vir05_1c_16g (5 of 20 AICores of a 910B3)
  // on `chip`, plus `extra` env.
  std::string bundle(const std::vector<std::string>& args, int chip,
                     const std::vector<std::string>& extra = {}) {
    std::string dir = tmp_ / ("b" + std::to_string(bundles_++));
    std::filesystem::create_directories(dir);
    nlohmann::json spec = spec_;
    spec["process"]["args"] = args;
    spec["process"]["env"].push_back("ASCEND_VISIBLE_DEVICES=" + std::to_string(chip));
    spec["process"]["env"].push_back("ASCEND_VNPU_SPECS=vir05_1c_16g");
    for (const auto& e : extra) spec["process"]["env"].push_back(e);
    spit(dir + "/config.json", spec.dump(2));
    return dir;
  }

  std::vector<std::string> env_with(const std::string& entry) const {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    env.push_back(entry);
    return env;
  }

  // `ascend-docker-runtime create` of container `id`; `abort_at` names the shim's test switch step (only
  // its test build, ascend-docker-runtime-testkill, has the switch).
  Output create(const std::string& bundle_dir, const std::string& id, const std::string& abort_at = "") {
    created_.push_back(id);
    RunOptions opts;
    if (!abort_at.empty()) opts.env = env_with("ASCEND_RUNTIME_ABORT_AT=" + abort_at);
    const char* shim = abort_at.empty() ? "ascend-docker-runtime" : "ascend-docker-runtime-testkill";
    return run({bin(shim), "--config", config_, "--root", state_root(), "create", "--bundle", bundle_dir, id},
               opts);
  }

  int init_pid(const std::string& id) {
    auto o = runner_.runc({"state", id});
    if (o.exit_code != 0) return -1;
    return nlohmann::json::parse(o.out).value("pid", -1);
  }

  // Kills the container's init (runc init before start, the program after) as a crash would, and waits
  // until it no longer runs.
  void kill_init(const std::string& id) {
    int pid = init_pid(id);
    ASSERT_GT(pid, 0) << id;
    ::kill(pid, SIGKILL);
    for (int i = 0; i < 500 && npu::process_start("/proc", pid) != 0; ++i) ::usleep(2000);
    ASSERT_EQ(npu::process_start("/proc", pid), 0U) << "init " << pid << " of " << id << " still runs";
  }

  Output gc(bool dry_run = false) {
    std::vector<std::string> argv = {bin("ascend-ctk"), "--config", config_, "vnpu", "gc"};
    if (dry_run) argv.emplace_back("--dry-run");
    return run(argv);
  }

  // The dynamic vNPU of container `id` in the state, or -1.
  int vnpu_of(const std::string& id) const {
    for (const auto& v : now().vnpus) {
      if (v.owner.container_id == id) return v.id;
    }
    return -1;
  }

  TempDir tmp_{"life"};
  std::unique_ptr<EmulatedHost> host_;
  std::string config_;
  nlohmann::json spec_;
  Runner runner_{tmp_ / "runc-state"};
  std::vector<std::string> created_;
  int bundles_ = 0;
};

TEST_F(Lifecycle, ShimKilledBetweenVnpuCreationAndTheSpecLeavesAVnpuThatGcFrees) {
  for (const char* step : {"vnpu-created", "spec-written"}) {
    SCOPED_TRACE(step);
    std::string id = unique_id("abort");
    auto o = create(bundle({"/bin/true"}, 3), id, step);
    EXPECT_EQ(o.exit_code, 128 + SIGKILL) << o.err;
    EXPECT_NE(runner_.runc({"state", id}).exit_code, 0) << "runc never ran";
    const int vid = vnpu_of(id);
    ASSERT_GE(vid, 100 + 16 * 3) << "the vNPU was made and tagged with its container before the kill";
    auto dry = gc(true);
    EXPECT_EQ(dry.exit_code, 0) << dry.err;
    EXPECT_NE(dry.out.find("would destroy vNPU " + std::to_string(vid)), std::string::npos) << dry.out;
    EXPECT_EQ(vnpu_of(id), vid) << "--dry-run destroyed it";
    auto g = gc();
    EXPECT_EQ(g.exit_code, 0) << g.err;
    EXPECT_NE(g.out.find("destroyed vNPU " + std::to_string(vid)), std::string::npos) << g.out;
    EXPECT_EQ(vnpu_of(id), -1);
    EXPECT_FALSE(present((tmp_ / "host/dev/vdavinci") + std::to_string(vid)));
  }
}

TEST_F(Lifecycle, RuncKilledBetweenCreateAndStartLeavesAVnpuThatGcFrees) {
  std::string id = unique_id("created");
  auto o = create(bundle({"/bin/true"}, 1), id);
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const int vid = vnpu_of(id);
  ASSERT_GE(vid, 116);
  // Created, not started: gc keeps it (the container may start any moment).
  auto keep = gc();
  EXPECT_NE(keep.out.find("kept vNPU " + std::to_string(vid)), std::string::npos) << keep.out;
  EXPECT_EQ(vnpu_of(id), vid);
  kill_init(id);  // runc init dies before `runc start`; nobody runs `runc delete`
  auto g = gc();
  EXPECT_NE(g.out.find("destroyed vNPU " + std::to_string(vid)), std::string::npos) << g.out;
  EXPECT_EQ(vnpu_of(id), -1);
  // When the engine deletes it after all, its poststop hook finds the vNPU gone and does not fail.
  EXPECT_EQ(runner_.runc({"delete", id}).exit_code, 0);
}

TEST_F(Lifecycle, ARunningContainersVnpuSurvivesGcAndItsPoststopOnlyDestroysItsOwn) {
  std::string id = unique_id("running");
  ASSERT_EQ(create(bundle({"/bin/sleep", "1000"}, 2), id).exit_code, 0);
  ASSERT_EQ(runner_.runc({"start", id}).exit_code, 0);
  const int vid = vnpu_of(id);
  ASSERT_GE(vid, 132);
  const npu::DeviceSnapshot host = now();  // held: vnpu() points into it
  const npu::Vnpu* held = host.vnpu(vid);
  ASSERT_TRUE(held != nullptr);
  EXPECT_EQ(held->status, 1) << "the backend reports the vNPU in use";
  // npu-smi (the driver's view) lists it. The emulated driver holds the owner that the emulator backend
  // recorded and shows the vNPU in use, as the real tool does; DCMI has no owner to give the driver (the DCMI
  // backend keeps it in its own file), so on that path the driver knows only the vNPU and its template.
  auto smi = run({bin("npu-smi"), "info", "-t", "info-vnpu", "-i", "2", "-c", "0"},
                 {.env = env_with("ASCEND_SIM_ROOT=" + (tmp_ / "host"))});
  const std::string row =
      ascend::testing::test_backend() == "dcmi"
          ? "|  " + std::to_string(vid) + "      |  0             |  000000000000  |  0       |"
          : "|  " + std::to_string(vid) + "      |  0             |  ffffffffffff  |  1       |";
  EXPECT_NE(smi.out.find(row + "  vir05_1c_16g        |"), std::string::npos) << smi.out;
  for (int i = 0; i < 3; ++i) {
    auto g = gc();
    EXPECT_EQ(g.exit_code, 0);
    EXPECT_EQ(vnpu_of(id), vid) << g.out;
  }
  ASSERT_EQ(runner_.runc({"kill", id, "KILL"}).exit_code, 0);
  for (int i = 0; i < 200 && runner_.runc({"state", id}).out.find("\"stopped\"") == std::string::npos; ++i)
    ::usleep(5000);
  ASSERT_EQ(runner_.runc({"delete", id}).exit_code, 0);
  EXPECT_EQ(vnpu_of(id), -1) << "the poststop hook destroys the vNPU of its own container";
}

TEST_F(Lifecycle, ManyRoundsOfRandomKillsLeaveNoOrphanAfterOneGc) {
  // Each round starts one container through the shim and kills something at random: the shim at either
  // step of its test switch, the container's init before start, a running container (no delete), or nothing
  // (the container keeps running for later rounds, or is deleted normally). gc runs at random moments; every
  // time, each live container must still hold its vNPU. 200 rounds; 50 under the sanitizers
  // (tests/common/sanitizers.h), where 200 took 110 s of CI's budget.
  const int rounds = ascend::testing::kUnderSanitizers ? 50 : 200;
  ascend::testing::SplitMix64 rng{14};
  std::map<std::string, int> live;  // container -> its vNPU
  int destroyed_by_gc = 0;
  int refused_full = 0;
  auto check_live = [&](const char* when) {
    auto s = now();
    for (const auto& [id, vid] : live) {
      const npu::Vnpu* v = s.vnpu(vid);
      ASSERT_TRUE(v != nullptr && v->owner.container_id == id)
          << when << ": the vNPU " << vid << " of live container " << id << " was destroyed";
    }
  };
  auto run_gc = [&] {
    auto g = gc();
    ASSERT_EQ(g.exit_code, 0) << g.err;
    for (std::size_t p = g.out.find("destroyed vNPU"); p != std::string::npos;
         p = g.out.find("destroyed vNPU", p + 1))
      ++destroyed_by_gc;
    check_live("after gc");
  };
  for (int round = 0; round < rounds; ++round) {
    std::string id = unique_id("r" + std::to_string(round));
    const int chip = static_cast<int>(rng.next() % 8);
    const int action = static_cast<int>(rng.next() % 6);
    std::string abort_at = action == 0 ? "vnpu-created" : action == 1 ? "spec-written" : "";
    auto o = create(bundle({"/bin/sleep", "1000"}, chip), id, abort_at);
    if (o.exit_code != 0 && abort_at.empty()) {
      // The chip is full (orphans not yet collected): refused cleanly, nothing left behind.
      ASSERT_NE(o.err.find("vir05_1c_16g"), std::string::npos) << o.err;
      ++refused_full;
    } else if (!abort_at.empty()) {
      ASSERT_EQ(o.exit_code, 128 + SIGKILL) << o.err;
    } else {
      const int vid = vnpu_of(id);
      ASSERT_GE(vid, 100) << id;
      if (action == 2) {
        kill_init(id);  // runc init killed between create and start
      } else {
        ASSERT_EQ(runner_.runc({"start", id}).exit_code, 0);
        if (action == 3) {
          kill_init(id);  // a running container crashes, nobody deletes it
        } else if (action == 4 && live.size() < 4) {
          live[id] = vid;  // keeps running
        } else {
          runner_.remove(id);  // stopped and deleted: its poststop hook destroys the vNPU
          EXPECT_EQ(vnpu_of(id), -1) << id;
        }
      }
    }
    // Sometimes a live container ends normally.
    if (!live.empty() && rng.next() % 5 == 0) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng.next() % live.size()));
      runner_.remove(it->first);
      live.erase(it);
    }
    if (rng.next() % 4 == 0) run_gc();
    if (::testing::Test::HasFatalFailure()) return;
  }
  run_gc();
  // One gc after it all: what is left is exactly the live containers' vNPUs.
  std::map<std::string, int> left;
  for (const auto& v : now().vnpus) left[v.owner.container_id] = v.id;
  EXPECT_EQ(left, live);
  std::printf("%d rounds: %d vNPUs destroyed by gc, %d creates refused while a chip was full, %zu live\n",
              rounds, destroyed_by_gc, refused_full, live.size());
  for (const auto& [id, vid] : live) runner_.remove(id);
  EXPECT_TRUE(now().vnpus.empty());
}

TEST_F(Lifecycle, AfterAReboot) {
  // Two running containers with vNPUs and an administrator's static vNPU; then the host reboots: every
  // container process dies, /run (runc's state) is empty again, and the driver restores its vNPU
  // configuration (vnpu-cfg-recover) with other majors. The first gc frees every dynamic vNPU, on the boot
  // stamp alone (runc's state folder is not there to ask).
  //
  // The two backends see a reboot differently. `npu-sim reboot` reloads the emulated driver, which gives it
  // a new load id; it cannot reboot the kernel, so the kernel's boot_id stays. The emulator backend reports
  // the load id (DeviceSnapshot::boot_id) and stamps owners "<kernel boot_id>:<load id>", so the reload is
  // a reboot to it. DCMI has no load id: the DCMI backend stamps "<kernel boot_id>:" and, on a real host,
  // knows a reboot only by the kernel's boot_id (vnpu_gc.h earlier_boot). For it the reload is no reboot at
  // all, so its variant also makes its owner records read as a real reboot leaves them: stamped with a
  // kernel boot_id that is not this boot's.
  std::vector<std::string> ids = {unique_id("boot"), unique_id("boot")};
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ASSERT_EQ(create(bundle({"/bin/sleep", "1000"}, static_cast<int>(i)), ids[i]).exit_code, 0);
    ASSERT_EQ(runner_.runc({"start", ids[i]}).exit_code, 0);
  }
  auto admin = run({bin("npu-smi"), "set", "-t", "create-vnpu", "-i", "5", "-c", "0", "-f", "vir10_3c_32g"},
                   {.env = env_with("ASCEND_SIM_ROOT=" + (tmp_ / "host"))});
  ASSERT_EQ(admin.exit_code, 0) << admin.out << admin.err;
  ASSERT_EQ(now().vnpus.size(), 3U);
  for (const auto& id : ids) kill_init(id);
  std::filesystem::rename(state_root(), tmp_ / "runc-state-before-reboot");  // /run is a tmpfs
  auto rb = run({bin("npu-sim"), "reboot", "--root", tmp_ / "host", "--majors", "500,501,502,503,504"});
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  if (ascend::testing::test_backend() == "dcmi") {
    const std::string kernel_boot = slurp("/proc/sys/kernel/random/boot_id").substr(0, 36);
    std::string earlier = slurp("/proc/sys/kernel/random/uuid").substr(0, 36);
    ASSERT_EQ(earlier.size(), 36U);
    ASSERT_NE(earlier, kernel_boot);
    const std::string file = tmp_ / "host/run/ascend/dcmi-vnpu-owners.json";
    auto records = nlohmann::json::parse(slurp(file));
    ASSERT_EQ(records.size(), 2U) << records;
    for (auto& r : records) {
      ASSERT_EQ(r["owner"]["boot"], kernel_boot + ":") << "DCMI stamps the kernel's boot and no load id";
      r["owner"]["boot"] = earlier + ":";
    }
    spit(file + ".new", records.dump(1));
    std::filesystem::rename(file + ".new", file);
  }
  auto restored = now();
  ASSERT_EQ(restored.vnpus.size(), 3U) << "the driver restores its vNPUs at boot";
  EXPECT_EQ(std::count_if(restored.vnpus.begin(), restored.vnpus.end(),
                          [](const npu::Vnpu& v) { return v.dynamic(); }),
            2)
      << "with their owners";
  EXPECT_TRUE(present(tmp_ / ("host/dev/vdavinci" + std::to_string(restored.vnpus[0].id))));

  auto g = gc();
  EXPECT_EQ(g.exit_code, 0) << g.err;
  EXPECT_NE(g.out.find("vnpu gc: 2 destroyed, 0 kept, 1 static"), std::string::npos) << g.out;
  auto after = now();
  ASSERT_EQ(after.vnpus.size(), 1U);
  EXPECT_FALSE(after.vnpus[0].dynamic());
  EXPECT_EQ(after.vnpus[0].phy_id, 5);
  std::filesystem::rename(tmp_ / "runc-state-before-reboot", state_root());  // for TearDown's runc delete
}

TEST_F(Lifecycle, DevCharLinksForEveryInjectedNodeAndOnlyOursRemoved) {
  const std::string host = tmp_ / "host";
  // A link udev made before us, for a device that is not ours: it must survive everything.
  std::filesystem::create_directories(host + "/dev/char");
  ASSERT_EQ(::symlink("../null", (host + "/dev/char/1:3").c_str()), 0);

  std::string id = unique_id("links");
  ASSERT_EQ(create(bundle({"/bin/sleep", "1000"}, 4), id).exit_code, 0);
  const int vid = vnpu_of(id);
  ASSERT_GE(vid, 164);
  // The host's device numbers as the backend reports them (stat of the nodes for DCMI).
  const auto s = now();
  const npu::DeviceNode vnode = s.vnpu_node(vid);
  ASSERT_GT(vnode.major, 0) << "no /dev/vdavinci" << vid;
  auto control = [&](const std::string& path) {
    for (const auto& n : s.control_nodes()) {
      if (n.path == path) return n;
    }
    ADD_FAILURE() << "no " << path;
    return npu::DeviceNode{};
  };
  const npu::DeviceNode manager = control("/dev/davinci_manager");
  const npu::DeviceNode hdc = control("/dev/hisi_hdc");
  const npu::DeviceNode chip7 = s.chip_node(7);
  auto link = [&](int maj, int min) {
    return link_of(host + "/dev/char/" + std::to_string(maj) + ":" + std::to_string(min));
  };
  // The nodes the container got (spec: linux.devices) each have their link.
  auto spec = nlohmann::json::parse(slurp(tmp_ / "b0/config.json"));
  int checked = 0;
  for (const auto& d : spec["linux"]["devices"]) {
    const std::string path = d["path"];
    const int maj = d["major"];
    const int min = d["minor"];
    std::string host_node = maj == vnode.major ? "vdavinci" + std::to_string(min) : path.substr(5);
    EXPECT_EQ(link(maj, min), "../" + host_node) << path;
    ++checked;
  }
  EXPECT_EQ(checked, 4) << "the vNPU and the three control nodes";
  EXPECT_EQ(link(manager.major, manager.minor), "../davinci_manager");

  // The container dies unseen: gc destroys the vNPU and removes its link, the control nodes' stay.
  kill_init(id);
  ASSERT_EQ(gc().exit_code, 0);
  EXPECT_EQ(vnpu_of(id), -1);
  EXPECT_EQ(link(vnode.major, vnode.minor), "") << "the destroyed vNPU's link was left behind";
  EXPECT_EQ(link(hdc.major, hdc.minor), "../hisi_hdc");

  // ascend-ctk links the rest of the host's nodes (the 8 chips), once.
  auto mk = run({bin("ascend-ctk"), "--config", config_, "system", "create-dev-char-symlinks"});
  ASSERT_EQ(mk.exit_code, 0) << mk.err;
  EXPECT_NE(mk.out.find("linked /dev/char/" + std::to_string(chip7.major) + ":7 -> ../davinci7"),
            std::string::npos)
      << mk.out;
  EXPECT_EQ(std::count(mk.out.begin(), mk.out.end(), '\n'), 8) << mk.out;
  EXPECT_EQ(run({bin("ascend-ctk"), "--config", config_, "system", "create-dev-char-symlinks"}).out, "");

  // Uninstall's step: every link we made goes, udev's stays.
  auto rm = run({bin("ascend-ctk"), "--config", config_, "system", "remove-dev-char-symlinks"});
  ASSERT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_EQ(std::count(rm.out.begin(), rm.out.end(), '\n'), 8 + 3) << rm.out;
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(host + "/dev/char"))
    left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"1:3"});
}

TEST_F(Lifecycle, CtkHelpAndUsage) {
  for (const auto& argv : std::vector<std::vector<std::string>>{
           {"vnpu", "gc", "--help"}, {"system", "create-dev-char-symlinks", "--help"}}) {
    std::vector<std::string> a = {bin("ascend-ctk")};
    a.insert(a.end(), argv.begin(), argv.end());
    auto o = run(a);
    EXPECT_EQ(o.exit_code, 0);
    EXPECT_NE(o.out.find("Exit codes"), std::string::npos) << o.out;
  }
  EXPECT_EQ(run({bin("ascend-ctk"), "vnpu", "gc", "--bogus"}).exit_code, 2);
  EXPECT_EQ(run({bin("ascend-ctk"), "vnpu"}).exit_code, 2);
}

}  // namespace
}  // namespace ascend::hook
