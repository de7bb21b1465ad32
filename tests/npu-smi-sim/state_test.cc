#include "ascend/npu/state.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ascend/npu/profiles.h"

namespace ascend::npu {
namespace {

TEST(State, JsonRoundTripKeepsEverything) {
  for (const auto& name : builtin_profile_names()) {
    auto p = builtin_profile(name);
    ASSERT_TRUE(p.ok()) << name;
    HostState s = *p;
    s.majors = {234, 235, 236, 237, 238};
    s.chips[1].faults.push_back({0x8C084E00, Health::kCritical});
    s.chips[0].processes.push_back({42, "python3", 1024, "NA"});
    s.vnpus.push_back({100, 0, s.templates[0].name, 0, {}, 0});
    s.vnpus.push_back({101,
                       0,
                       s.templates[0].name,
                       1,
                       {"c1", "/run/docker/runtime-runc/moby", 4242, 987654321, "pid:[4026531836]", "k:b"},
                       1});
    s.generation = 7;
    s.boot_id = "6f1c2a4e-0000-4000-8000-000000000001";
    auto back = parse_state(serialize(s));
    ASSERT_TRUE(back.ok()) << back.error().message();
    EXPECT_EQ(serialize(*back), serialize(s)) << name;
    EXPECT_EQ(back->chips[1].health(), Health::kCritical);
  }
}

struct BadState {
  const char* what;
  std::function<void(nlohmann::json&)> edit;
  const char* expect;
};

TEST(State, RejectsBadInputNamingTheField) {
  const std::vector<BadState> cases = {
      {"unknown top field", [](auto& j) { j["colour"] = "red"; }, "unknown field 'colour'"},
      {"unknown chip field", [](auto& j) { j["chips"][0]["nmae"] = "x"; },
       "state.chips[0]: unknown field 'nmae'"},
      {"wrong type", [](auto& j) { j["chips"][0]["phy_id"] = "zero"; }, "state.chips[0].phy_id"},
      {"duplicate phy", [](auto& j) { j["chips"][1]["phy_id"] = 0; }, "phy_id 0 appears twice"},
      {"phy out of range", [](auto& j) { j["chips"][0]["phy_id"] = 64; }, "out of range"},
      {"no chips", [](auto& j) { j["chips"] = nlohmann::json::array(); }, "at least one chip"},
      {"bad family", [](auto& j) { j["family"] = "920"; }, "unknown chip family '920'"},
      {"bad fault code",
       [](auto& j) {
         j["chips"][0]["faults"] = {{{"code", "0xZZ"}}};
       },
       "bad fault code"},
      {"bad severity",
       [](auto& j) {
         j["chips"][0]["faults"] = {{{"code", "0x1"}, {"severity", "meh"}}};
       },
       "unknown severity"},
      {"vnpu on unknown chip",
       [](auto& j) {
         j["vnpus"] = {{{"id", 900}, {"phy_id", 50}}};
       },
       "unknown chip 50"},
      {"bad vnpu mode", [](auto& j) { j["vnpu_mode"] = "both"; }, "vnpu_mode"},
  };
  for (const auto& c : cases) {
    nlohmann::json j = *builtin_profile("atlas800t-a2");
    c.edit(j);
    auto r = state_from_json(j);
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_NE(r.error().message().find(c.expect), std::string::npos) << c.what << ": " << r.error().message();
  }
  EXPECT_FALSE(parse_state("{not json").ok());
}

// The whole message, for the strict reader's cases: where, which field, what is wrong.
TEST(State, StrictFieldsNameTheFieldAndTheFault) {
  const std::vector<BadState> cases = {
      {"the seam's chip field the file does not have", [](auto& j) { j["chips"][0]["vdie_id"] = "V"; },
       "state.chips[0]: unknown field 'vdie_id'"},
      {"a chip's flag as a number", [](auto& j) { j["chips"][2]["power_na"] = 1; },
       "state.chips[2].power_na: [json.exception.type_error.302] type must be boolean, but is number"},
      {"a process's pid as text",
       [](auto& j) {
         j["chips"][0]["processes"] = {{{"pid", "42"}}};
       },
       "state.chips[0].processes[0].pid: expected an integer"},
      {"a fault that is not an object", [](auto& j) { j["chips"][0]["faults"] = {"0x80E01801"}; },
       "state.chips[0].faults[0]: expected an object"},
      {"a vNPU's status as text",
       [](auto& j) {
         j["vnpus"] = {{{"id", 100}, {"phy_id", 0}, {"status", "in use"}}};
       },
       "state.vnpus[0].status: expected an integer"},
      {"the seam's vNPU field the file does not have",
       [](auto& j) {
         j["vnpus"] = {{{"id", 100}, {"template_name", "vir05_1c_16g"}}};
       },
       "state.vnpus[0]: unknown field 'template_name'"},
      {"the container id inside the owner (the file has it beside the vNPU's fields)",
       [](auto& j) {
         j["vnpus"] = {{{"id", 100}, {"owner", {{"container_id", "c1"}}}}};
       },
       "state.vnpus[0].owner: unknown field 'container_id'"},
      {"a text field given as a list holding bytes that are not UTF-8 (yaml_fuzz found it thrown)",
       [](auto& j) { j["chips"][1]["name"] = nlohmann::json::array({"\xff"}); },
       "state.chips[1].name: [json.exception.type_error.316] invalid UTF-8 byte at index 0: 0xFF"},
      {"a template that is not a list", [](auto& j) { j["templates"] = "vir05_1c_16g"; },
       "state.templates: expected a list"},
      {"a chip without its name", [](auto& j) { j["chips"][3].erase("name"); },
       "state.chips: chip 3 has no name"},
      {"a chip's plain fields come before its lists, unknown fields last",
       [](auto& j) {
         j["chips"][0]["nmae"] = "x";
         j["chips"][0]["processes"] = 1;
         j["chips"][0]["temp_c"] = "hot";
       },
       "state.chips[0].temp_c: expected an integer"},
  };
  for (const auto& c : cases) {
    nlohmann::json j = *builtin_profile("atlas800t-a2");
    c.edit(j);
    auto r = state_from_json(j);
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.error().message(), c.expect) << c.what;
  }
}

TEST(State, LeftOutFieldsKeepTheirDefaults) {
  auto r = state_from_json(nlohmann::json::parse(R"({"chips": [{"phy_id": 3, "name": "910B3"}]})"));
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->chips.size(), 1U);
  EXPECT_EQ(r->chips[0].logic_id, 3);  // the phy id's
  EXPECT_EQ(r->chips[0].hccs_domain, -1);
  EXPECT_TRUE(r->chips[0].link_up);
  EXPECT_EQ(r->family, Family::k910B);
  EXPECT_EQ(r->vnpu_mode, "docker");
  EXPECT_EQ(r->vnpu_capacity.pngd, -1);
}

// The file's own form of a chip, its faults and vNPUs (state.h), written out by hand.
TEST(State, FileFormOfAChipAndItsVnpus) {
  HostState s;
  Chip c;
  c.name = "910B3";
  c.chip_version = "V1";  // derived when the emulator answers: not in the file
  c.vdie_id = "00000001-00000002-00000003-00000004-00000005";
  c.power_w = 93.5;
  c.faults = {{0x80E01801, Health::kAlarm}};
  s.chips = {c};
  s.vnpus = {{100, 0, "vir05_1c_16g", 0, {}, 0},
             {101, 0, "vir05_1c_16g", 1, {"c1", "/run/runc", 42, 7, "pid:[1]", "b"}, 1}};
  const nlohmann::json j = s;
  EXPECT_EQ(j["chips"][0], nlohmann::json::parse(R"({
    "phy_id": 0, "logic_id": 0, "card_id": 0, "chip_index": 0, "name": "910B3", "bus_id": "", "numa_node": 0,
    "cpu_affinity": "", "hccs_domain": -1, "device_ip": "", "aicore_count": 0, "hbm_total_mb": 0,
    "hbm_used_mb": 0, "mem_total_mb": 0, "mem_used_mb": 0, "power_w": 93.5, "power_na": false, "temp_c": 0,
    "aicore_usage_pct": 0, "hugepages_used": 0, "hugepages_total": 0, "processes": [],
    "faults": [{"code": "0x80E01801", "severity": "Alarm"}]})"));
  EXPECT_EQ(j["vnpus"], nlohmann::json::parse(R"([
    {"id": 100, "phy_id": 0, "template": "vir05_1c_16g", "vgroup": 0, "container_id": "", "status": 0},
    {"id": 101, "phy_id": 0, "template": "vir05_1c_16g", "vgroup": 1, "container_id": "c1", "status": 1,
     "owner": {"state_root": "/run/runc", "pid": 42, "pid_start": 7, "pid_ns": "pid:[1]", "boot": "b"}}])"));
  EXPECT_FALSE(j.contains("workloads"));
  EXPECT_FALSE(j.contains("boot_id"));
}

TEST(State, SeverityFromCodeClass) {
  EXPECT_EQ(severity_of_code(0x80E01801), Health::kWarning);
  EXPECT_EQ(severity_of_code(0x83000000), Health::kWarning);
  EXPECT_EQ(severity_of_code(0x84000000), Health::kAlarm);
  EXPECT_EQ(severity_of_code(0x87FFFFFF), Health::kAlarm);
  EXPECT_EQ(severity_of_code(0x8C084E00), Health::kCritical);
  EXPECT_EQ(severity_of_code(0x0F000000), Health::kCritical);
}

TEST(State, HealthIsWorstFault) {
  Chip c;
  EXPECT_EQ(c.health(), Health::kOk);
  c.faults = {{1, Health::kWarning}, {2, Health::kAlarm}};
  EXPECT_EQ(c.health(), Health::kAlarm);
}

TEST(State, NamesAndParsers) {
  EXPECT_EQ(to_string(Link::kHccsSw), "HCCS_SW");
  EXPECT_EQ(to_string(Health::kCritical), "Critical");
  EXPECT_EQ(*parse_health("ALARM"), Health::kAlarm);
  EXPECT_EQ(*parse_family("910b"), Family::k910B);
  EXPECT_EQ(level_of(Link::kSio), LinkLevel::kSio);
  EXPECT_EQ(level_of(Link::kHccsSw), LinkLevel::kHccs);
  EXPECT_EQ(level_of(Link::kSys), LinkLevel::kPcie);
}

}  // namespace
}  // namespace ascend::npu
