// The shim's edit of config.json: golden before/after files (a real Docker spec and a `runc spec`), the
// hook's explicit environment, idempotence.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ascend/hook/oci.h"
#include "ascend/hook/spec_edit.h"
#include "ascend/npu/profiles.h"
#include "spec_json.h"

namespace ascend::hook {
namespace {

using nlohmann::ordered_json;

std::string fixture(const std::string& name) {
  return std::string(ASCEND_FIXTURES) + "/runtime-hook/spec-edit/" + name;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Compares with the golden file; ASCEND_UPDATE_GOLDEN=1 rewrites it instead (review the diff!).
void expect_golden(const std::string& got_text, const std::string& golden) {
  ordered_json got = ordered_json::parse(got_text);
  if (std::getenv("ASCEND_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(fixture(golden)) << got.dump(2) << "\n";
  }
  ordered_json want = ordered_json::parse(read(fixture(golden)));
  EXPECT_EQ(got, want) << "got:\n" << got.dump(2);
}

npu::HostState host_state() {
  npu::HostState h = npu::builtin_profile("atlas800t-a2").value();
  h.majors = {234, 235, 236, 237, 238};
  return h;
}

npu::DeviceSnapshot host() {
  return npu::to_snapshot(host_state());
}

HookCommand hook(const std::string& stage) {
  HookCommand h;
  h.path = "/usr/local/bin/ascend-docker-hook";
  h.args = {"ascend-docker-hook", "--config", "/etc/ascend-docker-runtime.d/config.yaml", stage};
  return h;
}

TEST(SpecEdit, DockerSpecGolden) {
  std::string before = read(fixture("docker.before.json"));
  ASSERT_FALSE(before.empty());
  Request r;
  r.ids = {0, 2};
  MountList base{"base", {"/usr/local/Ascend/driver/lib64", "/usr/local/bin/npu-smi"}};
  SpecEdit edit = make_spec_edit(make_plan(r, host(), {base}), hook("prestart"));
  auto after = apply_spec_edit(before, edit);
  ASSERT_TRUE(after.ok()) << after.error().message();
  expect_golden(*after, "docker.after.json");

  // Applying it again changes nothing.
  auto twice = apply_spec_edit(*after, edit);
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(ordered_json::parse(*twice), ordered_json::parse(*after));
}

TEST(SpecEdit, DockerSpecWithDriverMountsGolden) {
  // Injection "spec": the driver files become read-only bind mounts after the engine's own, and no hook.
  std::string before = read(fixture("docker.before.json"));
  ASSERT_FALSE(before.empty());
  Request r;
  r.ids = {0, 2};
  MountList base{"base", {"/usr/local/Ascend/driver/lib64", "/usr/local/bin/npu-smi"}};
  std::vector<BindMount> mounts = {
      {"/usr/local/Ascend/driver/lib64", "/usr/local/Ascend/driver/lib64"},
      {"/usr/local/Ascend/driver/tools/npu-smi", "/usr/local/bin/npu-smi"}};  // a host symlink, resolved
  SpecEdit edit = make_spec_edit(make_plan(r, host(), {base}), mounts);
  EXPECT_TRUE(edit.prestart.empty());
  auto after = apply_spec_edit(before, edit);
  ASSERT_TRUE(after.ok()) << after.error().message();
  expect_golden(*after, "docker-mounts.after.json");
  auto j = ordered_json::parse(*after);
  ASSERT_GE(j["mounts"].size(), 2U);
  EXPECT_EQ(j["mounts"].back(), ordered_json({{"destination", "/usr/local/bin/npu-smi"},
                                              {"type", "bind"},
                                              {"source", "/usr/local/Ascend/driver/tools/npu-smi"},
                                              {"options", {"bind", "ro", "nosuid", "nodev"}}}));
  EXPECT_EQ(j["hooks"], ordered_json::parse(before)["hooks"]);  // Docker's own hook, and none of ours

  auto twice = apply_spec_edit(*after, edit);
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(ordered_json::parse(*twice), j);
  EXPECT_FALSE(apply_spec_edit(R"({"mounts":{}})", edit).ok());  // mounts that are not a list
}

TEST(SpecEdit, DynamicVnpuGolden) {
  std::string before = read(fixture("runc.before.json"));
  ASSERT_FALSE(before.empty());
  npu::HostState hs = host_state();
  hs.vnpus.push_back({116, 1, "vir05_1c_16g", 0, {}, 0});
  const npu::DeviceSnapshot h = npu::to_snapshot(hs);
  Request r;
  r.ids = {116};
  r.is_virtual = true;
  r.nodrv = true;
  SpecEdit edit = make_spec_edit(make_plan(r, h, {}), hook("prestart"));
  HookCommand post = hook("poststop");
  post.args.insert(post.args.end(), {"--destroy-vnpu", "116"});
  edit.poststop.push_back(post);
  edit.drop_env = {"ASCEND_VNPU_SPECS"};
  edit.add_env.insert(edit.add_env.end(),
                      {"ASCEND_VISIBLE_DEVICES=116", "ASCEND_RUNTIME_OPTIONS=VIRTUAL,NODRV"});
  auto after = apply_spec_edit(before, edit);
  ASSERT_TRUE(after.ok()) << after.error().message();
  expect_golden(*after, "runc-vnpu.after.json");
}

TEST(SpecEdit, HookEnvironmentIsExplicitAndMinimal) {
  // Whatever the container's environment holds (LD_PRELOAD included), the hook entry carries only PATH.
  std::string spec = R"({"process":{"env":["LD_PRELOAD=/evil.so","PATH=/evil","ASCEND_VISIBLE_DEVICES=0"]}})";
  Request r;
  r.ids = {0};
  auto after = apply_spec_edit(spec, make_spec_edit(make_plan(r, host(), {}), hook("prestart")));
  ASSERT_TRUE(after.ok()) << after.error().message();
  auto j = ordered_json::parse(*after);
  ASSERT_EQ(j["hooks"]["prestart"].size(), 1U);
  EXPECT_EQ(j["hooks"]["prestart"][0]["env"], ordered_json({kHookPathEnv}));
  // The container keeps its own environment, plus the marker.
  EXPECT_EQ(j["process"]["env"], ordered_json({"LD_PRELOAD=/evil.so", "PATH=/evil",
                                               "ASCEND_VISIBLE_DEVICES=0", "ASCEND_DOCKER_RUNTIME=True"}));
}

TEST(SpecEdit, ReplacesADeviceOfTheSamePathAndKeepsOtherDevices) {
  std::string spec = R"({"linux":{"devices":[{"path":"/dev/fuse","type":"c","major":10,"minor":229},
    {"path":"/dev/davinci0","type":"c","major":1,"minor":1}],"resources":{"devices":[{"allow":false,"access":"rwm"}]}}})";
  Request r;
  r.ids = {0};
  auto after = apply_spec_edit(spec, make_spec_edit(make_plan(r, host(), {}), hook("prestart")));
  ASSERT_TRUE(after.ok()) << after.error().message();
  auto j = ordered_json::parse(*after);
  ASSERT_EQ(j["linux"]["devices"].size(), 5U);  // fuse, davinci0 (replaced), three control nodes
  EXPECT_EQ(j["linux"]["devices"][0]["path"], "/dev/fuse");
  EXPECT_EQ(j["linux"]["devices"][1]["major"], 234);
  auto rules = j["linux"]["resources"]["devices"];
  ASSERT_EQ(rules.size(), 5U);
  EXPECT_EQ(rules[0]["allow"], false);  // the deny-all stays first; the allows follow it
  EXPECT_EQ(rules[1],
            ordered_json({{"allow", true}, {"type", "c"}, {"major", 234}, {"minor", 0}, {"access", "rwm"}}));
}

// Found by spec_edit_fuzz (tests/fuzz/regressions/spec_edit_fuzz/): with neither linux.devices nor
// linux.resources, adding "resources" moved "devices" inside the ordered object and the nodes were written
// through a dangling pointer (a use-after-free under ASan, lost devices without it).
TEST(SpecEdit, ASpecWithoutLinuxGetsItsDevicesAndRules) {
  Request r;
  r.ids = {0};
  auto after = apply_spec_edit(R"({"ociVersion":"1.0.2","process":{"args":["sh"]}})",
                               make_spec_edit(make_plan(r, host(), {}), hook("prestart")));
  ASSERT_TRUE(after.ok()) << after.error().message();
  auto j = ordered_json::parse(*after);
  EXPECT_EQ(j["linux"]["devices"].size(), 4U);  // davinci0 and the three control nodes
  EXPECT_EQ(j["linux"]["resources"]["devices"].size(), 4U);
  EXPECT_EQ(j["linux"]["devices"][0]["path"], "/dev/davinci0");
}

// Found with spec_edit_fuzz: a device or hook entry whose path is not a string threw nlohmann::type_error
// out of the edit (and out of the shim's main). Now the edit refuses it with one line naming the field.
TEST(SpecEdit, AnEntryWhosePathIsNotAStringIsOneLineNotAnException) {
  Request r;
  r.ids = {0};
  SpecEdit edit = make_spec_edit(make_plan(r, host(), {}), hook("prestart"));
  for (const char* spec :
       {R"({"linux":{"devices":[{"path":7}]}})", R"({"hooks":{"prestart":[{"path":["x"],"args":[]}]}})"}) {
    SCOPED_TRACE(spec);
    Result<std::string> after = Error::invalid("not run");
    EXPECT_NO_THROW(after = apply_spec_edit(spec, edit));
    ASSERT_FALSE(after.ok());
    EXPECT_NE(after.error().message().find("path"), std::string::npos) << after.error().message();
    EXPECT_EQ(after.error().message().find('\n'), std::string::npos) << after.error().message();
  }
}

TEST(SpecEdit, RejectsMalformedSpecs) {
  Request r;
  r.ids = {0};
  SpecEdit edit = make_spec_edit(make_plan(r, host(), {}), hook("prestart"));
  const std::pair<const char*, const char*> cases[] = {
      {"not json", "not a JSON object"},
      {"[]", "not a JSON object"},
      {R"({"process":{"env":"A=1"}})", "process.env is not a list"},
      {R"({"process":{"env":[1]}})", "non-string"},
      {R"({"linux":{"devices":{}}})", "linux.devices is not a list"},
      {R"({"hooks":{"prestart":{}}})", "hooks.prestart is not a list"},
      // Wrong types where the shim and the hook read fields: an error naming the field, never an exception.
      {R"({"hooks":{"prestart":[{"path":5}]}})", "config.json hooks.prestart[0].path is not a string"},
      {R"({"hooks":{"poststop":[{"path":"/x","args":"a"}]}})", "hooks.poststop[0].args is not a list"},
      {R"({"hooks":{"prestart":[7]}})", "hooks.prestart[0] is not an object"},
      {R"({"hooks":[]})", "config.json hooks is not an object"},
      {R"({"mounts":[{"destination":1}]})", "mounts[0].destination is not a string"},
      {R"({"mounts":[{"destination":"/a","source":"/dev/null","options":[1]}]})", "mounts[0].options holds"},
      {R"({"mounts":{}})", "config.json mounts is not a list"},
      {R"({"linux":{"devices":[{"path":"/dev/x","major":"1"}]}})",
       "linux.devices[0].major is not an integer"},
      {R"({"linux":{"resources":{"devices":[{"allow":true,"minor":1.5}]}}})",
       "linux.resources.devices[0].minor is not an integer"},
      {R"({"linux":[]})", "config.json linux is not an object"},
      {R"({"root":{"path":7}})", "root.path is not a string"},
      {R"({"process":{"capabilities":{"bounding":"CAP_SYS_ADMIN"}}})", "process.capabilities.bounding"},
      {R"({"process":[]})", "config.json process is not an object"},
  };
  for (const auto& [spec, want] : cases) {
    SCOPED_TRACE(spec);
    auto after = apply_spec_edit(spec, edit);
    ASSERT_FALSE(after.ok());
    EXPECT_NE(after.error().message().find(want), std::string::npos) << after.error().message();
  }
}

TEST(OciState, ParsesAndBoundsTheHookInput) {
  auto s =
      parse_oci_state(R"({"ociVersion":"1.0.2","id":"c1","status":"created","pid":4242,"bundle":"/run/b"})");
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->id, "c1");
  EXPECT_EQ(s->pid, 4242);
  EXPECT_EQ(s->bundle, "/run/b");
  EXPECT_FALSE(parse_oci_state(R"({"pid":1})").ok());                        // no bundle
  EXPECT_FALSE(parse_oci_state(R"({"pid":-1,"bundle":"/b"})").ok());         // not a pid
  EXPECT_FALSE(parse_oci_state(R"({"pid":1,"bundle":"relative"})").ok());    // relative bundle
  EXPECT_FALSE(parse_oci_state(std::string(kMaxStateBytes + 1, ' ')).ok());  // too large
  // Wrong types are errors naming the field, never exceptions.
  const std::pair<const char*, const char*> wrong[] = {
      {R"({"pid":"42","bundle":"/b"})", "pid is not a process id"},
      {R"({"pid":4.5,"bundle":"/b"})", "pid is not a process id"},
      {R"({"pid":1,"bundle":5})", "no bundle"},
      {R"({"pid":1,"bundle":"/b","id":[1]})", "id is not a string"},
      {R"({"pid":1,"bundle":"/b","status":{}})", "status is not a string"},
      {R"([1,2])", "not a JSON object"},
  };
  for (const auto& [text, want] : wrong) {
    SCOPED_TRACE(text);
    auto st = parse_oci_state(text);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message().find(want), std::string::npos) << st.error().message();
  }
  std::string deep =
      R"({"pid":1,"bundle":"/b","x":)" + std::string(100000, '[') + std::string(100000, ']') + "}";
  auto d = parse_oci_state(deep);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message().find("nests deeper than"), std::string::npos) << d.error().message();
}

TEST(OciSpec, ADocumentNested100000DeepIsRefusedBeforeParsing) {
  // Writing such a document back (the shim does) would recurse 100 000 frames deep.
  std::string deep = R"({"process":{"env":["ASCEND_VISIBLE_DEVICES=0"]},"annotations":{"x":)" +
                     std::string(100000, '[') + std::string(100000, ']') + "}}";
  auto spec = parse_spec(deep);
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.error().message().find("config.json nests deeper than 64 levels"), std::string::npos)
      << spec.error().message();
  // Brackets inside strings do not count.
  auto quoted = parse_spec(R"({"annotations":{"x":")" + std::string(1000, '[') + R"("}})");
  EXPECT_TRUE(quoted.ok()) << quoted.error().message();
}

TEST(OciSpec, RootfsIsMadeAbsoluteAgainstTheBundle) {
  auto rel = spec_rootfs(ordered_json::parse(R"({"root":{"path":"rootfs"}})"), "/b");
  ASSERT_TRUE(rel.ok());
  EXPECT_EQ(*rel, "/b/rootfs");
  auto abs = spec_rootfs(ordered_json::parse(R"({"root":{"path":"/var/lib/x/merged"}})"), "/b");
  ASSERT_TRUE(abs.ok());
  EXPECT_EQ(*abs, "/var/lib/x/merged");
  EXPECT_FALSE(spec_rootfs(ordered_json::parse("{}"), "/b").ok());
}

}  // namespace
}  // namespace ascend::hook
