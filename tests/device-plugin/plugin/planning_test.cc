// The plugin's pure planning: configuration, resource and device naming, health mapping, Allocate in each
// mode, dynamic vNPU accounting, GetPreferredAllocation against the node-level allocator.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>

#include <yaml-cpp/yaml.h>

#include "ascend/npu/driver_files.h"
#include "ascend/npu/emulator.h"
#include "ascend/npu/profiles.h"
#include "ascend/plugin/allocate.h"
#include "ascend/plugin/config.h"
#include "ascend/plugin/inventory.h"
#include "ascend/plugin/ledger.h"
#include "ascend/plugin/options.h"
#include "ascend/plugin/preferred.h"
#include "ascend/topology/choose.h"
#include "test_dir.h"

namespace ascend::plugin {
namespace {

npu::HostState profile(const char* name) {
  auto p = npu::builtin_profile(name);
  EXPECT_TRUE(p.ok()) << name;
  npu::HostState s = *p;
  s.majors = {240, 241, 242, 243, 244};
  return s;
}

std::vector<std::string> ids_of(const std::vector<DeviceEntry>& v) {
  std::vector<std::string> out;
  for (const auto& e : v) out.push_back(e.id);
  return out;
}

std::vector<DeviceEntry> advertised(const npu::HostState& s, const ResourceSpec& r, const Ledger& l) {
  std::vector<DeviceEntry> out;
  for (auto& e : device_table(s, r, l)) {
    if (e.withheld.empty()) out.push_back(e);
  }
  return out;
}

void add_vnpu(npu::HostState& s, int phy, const std::string& tmpl) {
  auto v = npu::plan_vnpu(s, phy, tmpl, std::nullopt);
  ASSERT_TRUE(v.ok()) << v.error().message();
  s.vnpus.push_back(*v);
}

// ---- configuration -------------------------------------------------------------------------------------

TEST(PluginConfig, ModesParseAndRejectGarbage) {
  EXPECT_EQ(*parse_allocate_mode("runtime"), AllocateMode::kRuntime);
  EXPECT_EQ(*parse_allocate_mode("device-spec"), AllocateMode::kDeviceSpec);
  EXPECT_EQ(*parse_allocate_mode("cdi"), AllocateMode::kCdi);
  EXPECT_FALSE(parse_allocate_mode("Runtime").ok());
  EXPECT_EQ(*parse_vnpu_mode("off"), VnpuMode::kOff);
  EXPECT_EQ(*parse_vnpu_mode("static"), VnpuMode::kStatic);
  EXPECT_EQ(*parse_vnpu_mode("dynamic"), VnpuMode::kDynamic);
  auto bad = parse_vnpu_mode("on");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("off, static, dynamic"), std::string::npos);
}

TEST(PluginConfig, YamlFileKeysAreTheFlagsAndTheCommandLineWins) {
  testing::TempDir dir;
  {
    std::ofstream f(dir / "c.yaml");
    f << "kubelet-socket-dir: /run/dp\nallocate-mode: device-spec\nvnpu: static\nmetrics-addr: ':9400'\n"
         "host-root: /from/file\nhealth-interval: 250\nvnpu-gc-interval: 0\nranktable-group: 1000\n";
  }
  auto c = parse_options({"--config", dir / "c.yaml"});
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->kubelet_socket_dir, "/run/dp");
  EXPECT_EQ(c->allocate_mode, AllocateMode::kDeviceSpec);
  EXPECT_EQ(c->vnpu, VnpuMode::kStatic);
  EXPECT_EQ(c->metrics_addr, ":9400");
  EXPECT_EQ(c->host_root, "/from/file");
  EXPECT_EQ(c->health_interval, std::chrono::milliseconds(250));
  EXPECT_EQ(c->vnpu_gc_interval, std::chrono::seconds(0));
  EXPECT_EQ(c->ranktable_group, 1000);
  EXPECT_EQ(c->log_level, "info") << "a key the file does not name keeps its default";

  // Flags on the command line win over the file, before or after --config.
  auto f = parse_options(
      {"--host-root", "/from/flag", "--config", dir / "c.yaml", "--vnpu", "off", "--health-interval", "40"});
  ASSERT_TRUE(f.ok()) << f.error().message();
  EXPECT_EQ(f->host_root, "/from/flag");
  EXPECT_EQ(f->vnpu, VnpuMode::kOff);
  EXPECT_EQ(f->health_interval, std::chrono::milliseconds(40));
  EXPECT_EQ(f->kubelet_socket_dir, "/run/dp");

  // No file: the defaults of config.h.
  auto d = parse_options({});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->kubelet_socket_dir, kDefaultSocketDir);
  EXPECT_EQ(d->allocate_mode, AllocateMode::kRuntime);
  EXPECT_EQ(d->health_interval, std::chrono::milliseconds(500));
  EXPECT_EQ(d->vnpu_gc_interval, std::chrono::seconds(60));
  EXPECT_EQ(d->ranktable_group, -1) << "the plugin's own group";
}

TEST(PluginConfig, ABadFileOrKeyOrValueIsOneLineNamingIt) {
  testing::TempDir dir;
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return std::string(dir / name);
  };
  struct Case {
    std::string text;
    std::vector<std::string> says;  // each must be in the message
  };
  const Case cases[] = {
      {"kubelet-socket-dir: /run/dp\nallocate_mode: cdi\n",
       {"config file ", "c.yaml", "unknown key 'allocate_mode'", "allocate-mode", "vnpu-gc-interval"}},
      {"config: other.yaml\n", {"unknown key 'config'"}},
      {"allocate-mode: magic\n",
       {"allocate-mode", "unknown allocate mode 'magic'", "runtime, device-spec, cdi"}},
      {"vnpu: on\n", {"vnpu", "off, static, dynamic"}},
      {"health-interval: 5\n", {"health-interval", "5"}},
      {"health-interval: soon\n", {"health-interval", "soon"}},
      {"ranktable-group: -1\n", {"ranktable-group", "-1"}},
      {"ranktable-group: wheel\n", {"ranktable-group", "wheel"}},
      {"host-root: [a, b]\n", {"c.yaml", "'host-root' must be a string"}},
      {"- a\n- b\n", {"c.yaml", "expected a mapping"}},
      {"key: [unclosed\n", {"c.yaml"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    auto r = parse_options({"--config", write("c.yaml", c.text)});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), EINVAL);
    const std::string m = r.error().message();
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    for (const auto& s : c.says) EXPECT_NE(m.find(s), std::string::npos) << "'" << s << "' not in: " << m;
  }
  auto missing = parse_options({"--config", dir / "missing.yaml"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), ENOENT);
  EXPECT_NE(missing.error().message().find("missing.yaml"), std::string::npos) << missing.error().message();
  auto flag = parse_options({"--allocate-mode", "magic"});
  ASSERT_FALSE(flag.ok());
  EXPECT_NE(flag.error().message().find("unknown allocate mode 'magic'"), std::string::npos);
  EXPECT_FALSE(parse_options({"--no-such-flag"}).ok());
}

TEST(PluginConfig, TheShippedDaemonSetConfigLoads) {
  // deploy/kubernetes/ascend-device-plugin.yaml carries the plugin's config in a ConfigMap.
  YAML::Node cm;
  for (const auto& doc : YAML::LoadAllFromFile(std::string(ASCEND_SOURCE_DIR) +
                                               "/deploy/kubernetes/ascend-device-plugin.yaml")) {
    if (doc["kind"].as<std::string>() == "ConfigMap") cm = doc;
  }
  ASSERT_TRUE(cm) << "no ConfigMap in the manifest";
  testing::TempDir dir;
  {
    std::ofstream f(dir / "config.yaml");
    f << cm["data"]["config.yaml"].as<std::string>();
  }
  auto c = parse_options({"--config", dir / "config.yaml"});
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_TRUE(validate(*c).ok());
  EXPECT_EQ(c->kubelet_socket_dir, kDefaultSocketDir);
  EXPECT_TRUE(c->metrics_addr.empty()) << "the DaemonSet's command line gives it: $(POD_IP):9101";
  EXPECT_EQ(c->vnpu, VnpuMode::kOff);
}

TEST(PluginConfig, ValidateRefusesCombinationsThatCannotWork) {
  struct Case {
    AllocateMode mode;
    VnpuMode vnpu;
    std::string resource;
    bool ok;
  };
  const Case cases[] = {
      {AllocateMode::kRuntime, VnpuMode::kDynamic, "", true},
      {AllocateMode::kDeviceSpec, VnpuMode::kDynamic, "", false},
      {AllocateMode::kCdi, VnpuMode::kDynamic, "", false},
      {AllocateMode::kCdi, VnpuMode::kStatic, "", false},
      {AllocateMode::kDeviceSpec, VnpuMode::kStatic, "", true},
      {AllocateMode::kCdi, VnpuMode::kOff, "example.com/npu", true},
      {AllocateMode::kRuntime, VnpuMode::kOff, "npu", false},
      {AllocateMode::kRuntime, VnpuMode::kOff, "a/b/c", false},
  };
  for (const auto& c : cases) {
    Config cfg;
    cfg.allocate_mode = c.mode;
    cfg.vnpu = c.vnpu;
    cfg.resource_name = c.resource;
    EXPECT_EQ(validate(cfg).ok(), c.ok) << to_string(c.mode) << " " << to_string(c.vnpu) << " " << c.resource;
  }
  Config rel;
  rel.kubelet_socket_dir = "relative/dir";
  EXPECT_FALSE(validate(rel).ok());
}

// ---- naming --------------------------------------------------------------------------------------------

TEST(PluginNaming, VnpuResourceSuffixFollowsAscendNames) {
  const std::pair<const char*, const char*> cases[] = {
      {"vir10_3c_32g", "10c.3cpu.32g"},
      {"vir05_1c_16g", "5c.1cpu.16g"},
      {"vir02", "2c"},
      {"vir02_1c", "2c.1cpu"},
      {"vir04_3c_ndvpp", "4c.3cpu.ndvpp"},
      {"vir16", "16c"},
      {"vir10_4c_16g_m", "10c.4cpu.16g.m"},
      {"vir12_3c_32g", "12c.3cpu.32g"},
  };
  for (const auto& [in, out] : cases) {
    auto r = vnpu_resource_suffix(in);
    ASSERT_TRUE(r.ok()) << in;
    EXPECT_EQ(*r, out) << in;
  }
  for (const char* bad : {"virx", "v10", "vir10__3c", ""})
    EXPECT_FALSE(vnpu_resource_suffix(bad).ok()) << bad;
}

TEST(PluginNaming, ResourcesPerModeAndSocketNames) {
  Config cfg;
  auto a2 = profile("atlas800t-a2");
  auto off = plan_resources(a2, cfg);
  ASSERT_TRUE(off.ok());
  ASSERT_EQ(off->size(), 1U);
  EXPECT_EQ((*off)[0].name, "huawei.com/Ascend910");
  EXPECT_EQ((*off)[0].socket_name(), "ascend-Ascend910.sock");

  cfg.vnpu = VnpuMode::kStatic;
  auto st = plan_resources(a2, cfg);
  ASSERT_TRUE(st.ok());
  std::vector<std::string> names;
  for (const auto& r : *st) names.push_back(r.name);
  EXPECT_EQ(names, (std::vector<std::string>{"huawei.com/Ascend910", "huawei.com/Ascend910-10c.3cpu.32g",
                                             "huawei.com/Ascend910-5c.1cpu.16g"}));
  EXPECT_EQ((*st)[1].template_name, "vir10_3c_32g");
  EXPECT_EQ((*st)[1].socket_name(), "ascend-Ascend910-10c.3cpu.32g.sock");

  auto duo = plan_resources(profile("atlas300i-duo"), cfg);
  ASSERT_TRUE(duo.ok());
  EXPECT_EQ((*duo)[0].name, "huawei.com/Ascend310P");
  EXPECT_EQ((*duo)[2].name, "huawei.com/Ascend310P-2c");

  cfg.vnpu = VnpuMode::kDynamic;
  cfg.resource_name = "example.com/npu";
  auto dyn = plan_resources(a2, cfg);
  ASSERT_TRUE(dyn.ok());
  ASSERT_EQ(dyn->size(), 2U);
  EXPECT_EQ((*dyn)[0].name, "example.com/npu");
  EXPECT_EQ((*dyn)[1].name, "huawei.com/npu-core");
  EXPECT_EQ((*dyn)[1].kind, DeviceKind::kCore);
}

// ---- devices and health --------------------------------------------------------------------------------

TEST(PluginDevices, ChipIdsNumaAndHealthMapping) {
  auto s = profile("atlas800t-a2");
  ResourceSpec chips{"huawei.com/Ascend910", DeviceKind::kChip, ""};
  struct Case {
    npu::Health severity;
    bool healthy;
  };
  const Case cases[] = {
      {npu::Health::kWarning, true}, {npu::Health::kAlarm, false}, {npu::Health::kCritical, false}};
  for (const auto& c : cases) {
    auto t = s;
    t.chip(3)->faults.push_back({0x80E01801, c.severity});
    auto devs = device_table(t, chips, Ledger{});
    ASSERT_EQ(devs.size(), 8U);
    EXPECT_EQ(devs[3].id, "Ascend910-3");
    EXPECT_EQ(is_healthy(devs[3].health), c.healthy) << npu::to_string(c.severity);
    EXPECT_TRUE(is_healthy(devs[2].health));
  }
  auto devs = device_table(s, chips, Ledger{});
  EXPECT_EQ(ids_of(devs),
            (std::vector<std::string>{"Ascend910-0", "Ascend910-1", "Ascend910-2", "Ascend910-3",
                                      "Ascend910-4", "Ascend910-5", "Ascend910-6", "Ascend910-7"}));
  // NUMA nodes of the Atlas 800T A2 profile: chips 0,1 -> 6; 2,3 -> 4; 4,5 -> 0; 6,7 -> 2.
  std::vector<int> numa;
  for (const auto& d : devs) numa.push_back(d.numa);
  EXPECT_EQ(numa, (std::vector<int>{6, 6, 4, 4, 0, 0, 2, 2}));
}

TEST(PluginDevices, StaticVnpusAreTheirOwnResourceAndHideTheirChip) {
  auto s = profile("atlas800t-a2");
  add_vnpu(s, 0, "vir10_3c_32g");
  add_vnpu(s, 0, "vir05_1c_16g");
  add_vnpu(s, 5, "vir10_3c_32g");
  ResourceSpec chips{"huawei.com/Ascend910", DeviceKind::kChip, ""};
  ResourceSpec v10{"huawei.com/Ascend910-10c.3cpu.32g", DeviceKind::kVnpu, "vir10_3c_32g"};
  ResourceSpec v5{"huawei.com/Ascend910-5c.1cpu.16g", DeviceKind::kVnpu, "vir05_1c_16g"};
  EXPECT_EQ(ids_of(advertised(s, chips, Ledger{})),
            (std::vector<std::string>{"Ascend910-1", "Ascend910-2", "Ascend910-3", "Ascend910-4",
                                      "Ascend910-6", "Ascend910-7"}));
  EXPECT_EQ(ids_of(advertised(s, v10, Ledger{})),
            (std::vector<std::string>{"Ascend910-10c.3cpu.32g-100-0", "Ascend910-10c.3cpu.32g-180-5"}));
  EXPECT_EQ(ids_of(advertised(s, v5, Ledger{})), (std::vector<std::string>{"Ascend910-5c.1cpu.16g-101-0"}));
  s.chip(5)->faults.push_back({0x81000001, npu::Health::kCritical});
  auto v = device_table(s, v10, Ledger{});
  EXPECT_FALSE(is_healthy(v[1].health)) << "a vNPU is as healthy as its chip";
}

// ---- Allocate ------------------------------------------------------------------------------------------

class PluginAllocate : public ::testing::Test {
 protected:
  npu::HostState a2 = profile("atlas800t-a2");
  npu::Emulator paths{"/srv/host"};  // host_path and driver_files only; nothing is loaded
  ResourceSpec chips{"huawei.com/Ascend910", DeviceKind::kChip, ""};
  Ledger ledger;

  Result<std::vector<ContainerAllocation>> run(const Config& cfg, const ResourceSpec& res,
                                               const std::vector<std::vector<std::string>>& req) {
    return allocate(a2, paths, cfg, res, ledger, req, Clock::now());
  }
};

TEST_F(PluginAllocate, RuntimeModeEnvsAndMarkerMounts) {
  auto r = run(Config{}, chips, {{"Ascend910-3", "Ascend910-1"}});
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->size(), 1U);
  const auto& a = (*r)[0];
  EXPECT_EQ(a.envs, (std::map<std::string, std::string>{{"ASCEND_VISIBLE_DEVICES", "1,3"}}));
  EXPECT_EQ(a.mounts, (std::vector<MountSpec>{{"/var/run/ascend-container-devices/1", "/dev/null", true},
                                              {"/var/run/ascend-container-devices/3", "/dev/null", true}}));
  EXPECT_TRUE(a.devices.empty());
  EXPECT_TRUE(a.cdi_devices.empty());
}

TEST_F(PluginAllocate, DeviceSpecModeGivesNodesAndDriverMountsAtHostPaths) {
  Config cfg;
  cfg.allocate_mode = AllocateMode::kDeviceSpec;
  auto r = run(cfg, chips, {{"Ascend910-2"}});
  ASSERT_TRUE(r.ok()) << r.error().message();
  const auto& a = (*r)[0];
  EXPECT_TRUE(a.envs.empty());
  EXPECT_EQ(a.devices,
            (std::vector<DeviceNodeSpec>{{"/dev/davinci2", "/srv/host/dev/davinci2", "rw"},
                                         {"/dev/davinci_manager", "/srv/host/dev/davinci_manager", "rw"},
                                         {"/dev/devmm_svm", "/srv/host/dev/devmm_svm", "rw"},
                                         {"/dev/hisi_hdc", "/srv/host/dev/hisi_hdc", "rw"}}));
  const auto files = npu::driver_files();
  ASSERT_EQ(a.mounts.size(), files.size());
  for (std::size_t i = 0; i < files.size(); ++i) {
    EXPECT_EQ(a.mounts[i], (MountSpec{files[i], "/srv/host" + files[i], true}));
  }
}

TEST_F(PluginAllocate, CdiModeNamesDevices) {
  Config cfg;
  cfg.allocate_mode = AllocateMode::kCdi;
  auto r = run(cfg, chips, {{"Ascend910-7", "Ascend910-0"}});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ((*r)[0].cdi_devices, (std::vector<std::string>{"huawei.com/npu=0", "huawei.com/npu=7"}));
  EXPECT_TRUE((*r)[0].envs.empty());
  EXPECT_TRUE((*r)[0].mounts.empty());
}

TEST_F(PluginAllocate, StaticVnpuInRuntimeAndDeviceSpecModes) {
  add_vnpu(a2, 1, "vir05_1c_16g");  // id 116
  ResourceSpec v5{"huawei.com/Ascend910-5c.1cpu.16g", DeviceKind::kVnpu, "vir05_1c_16g"};
  auto r = run(Config{}, v5, {{"Ascend910-5c.1cpu.16g-116-1"}});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ((*r)[0].envs, (std::map<std::string, std::string>{{"ASCEND_VISIBLE_DEVICES", "116"},
                                                              {"ASCEND_RUNTIME_OPTIONS", "VIRTUAL"}}));
  EXPECT_EQ((*r)[0].mounts,
            (std::vector<MountSpec>{{"/var/run/ascend-container-devices/116", "/dev/null", true}}));
  Config ds;
  ds.allocate_mode = AllocateMode::kDeviceSpec;
  auto d = run(ds, v5, {{"Ascend910-5c.1cpu.16g-116-1"}});
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ((*d)[0].devices.front(), (DeviceNodeSpec{"/dev/davinci116", "/srv/host/dev/vdavinci116", "rw"}));
}

TEST_F(PluginAllocate, ErrorsNameTheIds) {
  a2.chip(4)->faults.push_back({0x80E01801, npu::Health::kCritical});
  a2.chip(6)->faults.push_back({0x80E01801, npu::Health::kAlarm});
  add_vnpu(a2, 5, "vir10_3c_32g");
  struct Case {
    std::vector<std::string> ids;
    int code;
    std::vector<std::string> named;
  };
  const Case cases[] = {
      {{"Ascend910-9", "Ascend910-0", "npu-3"}, EINVAL, {"Ascend910-9", "npu-3"}},
      {{"Ascend910-4", "Ascend910-6"}, EBUSY, {"Ascend910-4 (Critical)", "Ascend910-6 (Alarm)"}},
      {{"Ascend910-5"}, EBUSY, {"Ascend910-5 (holds vNPUs)"}},
      {{"Ascend910-1", "Ascend910-1"}, EINVAL, {"duplicate device ids Ascend910-1"}},
      {{}, EINVAL, {"no device ids"}},
  };
  for (const auto& c : cases) {
    auto r = run(Config{}, chips, {c.ids});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), c.code) << r.error().message();
    for (const auto& n : c.named)
      EXPECT_NE(r.error().message().find(n), std::string::npos) << r.error().message();
  }
  // A Warning is sub-health: still allocatable.
  a2.chip(2)->faults.push_back({0x80000001, npu::Health::kWarning});
  EXPECT_TRUE(run(Config{}, chips, {{"Ascend910-2"}}).ok());
}

TEST(NameIds, AtMostEightNamedEachCutAndPrintable) {
  // A hostile kubelet's request becomes one bounded line (issue 12).
  std::vector<std::string> many;
  for (int i = 0; i < 100000; ++i) many.push_back("Ascend910-" + std::to_string(i));
  struct Case {
    std::vector<std::string> ids;
    std::string want;
  };
  const Case cases[] = {
      {{"a"}, "unknown ids a"},
      {{"a", "b", "c", "d", "e", "f", "g", "h"}, "unknown ids a, b, c, d, e, f, g, h"},
      {{"a", "b", "c", "d", "e", "f", "g", "h", "i"}, "9 unknown ids a, b, c, d, e, f, g, h and 1 more"},
      {many,
       "100000 unknown ids Ascend910-0, Ascend910-1, Ascend910-2, Ascend910-3, Ascend910-4, Ascend910-5, "
       "Ascend910-6, Ascend910-7 and 99992 more"},
      {{std::string(100, 'x')}, "unknown ids " + std::string(64, 'x') + "..."},
      {{"a\nb\x01\xff"}, "unknown ids a?b??"},
  };
  for (const auto& c : cases) EXPECT_EQ(name_ids("unknown ids", c.ids), c.want);
}

TEST_F(PluginAllocate, OneResponsePerContainerRequest) {
  auto r = run(Config{}, chips, {{"Ascend910-0"}, {"Ascend910-1", "Ascend910-2"}});
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->size(), 2U);
  EXPECT_EQ((*r)[0].envs.at("ASCEND_VISIBLE_DEVICES"), "0");
  EXPECT_EQ((*r)[1].envs.at("ASCEND_VISIBLE_DEVICES"), "1,2");
  auto bad = run(Config{}, chips, {{"Ascend910-0"}, {"Ascend910-99"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("container request 2 of 2"), std::string::npos)
      << bad.error().message();
}

// ---- dynamic vNPU --------------------------------------------------------------------------------------

class PluginDynamic : public PluginAllocate {
 protected:
  Config cfg = [] {
    Config c;
    c.vnpu = VnpuMode::kDynamic;
    return c;
  }();
  ResourceSpec cores{kCoreResource, DeviceKind::kCore, ""};

  std::vector<std::string> tokens(int phy, int from, int n) {
    std::vector<std::string> out;
    for (int k = from; k < from + n; ++k) out.push_back(Ledger::token_id(phy, k));
    return out;
  }
  int free_tokens(int phy) {
    int n = 0;
    for (const auto& e : advertised(a2, cores, ledger)) n += (e.phy == phy && !ledger.held(e.id)) ? 1 : 0;
    return n;
  }
};

TEST_F(PluginDynamic, SmallestTemplateThatCoversTheCores) {
  struct Case {
    int cores;
    const char* tmpl;
  };
  const Case cases[] = {{1, "vir05_1c_16g"}, {5, "vir05_1c_16g"}, {6, "vir10_3c_32g"}, {10, "vir10_3c_32g"}};
  for (const auto& c : cases) {
    ledger = Ledger{};
    auto r = run(cfg, cores, {tokens(2, 0, c.cores)});
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ((*r)[0].envs, (std::map<std::string, std::string>{{"ASCEND_VISIBLE_DEVICES", "2"},
                                                                {"ASCEND_VNPU_SPECS", c.tmpl}}))
        << c.cores;
    EXPECT_EQ((*r)[0].mounts,
              (std::vector<MountSpec>{{"/var/run/ascend-container-devices/2", "/dev/null", true}}));
  }
  ledger = Ledger{};
  auto big = run(cfg, cores, {tokens(2, 0, 11)});
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code(), EINVAL);
  EXPECT_NE(big.error().message().find("no vNPU template covers 11 AICores"), std::string::npos);
}

TEST_F(PluginDynamic, CoresAreNeverPromisedTwice) {
  // 3 cores take a 5-core template: the kubelet must see only 15 free tokens on the chip afterwards.
  ASSERT_TRUE(run(cfg, cores, {tokens(0, 0, 3)}).ok());
  EXPECT_EQ(free_tokens(0), 15);
  EXPECT_EQ(ledger.cores_used(a2, 0), 5);
  // Fill chip 0: 15 more cores as three 5-core promises.
  for (int i = 0; i < 3; ++i) {
    auto r = run(cfg, cores, {tokens(0, 3 + 5 * i, 5)});
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ((*r)[0].envs.at("ASCEND_VISIBLE_DEVICES"), "0");
  }
  EXPECT_EQ(ledger.cores_used(a2, 0), 20);
  EXPECT_EQ(free_tokens(0), 0);
  // Chip 0 has nothing left to hand out: its last tokens are withheld, and asking for one fails.
  auto r = run(cfg, cores, {{Ledger::token_id(0, 18)}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), EBUSY);
  EXPECT_NE(r.error().message().find("npu-core-0-18 (taken by a vNPU template)"), std::string::npos)
      << r.error().message();
  // Every chip's promised AICores stay within its capacity however much is asked.
  for (int i = 0; i < 40; ++i) {
    (void)run(cfg, cores, {tokens(1 + i % 7, (i / 7) * 5 % 20, 5)});
  }
  for (const auto& c : a2.chips) EXPECT_LE(ledger.cores_used(a2, c.phy_id), 20) << c.phy_id;
  int promised = 0;
  for (const auto& p : ledger.promises()) promised += a2.find_template(p.template_name)->aicore;
  EXPECT_LE(promised, 8 * 20);
}

TEST_F(PluginDynamic, WholeChipAndCoresOfOneChipAreNeverBothHandedOut) {
  ASSERT_TRUE(run(cfg, cores, {tokens(3, 0, 2)}).ok());
  // The whole chip is no longer advertised and cannot be allocated.
  auto chip_ids = ids_of(advertised(a2, chips, ledger));
  EXPECT_EQ(std::count(chip_ids.begin(), chip_ids.end(), "Ascend910-3"), 0);
  auto whole = run(cfg, chips, {{"Ascend910-3"}});
  ASSERT_FALSE(whole.ok());
  EXPECT_EQ(whole.error().code(), EBUSY);
  EXPECT_NE(whole.error().message().find("Ascend910-3"), std::string::npos);
  // The other way round: a chip handed out whole has no tokens left, and no vNPU is placed on it.
  ASSERT_TRUE(run(cfg, chips, {{"Ascend910-4"}}).ok());
  EXPECT_EQ(free_tokens(4), 0);
  auto r = run(cfg, cores, {tokens(5, 0, 4)});
  ASSERT_TRUE(r.ok());
  EXPECT_NE((*r)[0].envs.at("ASCEND_VISIBLE_DEVICES"), "4");
}

TEST_F(PluginDynamic, PromisesEndWhenIdsAreHandedOutAgainOrNoLongerListed) {
  ASSERT_TRUE(run(cfg, cores, {tokens(0, 0, 5)}).ok());
  ASSERT_EQ(ledger.promises().size(), 1U);
  // The kubelet hands the same tokens out again: the first pod is gone.
  ASSERT_TRUE(run(cfg, cores, {tokens(0, 0, 5)}).ok());
  EXPECT_EQ(ledger.promises().size(), 1U);
  EXPECT_EQ(ledger.cores_used(a2, 0), 5);
  ASSERT_TRUE(run(cfg, chips, {{"Ascend910-6"}}).ok());
  EXPECT_TRUE(ledger.whole(6));
  // Reconcile: within the grace period nothing ends; after it, what the kubelet does not list ends.
  const auto now = Clock::now();
  std::map<std::string, std::set<std::string>> in_use;
  EXPECT_EQ(ledger.reconcile(in_use, chips.name, kCoreResource, now, std::chrono::seconds(10)), 0);
  in_use[kCoreResource] = {Ledger::token_id(0, 2)};
  EXPECT_EQ(ledger.reconcile(in_use, chips.name, kCoreResource, now + std::chrono::seconds(11),
                             std::chrono::seconds(10)),
            1);
  EXPECT_EQ(ledger.promises().size(), 1U) << "a promise still listed stays";
  EXPECT_FALSE(ledger.whole(6));
  EXPECT_EQ(ledger.reconcile({}, chips.name, kCoreResource, now + std::chrono::seconds(11),
                             std::chrono::seconds(10)),
            1);
  EXPECT_TRUE(ledger.promises().empty());
  EXPECT_EQ(free_tokens(0), 20);
}

TEST_F(PluginDynamic, FailedRequestLeavesTheLedgerAsItWas) {
  auto r = run(cfg, cores, {tokens(0, 0, 2), tokens(1, 0, 30)});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(ledger.promises().empty());
}

TEST(PluginLedger, TokenIds) {
  EXPECT_EQ(Ledger::token_id(3, 17), "npu-core-3-17");
  EXPECT_EQ(Ledger::token_phy("npu-core-3-17"), 3);
  for (const char* bad : {"npu-core-3", "npu-core--1-2", "npu-core-3-x", "Ascend910-3", "npu-core-3-1-"}) {
    EXPECT_EQ(Ledger::token_phy(bad), -1) << bad;
  }
}

// ---- GetPreferredAllocation ----------------------------------------------------------------------------

std::vector<std::string> chip_ids(const std::vector<int>& phys) {
  std::vector<std::string> out;
  for (int p : phys) out.push_back("Ascend910-" + std::to_string(p));
  return out;
}

struct PrefCase {
  const char* profile;
  std::vector<int> free;
  std::vector<int> must;
  int size;
  std::vector<int> want;  // empty: an error is expected
};

TEST(PluginPreferred, FollowsTheNodeLevelAllocator) {
  const PrefCase cases[] = {
      // Atlas 800 (910 A1), HCCS rings {0-3} {4-7}: a ring with exactly the needed free chips first.
      {"atlas800-9000", {0, 4, 5, 6}, {}, 1, {0}},        // ring 0 has 1 free
      {"atlas800-9000", {0, 1, 4, 5, 6}, {}, 2, {0, 1}},  // ring 0 has exactly 2
      {"atlas800-9000", {0, 1, 2, 4, 5}, {}, 2, {4, 5}},  // 2 free beats 3 free
      {"atlas800-9000", {0, 1, 2, 4, 5, 6, 7}, {}, 4, {4, 5, 6, 7}},
      {"atlas800-9000", {0, 1, 2, 3, 4, 5, 6, 7}, {}, 8, {0, 1, 2, 3, 4, 5, 6, 7}},
      {"atlas800-9000", {0, 1, 2, 3, 4, 5, 6, 7}, {}, 3, {}},  // 3 is not an A1 size
      {"atlas800-9000", {0, 1, 2, 4, 5, 6}, {}, 4, {}},        // no fully free ring
      // 910B full mesh: all 8.
      {"atlas800t-a2", {0, 1, 2, 3, 4, 5, 6, 7}, {}, 8, {0, 1, 2, 3, 4, 5, 6, 7}},
      // A3: the two dies of a card together.
      {"atlas800t-a3", {1, 2, 3, 5}, {}, 2, {2, 3}},
  };
  for (const auto& c : cases) {
    auto host = profile(c.profile);
    ResourceSpec res{"huawei.com/Ascend910", DeviceKind::kChip, ""};
    auto r = preferred_allocation(host, res, Ledger{}, chip_ids(c.free), chip_ids(c.must), c.size);
    if (c.want.empty()) {
      EXPECT_FALSE(r.ok()) << c.profile << " size " << c.size;
      continue;
    }
    ASSERT_TRUE(r.ok()) << c.profile << " size " << c.size << ": " << r.error().message();
    EXPECT_EQ(*r, chip_ids(c.want)) << c.profile << " size " << c.size;
  }
}

TEST(PluginPreferred, PassesTheAllocatorsAnswerThroughForEveryProfile) {
  // For every profile and a spread of free sets, the plugin answers exactly what choose() answers.
  for (const char* name : {"atlas800-9000", "atlas800t-a2", "atlas800t-a3", "atlas300i-duo"}) {
    auto host = profile(name);
    ResourceSpec res{host.resource_name, DeviceKind::kChip, ""};
    const std::string prefix = res.short_name() + "-";
    for (std::uint32_t mask = 1; mask < (1U << host.chips.size()); mask += 37) {
      std::vector<int> free;
      std::vector<std::string> avail;
      for (const auto& c : host.chips) {
        if ((mask >> c.phy_id & 1U) != 0) {
          free.push_back(c.phy_id);
          avail.push_back(prefix + std::to_string(c.phy_id));
        }
      }
      for (int size : {1, 2, 4}) {
        if (size > static_cast<int>(free.size())) continue;
        auto want = topology::choose(host, free, {}, size);
        auto got = preferred_allocation(host, res, Ledger{}, avail, {}, size);
        ASSERT_EQ(got.ok(), want.ok()) << name << " mask " << mask << " size " << size;
        if (!want.ok()) continue;
        std::vector<std::string> want_ids;
        for (int p : *want) want_ids.push_back(prefix + std::to_string(p));
        EXPECT_EQ(*got, want_ids) << name << " mask " << mask << " size " << size;
      }
    }
  }
}

TEST(PluginPreferred, MustIncludeAndBadInput) {
  auto host = profile("atlas800-9000");
  ResourceSpec res{"huawei.com/Ascend910", DeviceKind::kChip, ""};
  auto r = preferred_allocation(host, res, Ledger{}, chip_ids({0, 1, 4, 5, 6, 7}), chip_ids({5}), 2);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_NE(std::find(r->begin(), r->end(), "Ascend910-5"), r->end());
  auto unknown = preferred_allocation(host, res, Ledger{}, {"Ascend910-0", "bogus"}, {}, 1);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message().find("bogus"), std::string::npos);
  auto not_avail = preferred_allocation(host, res, Ledger{}, chip_ids({0, 1}), chip_ids({2}), 2);
  ASSERT_FALSE(not_avail.ok());
  EXPECT_NE(not_avail.error().message().find("Ascend910-2"), std::string::npos);
  EXPECT_FALSE(preferred_allocation(host, res, Ledger{}, chip_ids({0, 1}), {}, 3).ok());
}

TEST(PluginPreferred, CoresComeFromOneChipTheTightestFit) {
  auto host = profile("atlas800t-a2");
  ResourceSpec cores{kCoreResource, DeviceKind::kCore, ""};
  Ledger ledger;
  // Chip 1 already has a 10-core promise: 4 cores fit there more tightly than on an empty chip.
  ledger.add_promise({1, "vir10_3c_32g", {Ledger::token_id(1, 0)}, Clock::now()});
  std::vector<std::string> avail;
  for (const auto& e : device_table(host, cores, ledger)) {
    if (e.withheld.empty() && !ledger.held(e.id)) avail.push_back(e.id);
  }
  auto r = preferred_allocation(host, cores, ledger, avail, {}, 4);
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->size(), 4U);
  for (const auto& id : *r) EXPECT_EQ(Ledger::token_phy(id), 1) << id;
  // With a must-include token, its chip is used.
  auto m = preferred_allocation(host, cores, ledger, avail, {Ledger::token_id(6, 3)}, 3);
  ASSERT_TRUE(m.ok()) << m.error().message();
  for (const auto& id : *m) EXPECT_EQ(Ledger::token_phy(id), 6) << id;
}

}  // namespace
}  // namespace ascend::plugin
