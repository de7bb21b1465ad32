// CDI specs: the generated spec (golden), and the validator that holds it to the CDI specification's rules.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ascend/hook/cdi.h"
#include "ascend/npu/profiles.h"
#include "test_dir.h"

namespace ascend::hook {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

std::string fixture(const std::string& name) {
  return std::string(ASCEND_FIXTURES) + "/runtime-hook/cdi/" + name;
}

ordered_json generated() {
  npu::HostState h = npu::builtin_profile("atlas300i-duo").value();
  h.majors = {234, 235, 236, 237, 238};
  CdiInput in;
  in.mounts = {"/usr/local/Ascend/driver/lib64", "/usr/local/bin/npu-smi"};
  in.host_path = [](const std::string& p) { return "/srv/host" + p; };
  return make_cdi_spec(npu::to_snapshot(h), in);
}

TEST(Cdi, GeneratedSpecGolden) {
  ordered_json got = generated();
  if (std::getenv("ASCEND_UPDATE_GOLDEN") != nullptr)
    std::ofstream(fixture("atlas300i-duo.json")) << got.dump(2) << "\n";
  std::ifstream in(fixture("atlas300i-duo.json"));
  ASSERT_TRUE(in.good());
  ordered_json want = ordered_json::parse(in);
  EXPECT_EQ(got, want) << got.dump(2);
}

TEST(Cdi, GeneratedSpecFollowsTheSpecification) {
  ordered_json spec = generated();
  auto st = validate_cdi_spec(json::parse(spec.dump()));
  EXPECT_TRUE(st.ok()) << st.error().message();
  EXPECT_EQ(spec["cdiVersion"], "0.5.0");  // digit-led names and hostPath need 0.5.0, nothing needs more
  std::vector<std::string> names = cdi_device_names(json::parse(spec.dump()));
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "huawei.com/npu=0");
  EXPECT_EQ(names.back(), "huawei.com/npu=all");
  // "all" holds every chip's node; each chip's own device holds only its node.
  const auto& all = spec["devices"].back()["containerEdits"]["deviceNodes"];
  EXPECT_EQ(all.size(), spec["devices"].size() - 1);
  for (std::size_t i = 0; i + 1 < spec["devices"].size(); ++i) {
    const auto& nodes = spec["devices"][i]["containerEdits"]["deviceNodes"];
    ASSERT_EQ(nodes.size(), 1U);
    EXPECT_EQ(nodes[0]["path"], "/dev/davinci" + spec["devices"][i]["name"].get<std::string>());
    EXPECT_EQ(nodes[0]["hostPath"], "/srv/host/dev/davinci" + spec["devices"][i]["name"].get<std::string>());
  }
  for (const auto& m : spec["containerEdits"]["mounts"]) {
    EXPECT_EQ(m["options"], ordered_json({"ro", "nosuid", "nodev", "bind"}));
  }
}

TEST(Cdi, ValidatorRejectsWhatTheSpecificationForbids) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"kind":"a.com/b","devices":[{"name":"x","containerEdits":{}}]})", "cdiVersion"},
      {R"({"cdiVersion":"0.9.9","kind":"a.com/b","devices":[{"name":"x","containerEdits":{}}]})",
       "not a CDI version"},
      {R"({"cdiVersion":"0.5.0","kind":"npu","devices":[{"name":"x","containerEdits":{}}]})", "kind"},
      {R"({"cdiVersion":"0.5.0","kind":"a.com/b/c","devices":[{"name":"x","containerEdits":{}}]})", "kind"},
      {R"({"cdiVersion":"0.5.0","kind":"-a.com/b","devices":[{"name":"x","containerEdits":{}}]})", "kind"},
      {R"({"cdiVersion":"0.5.0","kind":"a.com/b","devices":[]})", "at least one device"},
      {R"({"cdiVersion":"0.5.0","kind":"a.com/b","devices":[{"name":"x-","containerEdits":{}}]})", "name"},
      {R"({"cdiVersion":"0.5.0","kind":"a.com/b","devices":[{"name":"x"}]})", "containerEdits is required"},
      {R"({"cdiVersion":"0.5.0","kind":"a.com/b","devices":[{"name":"x","containerEdits":{}},{"name":"x","containerEdits":{}}]})",
       "duplicate"},
      {R"({"cdiVersion":"0.5.0","kind":"a.com/b","devices":[{"name":"x","containerEdits":{"deviceNodes":[{"hostPath":"/d"}]}}]})",
       "path: required"},
      {R"({"cdiVersion":"0.5.0","kind":"a.com/b","devices":[{"name":"x","containerEdits":{"deviceNodes":[{"path":"/d","permissions":"rx"}]}}]})",
       "permissions"},
      {R"({"cdiVersion":"0.5.0","kind":"a.com/b","devices":[{"name":"x","containerEdits":{"mounts":[{"hostPath":"/a"}]}}]})",
       "containerPath"},
      {R"({"cdiVersion":"0.5.0","kind":"a.com/b","devices":[{"name":"x","containerEdits":{"env":["NOEQUALS"]}}]})",
       "env"},
      {R"({"cdiVersion":"0.5.0","kind":"a.com/b","devices":[{"name":"x","containerEdits":{"bogus":1}}]})",
       "unknown field 'bogus'"},
      {R"({"cdiVersion":"0.5.0","kind":"a.com/b","extra":1,"devices":[{"name":"x","containerEdits":{}}]})",
       "unknown field 'extra'"},
      // Found by cdi_fuzz: entries of the wrong type threw nlohmann::type_error out of the validator.
      {R"({"cdiVersion":"0.5.0","kind":"a.com/b","devices":[{"name":"x","containerEdits":{"deviceNodes":[{"path":0}]}}]})",
       "deviceNodes[?].path: required"},
      {R"({"cdiVersion":"0.5.0","kind":"a.com/b","devices":[{"name":"x","containerEdits":{"deviceNodes":[1]}}]})",
       "deviceNodes[?]: expected an object"},
      {R"({"cdiVersion":"0.5.0","kind":"a.com/b","devices":[{"name":"x","containerEdits":{"mounts":["/a"]}}]})",
       "mounts[?]: expected an object"},
      // Wrong types where a name is read for the message: an error, never an exception.
      {R"({"cdiVersion":"0.5.0","kind":"a.com/b","devices":[{"name":"x","containerEdits":{"mounts":[{"containerPath":7}]}}]})",
       "mounts[?]"},
      {R"({"cdiVersion":"0.5.0","kind":"a.com/b","devices":[{"name":"x","containerEdits":{"hooks":["h"]}}]})",
       "hooks"},
      // Features newer than the declared version.
      {R"({"cdiVersion":"0.4.0","kind":"a.com/b","devices":[{"name":"0","containerEdits":{}}]})",
       "lower than"},
      {R"({"cdiVersion":"0.4.0","kind":"a.com/b","devices":[{"name":"x","containerEdits":{"deviceNodes":[{"path":"/d","hostPath":"/h"}]}}]})",
       "lower than"},
      {R"({"cdiVersion":"0.5.0","kind":"a.com/b","annotations":{"a":"b"},"devices":[{"name":"x","containerEdits":{}}]})",
       "lower than"},
  };
  for (const auto& [text, want] : cases) {
    SCOPED_TRACE(text);
    auto st = validate_cdi_spec(json::parse(text));
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message().find(want), std::string::npos) << st.error().message();
  }
  // The specification's own example is valid.
  auto example =
      json::parse(R"({"cdiVersion":"0.6.0","kind":"vendor.com/device","devices":[{"name":"myDevice",
    "containerEdits":{"deviceNodes":[{"hostPath":"/vendorroot/dev/card1","path":"/dev/card1"},{"path":"/dev/card2"}]}}],
    "containerEdits":{"env":["FOO=CDI_SPEC"],"deviceNodes":[{"path":"/dev/vendorctl","uid":1000,"gid":1000}],
    "mounts":[{"hostPath":"/bin/vendorBin","containerPath":"/bin/vendorBin"}],
    "hooks":[{"hookName":"createContainer","path":"/bin/vendor-hook"}]}})");
  auto st = validate_cdi_spec(example);
  EXPECT_TRUE(st.ok()) << st.error().message();
}

// ascend-ctk cdi validate FILE: one line for a valid spec, an error naming the file otherwise.
TEST(Cdi, ValidateFileSaysValidOrNamesTheFile) {
  testing::TempDir dir;
  const std::string good = dir.path() + "/good.json";
  std::ofstream(good) << R"({"cdiVersion": "0.5.0", "kind": "huawei.com/npu",
    "devices": [{"name": "0", "containerEdits": {"deviceNodes": [{"path": "/dev/davinci0"}]}}]})";
  auto ok = validate_cdi_file(good);
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  EXPECT_EQ(*ok, good + ": valid CDI spec (0.5.0)\n");
  const std::string not_json = dir.path() + "/bad.json";
  std::ofstream(not_json) << "{";
  auto bad = validate_cdi_file(not_json);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), not_json + ": not JSON");
  const std::string invalid = dir.path() + "/invalid.json";
  std::ofstream(invalid) << R"({"cdiVersion": "9.9.9", "kind": "huawei.com/npu", "devices": []})";
  auto inv = validate_cdi_file(invalid);
  ASSERT_FALSE(inv.ok());
  EXPECT_NE(inv.error().message().find(invalid), std::string::npos) << inv.error().message();
  EXPECT_NE(inv.error().message().find("cdiVersion"), std::string::npos) << inv.error().message();
  EXPECT_EQ(validate_cdi_file(dir.path() + "/missing.json").error().code(), ENOENT);
}

}  // namespace
}  // namespace ascend::hook
