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
