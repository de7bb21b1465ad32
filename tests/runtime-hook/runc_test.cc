// End to end with real runc: a busybox-static bundle whose container runs a probe reporting its /dev, its
// mounts, the device cgroup's verdict and `npu-smi info`, started through ascend-docker-runtime (or with the
// bare hook registered in the spec). Root only.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <memory>
#include <regex>
#include <set>

#include "ascend/npu/emulator.h"
#include "runc_fixture.h"
#include "support.h"

namespace ascend::hook {
namespace {

INSTANTIATE_TEST_SUITE_P(Injection, RuncTest, ::testing::Values("spec", "hook"),
                         [](const auto& info) { return info.param; });

TEST_P(RuncTest, ContainerGetsExactlyTheRequestedChips) {
  struct Case {
    std::string visible;
    std::vector<int> ids;
  };
  const Case cases[] = {{"0", {0}},
                        {"0-3", {0, 1, 2, 3}},
                        {"all", {0, 1, 2, 3, 4, 5, 6, 7}},
                        {"Ascend910-3,npu-5", {3, 5}},
                        {"6,0-1,1", {0, 1, 6}}};
  for (const auto& c : cases) {
    SCOPED_TRACE("ASCEND_VISIBLE_DEVICES=" + c.visible);
    auto b = bundle({"ASCEND_VISIBLE_DEVICES=" + c.visible});
    auto o = run(*b, unique_id("set"));
    ASSERT_EQ(o.exit_code, 0) << o.err;
    Probe p = parse_probe(o.out);
    ASSERT_TRUE(p.started) << o.out << o.err;
    EXPECT_EQ(p.devices, expected_nodes(c.ids));
    for (int id : c.ids) {
      // ENXIO: the device cgroup let the open through to the (absent) driver.
      EXPECT_EQ(p.opens["/dev/davinci" + std::to_string(id)],
                "cat: can't open '/dev/davinci" + std::to_string(id) + "': No such device or address");
    }
    expect_base_mounts(p);
    EXPECT_NE(p.write_error.find("Read-only file system"), std::string::npos) << p.write_error;
    EXPECT_NE(std::find(p.env.begin(), p.env.end(), "ASCEND_DOCKER_RUNTIME=True"), p.env.end());
    EXPECT_EQ(smi_ids(p.smi), std::set<int>(c.ids.begin(), c.ids.end())) << o.out;
  }
}

TEST_P(RuncTest, TheLastOccurrenceOfTheVariableWins) {
  auto b = bundle({"ASCEND_VISIBLE_DEVICES=0", "ASCEND_VISIBLE_DEVICES=2"});
  auto o = run(*b, unique_id("last"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  Probe p = parse_probe(o.out);
  EXPECT_EQ(p.devices, expected_nodes({2}));
  EXPECT_EQ(smi_ids(p.smi), std::set<int>{2});
}

TEST_P(RuncTest, NodrvGivesDevicesWithoutDriverFiles) {
  auto b = bundle({"ASCEND_VISIBLE_DEVICES=1", "ASCEND_RUNTIME_OPTIONS=NODRV"});
  auto o = run(*b, unique_id("nodrv"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  Probe p = parse_probe(o.out);
  ASSERT_TRUE(p.started);
  EXPECT_EQ(p.devices, expected_nodes({1}));
  for (const char* m : kBaseMounts) EXPECT_EQ(p.mounts.count(m), 0U) << m;
  EXPECT_TRUE(p.smi.empty());
}

TEST_P(RuncTest, VirtualMapsAnExistingVnpu) {
  npu::Emulator emu(tmp_ / "host");
  auto v = emu.create_vnpu(2, "vir05_1c_16g", std::nullopt, {});
  ASSERT_TRUE(v.ok()) << v.error().message();
  auto b = bundle({"ASCEND_VISIBLE_DEVICES=" + std::to_string(v->id), "ASCEND_RUNTIME_OPTIONS=VIRTUAL"});
  auto o = run(*b, unique_id("virtual"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  Probe p = parse_probe(o.out);
  EXPECT_EQ(p.devices, expected_nodes({v->id}, true));
  EXPECT_EQ(smi_ids(p.smi), std::set<int>{2}) << o.out;  // the vNPU's row is its chip's
  EXPECT_EQ(now().vnpus.size(), 1U);                     // a static vNPU outlives the container
  ASSERT_TRUE(emu.destroy_vnpu(v->id, std::nullopt, std::nullopt).ok());
}

TEST_P(RuncTest, DynamicVnpuIsCreatedForTheContainerAndDestroyedAfter) {
  auto b = bundle({"ASCEND_VISIBLE_DEVICES=3", "ASCEND_VNPU_SPECS=vir05_1c_16g"});
  auto o = run(*b, unique_id("vnpu"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  Probe p = parse_probe(o.out);
  ASSERT_TRUE(p.started);
  int vid = -1;
  for (const auto& e : p.env) {
    if (e.rfind("ASCEND_VISIBLE_DEVICES=", 0) == 0) vid = std::stoi(e.substr(23));
  }
  EXPECT_GE(vid, 100 + 16 * 3);
  EXPECT_LE(vid, 100 + 16 * 3 + 15);
  EXPECT_NE(std::find(p.env.begin(), p.env.end(), "ASCEND_RUNTIME_OPTIONS=VIRTUAL"), p.env.end());
  EXPECT_EQ(p.devices, expected_nodes({vid}, true));
  EXPECT_EQ(smi_ids(p.smi), std::set<int>{3}) << o.out;
  EXPECT_TRUE(now().vnpus.empty()) << "the poststop hook did not destroy the vNPU";
  struct stat st {};
  EXPECT_NE(::lstat((tmp_ / ("host/dev/vdavinci" + std::to_string(vid))).c_str(), &st), 0);
}

TEST_P(RuncTest, DynamicVnpuIsDestroyedWhenTheContainerFailsToStart) {
  auto b = bundle({"ASCEND_VISIBLE_DEVICES=3", "ASCEND_VNPU_SPECS=vir05_1c_16g"});
  spit(b->rootfs() + "/usr", "a file where the driver folders must go\n");
  auto o = run(*b, unique_id("vnpufail"));
  EXPECT_NE(o.exit_code, 0);
  EXPECT_FALSE(parse_probe(o.out).started);
  // The hook fails to mount, or runc fails to make the mount point under the file /usr.
  EXPECT_NE(o.err.find(by_hook() ? "ascend-docker-hook" : "/usr/local"), std::string::npos) << o.err;
  EXPECT_TRUE(now().vnpus.empty()) << "a failed container left its vNPU behind";
}

TEST_F(RuncFixture, NoRequestKeepsTheSpecByteForByte) {
  const std::vector<std::vector<std::string>> envs = {
      {},
      {"ASCEND_VISIBLE_DEVICES=void"},
      {"ASCEND_VISIBLE_DEVICES=none"},
      {"ASCEND_VISIBLE_DEVICES="},
      {"ASCEND_RUNTIME_OPTIONS=NODRV", "ASCEND_VNPU_SPECS=vir05_1c_16g"}};
  for (const auto& env : envs) {
    SCOPED_TRACE(env.empty() ? "(no ASCEND_ variable)" : env[0]);
    auto b = bundle(env);
    spit(b->config_path(), b->spec().dump());  // compact, as engines write it
    std::string before = slurp(b->config_path());
    std::string id = unique_id("plain");
    auto o = runner_.create(shim(), *b, id);
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(slurp(b->config_path()), before);
    runner_.remove(id);
  }
  // Nothing to log for a container that asks for nothing: the shim does not even set its log up.
  EXPECT_NE(::access((tmp_ / "log/ascend.log").c_str(), F_OK), 0);
  auto b = bundle({});
  auto o = run(*b, unique_id("plainrun"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  Probe p = parse_probe(o.out);
  ASSERT_TRUE(p.started);
  EXPECT_TRUE(p.devices.empty());
  EXPECT_TRUE(p.env.empty());
  for (const char* m : kBaseMounts) EXPECT_EQ(p.mounts.count(m), 0U) << m;
}

TEST_P(RuncTest, EveryBadRequestStopsTheContainerWithOneClearLine) {
  struct Case {
    std::vector<std::string> env;
    std::vector<std::string> want;
    bool image_symlink = false;
  };
  const Case cases[] = {
      {{"ASCEND_VISIBLE_DEVICES=8"}, {"ASCEND_VISIBLE_DEVICES=8", "no device 8", "valid ids: 0-7"}},
      {{"ASCEND_VISIBLE_DEVICES=3-1"}, {"ASCEND_VISIBLE_DEVICES=3-1", "reversed range"}},
      {{"ASCEND_VISIBLE_DEVICES=abc"}, {"ASCEND_VISIBLE_DEVICES=abc", "'abc'"}},
      {{"ASCEND_VISIBLE_DEVICES=Ascend310P-1"}, {"Ascend310P-1", "Ascend910-N"}},
      {{"ASCEND_VISIBLE_DEVICES=0", "ASCEND_RUNTIME_OPTIONS=FOO"},
       {"ASCEND_RUNTIME_OPTIONS=FOO", "NODRV, VIRTUAL"}},
      {{"ASCEND_VISIBLE_DEVICES=0", "ASCEND_RUNTIME_MOUNTS=nosuch"}, {"mount list 'nosuch' not found"}},
      {{"ASCEND_VISIBLE_DEVICES=0", "ASCEND_RUNTIME_MOUNTS=../base"},
       {"ASCEND_RUNTIME_MOUNTS", "not a mount-list name"}},
      {{"ASCEND_VISIBLE_DEVICES=0", "ASCEND_ALLOW_LINK=maybe"}, {"ASCEND_ALLOW_LINK=maybe"}},
      {{"ASCEND_VISIBLE_DEVICES=0", "ASCEND_VNPU_SPECS=vir99"},
       {"ASCEND_VNPU_SPECS=vir99", "unknown vNPU template"}},
      {{"ASCEND_VISIBLE_DEVICES=0,1", "ASCEND_VNPU_SPECS=vir05_1c_16g"}, {"exactly one"}},
      {{"ASCEND_VISIBLE_DEVICES=105", "ASCEND_RUNTIME_OPTIONS=VIRTUAL"}, {"no vNPU 105"}},
      {{"ASCEND_VISIBLE_DEVICES=0", "ASCEND_RUNTIME_MOUNTS=links"},
       {"/etc/ascend-link.conf is a symbolic link on the host"}},
      {{"ASCEND_VISIBLE_DEVICES=0"}, {"/usr/local/bin/npu-smi is a symbolic link in the image"}, true},
  };
  for (const auto& c : cases) {
    // With spec mounts, runc resolves a symlink in the image inside the rootfs and mounts there (tested
    // below).
    if (c.image_symlink && !by_hook()) continue;
    SCOPED_TRACE(c.env.back());
    auto b = bundle(c.env);
    if (c.image_symlink) {
      ::mkdir((b->rootfs() + "/usr").c_str(), 0755);
      ::mkdir((b->rootfs() + "/usr/local").c_str(), 0755);
      ::mkdir((b->rootfs() + "/usr/local/bin").c_str(), 0755);
      ASSERT_EQ(::symlink("/bin/busybox", (b->rootfs() + "/usr/local/bin/npu-smi").c_str()), 0);
    }
    std::string id = unique_id("bad");
    auto o = run(*b, id);
    EXPECT_NE(o.exit_code, 0);
    EXPECT_FALSE(parse_probe(o.out).started) << o.out;
    for (const auto& w : c.want) EXPECT_NE(o.err.find(w), std::string::npos) << o.err;
    EXPECT_NE(runner_.runc({"state", id}).exit_code, 0);
    EXPECT_TRUE(now().vnpus.empty());
  }
}

TEST_P(RuncTest, HostSymlinksNeedAllowLinkAndMissingEntriesAreSkipped) {
  auto b = bundle(
      {"ASCEND_VISIBLE_DEVICES=0", "ASCEND_RUNTIME_MOUNTS=base,links,sparse", "ASCEND_ALLOW_LINK=True"});
  auto o = run(*b, unique_id("links"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  Probe p = parse_probe(o.out);
  ASSERT_TRUE(p.started);
  expect_base_mounts(p);
  EXPECT_EQ(p.mounts.count("/etc/ascend-link.conf"), 1U);
  EXPECT_EQ(p.mounts.count("/opt/not-on-this-host"), 0U);
  EXPECT_NE(slurp(tmp_ / "log/ascend.log").find("/opt/not-on-this-host is not on the host"),
            std::string::npos);
}

TEST_P(RuncTest, ASymlinkInTheImageCannotRedirectMountsOntoTheHost) {
  // The image's /usr points at a host folder through "..": the hook resolves it inside the rootfs.
  std::string escape = tmp_ / "escape";
  ::mkdir(escape.c_str(), 0755);
  auto b = bundle({"ASCEND_VISIBLE_DEVICES=0"});
  std::string inside = b->rootfs() + escape;
  ASSERT_EQ(testing::run({"mkdir", "-p", inside}).exit_code, 0);
  ASSERT_EQ(::symlink(("../../../../../../../.." + escape).c_str(), (b->rootfs() + "/usr").c_str()), 0);
  auto o = run(*b, unique_id("escape"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  Probe p = parse_probe(o.out);
  EXPECT_EQ(p.mounts.count(escape + "/local/dcmi"), 1U) << o.out;  // the container's view of its own folder
  EXPECT_EQ(smi_ids(p.smi), std::set<int>{0});
  struct stat st {};
  EXPECT_NE(::lstat((escape + "/local").c_str(), &st), 0) << "the hook wrote into the host folder";
}

TEST_P(RuncTest, TheSpecSaysHowTheDriverFilesGetIn) {
  auto b = bundle({"ASCEND_VISIBLE_DEVICES=0", "ASCEND_RUNTIME_MOUNTS=base,links", "ASCEND_ALLOW_LINK=True"});
  std::string id = unique_id("spec");
  auto o = runner_.create(shim(), *b, id);
  ASSERT_EQ(o.exit_code, 0) << o.err;
  auto spec = nlohmann::json::parse(slurp(b->config_path()));
  runner_.remove(id);
  std::map<std::string, nlohmann::json> binds;
  for (const auto& m : spec["mounts"]) {
    if (m.value("type", "") == "bind") binds[m["destination"].get<std::string>()] = m;
  }
  if (by_hook()) {
    ASSERT_EQ(spec["hooks"]["prestart"].size(), 1U) << spec.dump(2);
    EXPECT_EQ(spec["hooks"]["prestart"][0]["path"], bin("ascend-docker-hook"));
    EXPECT_TRUE(binds.empty()) << spec.dump(2);
    return;
  }
  EXPECT_FALSE(spec.contains("hooks")) << "spec injection needs no hook: " << spec.dump(2);
  for (const char* m : kBaseMounts) {
    ASSERT_EQ(binds.count(m), 1U) << m;
    EXPECT_EQ(binds[m]["source"], (tmp_ / "host") + m);
    EXPECT_EQ(binds[m]["options"], nlohmann::json({"bind", "ro", "nosuid", "nodev"}));
  }
  // A host symlink (allowed here) is bound from the file it names, so runc never follows a link on the host.
  ASSERT_EQ(binds.count("/etc/ascend-link.conf"), 1U);
  EXPECT_EQ(binds["/etc/ascend-link.conf"]["source"], (tmp_ / "host") + "/etc/hccn.conf");
}

TEST_F(RuncFixture, AHookAlsoRegisteredLeavesTheSpecsMountsToTheRuntime) {
  auto b = bundle({"ASCEND_VISIBLE_DEVICES=2"});
  b->spec()["hooks"]["prestart"] = {{{"path", bin("ascend-docker-hook")},
                                     {"args", {"ascend-docker-hook", "--config", config_}},
                                     {"env", {"PATH=/usr/bin:/bin"}}}};
  b->save();
  auto o = run(*b, unique_id("both"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  Probe p = parse_probe(o.out);
  EXPECT_EQ(p.devices, expected_nodes({2}));
  expect_base_mounts(p);
  EXPECT_EQ(smi_ids(p.smi), std::set<int>{2});
  EXPECT_NE(slurp(tmp_ / "log/ascend.log").find("0 mounts attached"), std::string::npos)
      << "the hook mounted the driver files a second time";
}

TEST_F(RuncHookModeTest, AUsersOwnVolumeAtADriverPathIsStillCoveredByTheDriver) {
  // Only the shim's own spec mounts (its exact options) tell the hook to leave a path to runc.
  std::string volume = tmp_ / "user-volume";
  ::mkdir(volume.c_str(), 0755);
  auto b = bundle({"ASCEND_VISIBLE_DEVICES=0"});
  b->spec()["mounts"].push_back({{"destination", "/usr/local/dcmi"},
                                 {"type", "bind"},
                                 {"source", volume},
                                 {"options", {"rbind", "ro"}}});
  b->save();
  auto o = run(*b, unique_id("volume"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  expect_base_mounts(parse_probe(o.out));
  EXPECT_NE(slurp(tmp_ / "log/ascend.log").find("7 mounts attached"), std::string::npos)
      << "the hook left a driver path to the user's volume";
}

TEST_F(RuncFixture, BareHookRegisteredInTheSpecCreatesNodesAndCgroupRules) {
  auto b = bundle({"ASCEND_VISIBLE_DEVICES=1,3"});
  b->spec()["hooks"]["prestart"] = {{{"path", bin("ascend-docker-hook")},
                                     {"args", {"ascend-docker-hook", "--config", config_}},
                                     {"env", {"PATH=/usr/bin:/bin"}}}};
  b->save();
  auto o = runner_.run({"runc"}, *b, unique_id("bare"));
  bool v1 = ::access("/sys/fs/cgroup/devices/devices.allow", F_OK) == 0;
  if (!v1) {
    EXPECT_NE(o.exit_code, 0);
    EXPECT_NE(o.err.find("cgroup v2"), std::string::npos) << o.err;
    return;
  }
  ASSERT_EQ(o.exit_code, 0) << o.err;
  Probe p = parse_probe(o.out);
  EXPECT_EQ(p.devices, expected_nodes({1, 3}));
  for (int id : {1, 3}) {
    EXPECT_EQ(p.opens["/dev/davinci" + std::to_string(id)],
              "cat: can't open '/dev/davinci" + std::to_string(id) + "': No such device or address");
  }
  expect_base_mounts(p);
  EXPECT_EQ(smi_ids(p.smi), (std::set<int>{1, 3}));
}

TEST_F(RuncHookModeTest, TheHookDoesNotInheritTheContainersEnvironment) {
  // CVE-2025-23266: a hook that inherits LD_PRELOAD from the image runs the image's code as root. The canary
  // library creates a file when loaded; the container asks for it, the hook must not load it.
  std::string canary = ASCEND_CANARY_LIB;
  ::unlink(ASCEND_CANARY_FILE);
  ASSERT_EQ(testing::run({"env", "LD_PRELOAD=" + canary, "/bin/true"}).exit_code, 0);
  ASSERT_EQ(::access(ASCEND_CANARY_FILE, F_OK), 0) << "the canary does not work, so this test proves nothing";
  ::unlink(ASCEND_CANARY_FILE);
  auto b = bundle({"ASCEND_VISIBLE_DEVICES=0", "LD_PRELOAD=" + canary, "LD_LIBRARY_PATH=/tmp"});
  auto o = run(*b, unique_id("preload"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(::access(ASCEND_CANARY_FILE, F_OK), 0) << "the hook loaded the container's LD_PRELOAD";
  ::unlink(ASCEND_CANARY_FILE);
}

TEST_F(RuncFixture, AFailureIsOneLineOnStderrAndNothingOnStdout) {
  // The engine reads the runtime's stdout for some verbs: a failure must not write there.
  auto o = testing::run({bin("ascend-docker-runtime"), "--config", tmp_ / "missing.yaml", "state", "x"});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_EQ(o.out, "");
  EXPECT_NE(o.err.find("missing.yaml"), std::string::npos) << o.err;
  auto b = bundle({"ASCEND_VISIBLE_DEVICES=9"});
  auto bad = run(*b, unique_id("stdout"));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.out, "");
  EXPECT_NE(bad.err.find("no device 9"), std::string::npos) << bad.err;
  EXPECT_NE(slurp(tmp_ / "log/ascend.log").find("no device 9"), std::string::npos);  // and in the log
}

TEST_F(RuncFixture, OtherVerbsPassThroughToRunc) {
  auto b = bundle({"ASCEND_VISIBLE_DEVICES=0"});
  std::string id = unique_id("verbs");
  auto created = runner_.create(shim(), *b, id);
  ASSERT_EQ(created.exit_code, 0) << created.err;
  std::vector<std::string> state = shim();
  state.insert(state.end(), {"--root", tmp_ / "runc-state", "state", id});
  auto via_shim = testing::run(state);
  auto direct = runner_.runc({"state", id});
  ASSERT_EQ(via_shim.exit_code, 0) << via_shim.err;
  EXPECT_EQ(via_shim.out, direct.out);
  EXPECT_NE(via_shim.out.find("\"status\": \"created\""), std::string::npos) << via_shim.out;
  runner_.remove(id);
  auto version = testing::run({bin("ascend-docker-runtime"), "--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_NE(version.out.find("runc version"), std::string::npos) << version.out;
}

TEST_F(RuncFixture, CtkWritesACdiSpecOfThisHostAndADockerRuntimeEntry) {
  std::string out = tmp_ / "cdi/huawei.com-npu.json";
  auto gen = testing::run({bin("ascend-ctk"), "--config", config_, "cdi", "generate", "--output", out});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  auto valid = testing::run({bin("ascend-ctk"), "cdi", "validate", out});
  EXPECT_EQ(valid.exit_code, 0) << valid.err;
  auto spec = nlohmann::json::parse(slurp(out));
  ASSERT_EQ(spec["devices"].size(), state_.chips.size() + 1);
  // Every node the spec names is the host's node, with its major and minor.
  for (const auto& d : spec["devices"]) {
    for (const auto& n : d["containerEdits"]["deviceNodes"]) {
      struct stat st {};
      ASSERT_EQ(::stat(n["hostPath"].get<std::string>().c_str(), &st), 0) << n.dump();
      EXPECT_TRUE(S_ISCHR(st.st_mode));
      EXPECT_EQ(static_cast<int>(major(st.st_rdev)), n["major"].get<int>());
      EXPECT_EQ(static_cast<int>(minor(st.st_rdev)), n["minor"].get<int>());
    }
  }
  ASSERT_EQ(spec["containerEdits"]["mounts"].size(), std::size(kBaseMounts));
  for (const auto& m : spec["containerEdits"]["mounts"]) {
    EXPECT_EQ(::access(m["hostPath"].get<std::string>().c_str(), F_OK), 0) << m.dump();
    EXPECT_EQ(m["hostPath"].get<std::string>(), (tmp_ / "host") + m["containerPath"].get<std::string>());
  }
  auto list = testing::run({bin("ascend-ctk"), "--config", config_, "cdi", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(list.out.rfind("huawei.com/npu=0\n", 0), 0U) << list.out;
  EXPECT_NE(list.out.find("huawei.com/npu=all\n"), std::string::npos) << list.out;

  spit(tmp_ / "daemon.json", R"({"log-level":"warn"})");
  auto conf = testing::run({bin("ascend-ctk"), "runtime", "configure", "--runtime", "docker", "--file",
                            tmp_ / "daemon.json", "--set-as-default"});
  ASSERT_EQ(conf.exit_code, 0) << conf.err;
  auto daemon = nlohmann::json::parse(slurp(tmp_ / "daemon.json"));
  EXPECT_EQ(daemon["log-level"], "warn");
  EXPECT_EQ(daemon["default-runtime"], "ascend");
  EXPECT_EQ(daemon["runtimes"]["ascend"]["path"], bin("ascend-docker-runtime"));
  auto bad = testing::run({bin("ascend-ctk"), "runtime", "configure", "--runtime", "podman"});
  EXPECT_EQ(bad.exit_code, 2);
}

}  // namespace
}  // namespace ascend::hook
