// The device seam's own types: the snapshot an emulated host gives, its link matrix and HCCS domains
// (expected values from the server manuals' topology, as the profiles' descriptions state them), and the
// seam's JSON form.
#include "ascend/npu/seam.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ascend/npu/profiles.h"
#include "ascend/npu/state.h"

namespace ascend::npu {
namespace {

DeviceSnapshot snap(const char* profile) {
  auto p = builtin_profile(profile);
  EXPECT_TRUE(p.ok()) << profile;
  HostState s = *p;
  s.majors = {240, 241, 242, 243, 244};
  return to_snapshot(s);
}

TEST(Seam, HccsDomainsComeFromTheLinks) {
  // Atlas 800 (9000): HCCS rings {0-3} {4-7}; 800T A2: one full mesh of 8; 800T A3: one HCCS switch over all
  // 16 dies; 300I Duo: PCIe only.
  EXPECT_EQ(hccs_domains(snap("atlas800-9000")), (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(hccs_domains(snap("atlas800t-a2")), std::vector<int>(8, 0));
  EXPECT_EQ(hccs_domains(snap("atlas800t-a3")), std::vector<int>(16, 0));
  const DeviceSnapshot duo = snap("atlas300i-duo");
  EXPECT_EQ(hccs_domains(duo), std::vector<int>(duo.chips.size(), -1));
  for (const auto& c : duo.chips) EXPECT_EQ(c.hccs_domain, -1);
}

TEST(Seam, LinksAreAMatrixOverTheChips) {
  const DeviceSnapshot a1 = snap("atlas800-9000");
  ASSERT_EQ(a1.links.size(), 64U);
  EXPECT_EQ(a1.link(0, 0), Link::kSelf);
  EXPECT_EQ(a1.link(0, 3), Link::kHccs);
  EXPECT_NE(a1.link(0, 4), Link::kHccs);  // across the rings: PCIe
  EXPECT_EQ(a1.link(0, 4), a1.link(4, 0));
  EXPECT_EQ(a1.link(0, 99), Link::kNa);
  const DeviceSnapshot a3 = snap("atlas800t-a3");
  EXPECT_EQ(a3.link(0, 1), Link::kSio);  // the two dies of card 0
  EXPECT_EQ(a3.link(0, 2), Link::kHccsSw);
}

TEST(Seam, NodesComeFromTheDriverMajors) {
  const DeviceSnapshot a2 = snap("atlas800t-a2");
  ASSERT_EQ(a2.chip_nodes.size(), a2.chips.size());
  EXPECT_EQ(a2.chip_node(3), (DeviceNode{"/dev/davinci3", 240, 3, 0660}));
  ASSERT_EQ(a2.control_nodes().size(), 3U);
  EXPECT_EQ(a2.control_nodes()[0], (DeviceNode{"/dev/davinci_manager", 241, 0, 0660}));
  EXPECT_EQ(a2.vnpu_node(100).path, "/dev/vdavinci100");  // unknown vNPU: the path, no device numbers
  EXPECT_EQ(a2.vnpu_node(100).major, 0);
  EXPECT_EQ(a2.backend, "emulator");
}

TEST(Seam, JsonRoundTripKeepsEveryField) {
  HostState s = *builtin_profile("atlas800t-a2");
  s.majors = {240, 241, 242, 243, 244};
  s.chips[2].faults = {{0x80E01801, Health::kCritical}};
  s.vnpus.push_back({116, 1, "vir05_1c_16g", 3, {"c1", "/run/runc", 42, 7, "pid:[1]", "b"}, 1});
  s.boot_id = "boot-1";
  const DeviceSnapshot d = to_snapshot(s);
  const nlohmann::json j = snapshot_to_json(d);
  EXPECT_EQ(j["chips"][2]["faults"][0]["severity"], "Critical");
  EXPECT_EQ(j["links"][0], "X");  // a flat list, row-major: chip 0 to itself
  auto back = snapshot_from_json(j);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(*back, d);
}

TEST(Seam, MalformedJsonIsOneLineNotAnException) {
  nlohmann::json j = snapshot_to_json(snap("atlas300i-duo"));
  j["chips"][0]["phy_id"] = "zero";
  auto r = snapshot_from_json(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), EINVAL);
  EXPECT_EQ(r.error().message().find('\n'), std::string::npos);
  EXPECT_FALSE(vnpu_from_json(nlohmann::json::array()).ok());
  EXPECT_FALSE(owner_from_json(nlohmann::json{{"pid", "x"}}).ok());
}

// The seam's form: every field required, a wrong type or a missing field one line naming the type read;
// a field it does not know is left alone (the DCMI helper may be of another build than its client).
TEST(Seam, JsonNeedsEveryFieldAndIgnoresUnknownOnes) {
  nlohmann::json j = snapshot_to_json(snap("atlas300i-duo"));
  j["chips"][0].erase("vdie_id");
  auto r = snapshot_from_json(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "malformed device snapshot: [json.exception.out_of_range.403] key 'vdie_id' not found");

  const Vnpu v{116, 1, "vir05_1c_16g", 3, {"c1", "/run/runc", 42, 7, "pid:[1]", "b"}, 1};
  nlohmann::json vj = vnpu_to_json(v);
  EXPECT_EQ(vj,
            nlohmann::json::parse(R"({"id": 116, "phy_id": 1, "template_name": "vir05_1c_16g", "vgroup": 3,
    "status": 1, "owner": {"container_id": "c1", "state_root": "/run/runc", "pid": 42, "pid_start": 7,
    "pid_ns": "pid:[1]", "boot": "b"}})"));
  vj["colour"] = "red";
  auto back = vnpu_from_json(vj);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(*back, v);
  vj["status"] = "in use";
  auto bad = vnpu_from_json(vj);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(),
            "malformed vNPU: [json.exception.type_error.302] type must be number, but is string");
}

}  // namespace
}  // namespace ascend::npu
