#include "ascend/npu/profiles.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "ascend/common/yaml_json.h"

namespace ascend::npu {
namespace {

const std::string kFixtures = ASCEND_FIXTURES;

TEST(Profiles, BuiltinsHaveTheDocumentedShape) {
  struct Want {
    const char* name;
    Family family;
    std::size_t devices;
    const char* chip;
    int aicore;
    int hbm;
    const char* resource;
  };
  for (const Want& w :
       {Want{"atlas800-9000", Family::k910, 8, "910ProA", 32, 32768, "huawei.com/Ascend910"},
        Want{"atlas800t-a2", Family::k910B, 8, "910B3", 20, 65536, "huawei.com/Ascend910"},
        Want{"atlas800t-a3", Family::k910_93, 16, "Ascend910", 24, 65536, "huawei.com/Ascend910"},
        Want{"atlas300i-duo", Family::k310P, 8, "310P3", 8, 0, "huawei.com/Ascend310P"}}) {
    auto p = builtin_profile(w.name);
    ASSERT_TRUE(p.ok()) << w.name;
    EXPECT_EQ(p->family, w.family) << w.name;
    ASSERT_EQ(p->chips.size(), w.devices) << w.name;
    std::set<std::string> ips;
    for (const auto& c : p->chips) {
      EXPECT_EQ(c.name, w.chip);
      EXPECT_EQ(c.aicore_count, w.aicore);
      EXPECT_EQ(c.hbm_total_mb, w.hbm);
      ips.insert(c.device_ip);
    }
    EXPECT_EQ(ips.size(), w.devices) << "device IPs must be unique";
    EXPECT_EQ(p->resource_name, w.resource);
    EXPECT_FALSE(p->templates.empty());
  }
  EXPECT_EQ(builtin_profile("atlas9000").error().code(), ENOENT);
}

// The built-ins are data: one file per profile under npu-smi-sim/profiles, named after the profile it
// holds, with no run-time state in it (the family's templates, capacity and resource name are derived; device
// IPs follow the hccn.conf convention).
TEST(Profiles, EachBuiltinIsItsDataFileAndCarriesNoRunTimeState) {
  std::set<std::string> files;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(ASCEND_SOURCE_DIR) + "/npu-smi-sim/profiles")) {
    if (e.path().extension() == ".json") files.insert(e.path().stem().string());
  }
  const auto names = builtin_profile_names();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), files);
  for (const auto& name : files) {
    SCOPED_TRACE(name);
    std::ifstream in(std::string(ASCEND_SOURCE_DIR) + "/npu-smi-sim/profiles/" + name + ".json");
    const auto j = nlohmann::json::parse(in);
    EXPECT_EQ(j.at("profile"), name);
    for (const char* run_time : {"vnpus", "majors", "generation", "boot_id", "device_nodes", "templates",
                                 "vnpu_capacity", "resource_name", "schema"}) {
      EXPECT_FALSE(j.contains(run_time)) << run_time << " is derived or run-time state";
    }
    for (const auto& c : j.at("chips")) {
      EXPECT_FALSE(c.contains("faults") || c.contains("processes") || c.contains("device_ip")) << c;
    }
    auto p = builtin_profile(name);
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(p->profile, name);
    EXPECT_EQ(p->chips.size(), j.at("chips").size());
  }
}

TEST(Profiles, A1RingsAreHccsAndCrossRingIsNot) {
  auto p = *builtin_profile("atlas800-9000");
  for (int a = 0; a < 8; ++a) {
    for (int b = 0; b < 8; ++b) {
      Link l = p.link(a, b);
      if (a == b) {
        EXPECT_EQ(l, Link::kSelf);
      } else if (a / 4 == b / 4) {
        EXPECT_EQ(l, Link::kHccs) << a << "-" << b;
      } else {
        EXPECT_NE(level_of(l), LinkLevel::kHccs) << a << "-" << b;
      }
    }
  }
}

TEST(Profiles, A2IsAFullMesh) {
  auto p = *builtin_profile("atlas800t-a2");
  for (int a = 0; a < 8; ++a) {
    for (int b = 0; b < 8; ++b) EXPECT_EQ(p.link(a, b), a == b ? Link::kSelf : Link::kHccs);
  }
}

TEST(Profiles, A3DiesOfACardShareSio) {
  auto p = *builtin_profile("atlas800t-a3");
  EXPECT_EQ(p.link(0, 1), Link::kSio);
  EXPECT_EQ(p.link(14, 15), Link::kSio);
  EXPECT_EQ(p.link(1, 2), Link::kHccsSw);
  EXPECT_EQ(p.cards().size(), 8U);
  EXPECT_EQ(p.cards()[3], (std::vector<int>{6, 7}));
  EXPECT_LT(p.chips[1].power_w, 0) << "the second die prints '-' for power";
}

TEST(Profiles, DeviceIpConvention) {
  EXPECT_EQ(device_ip(0, 0), "10.100.0.1");
  EXPECT_EQ(device_ip(3, 7), "10.107.0.4");
  EXPECT_EQ(device_ip(254, 1), "10.101.1.1");
  EXPECT_EQ(device_ip(511, 15), "10.115.2.4");
}

TEST(Profiles, CustomYamlOverridesABuiltin) {
  auto p = load_profile(kFixtures + "/npu-sim/custom-4x910b4.yaml");
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->profile, "lab-800i-a2");
  EXPECT_EQ(p->smi_version, "25.0.rc1.1");
  ASSERT_EQ(p->chips.size(), 8U);  // merged by phy_id into the base's eight chips
  EXPECT_EQ(p->chips[0].name, "910B4");
  EXPECT_EQ(p->chips[0].hbm_total_mb, 32768);
  EXPECT_EQ(p->chips[0].bus_id, "0000:C1:00.0");  // kept from the base
  EXPECT_EQ(p->chips[4].name, "910B3");
  EXPECT_EQ(p->chips[3].health(), Health::kWarning);
}

TEST(Profiles, CustomYamlErrorsNameFileAndField) {
  auto bad = load_profile(kFixtures + "/npu-sim/bad-field.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("bad-field.yaml"), std::string::npos) << bad.error().message();
  EXPECT_NE(bad.error().message().find("unknown field 'nmae'"), std::string::npos) << bad.error().message();
  auto syntax = load_profile(kFixtures + "/npu-sim/bad-syntax.yaml");
  ASSERT_FALSE(syntax.ok());
  EXPECT_NE(syntax.error().message().find("line "), std::string::npos) << syntax.error().message();
  auto missing = load_profile("/no/such/profile.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), ENOENT);
}

TEST(YamlJson, PlainScalarsBecomeNumbersAndBooleansQuotedOnesStayStrings) {
  using nlohmann::json;
  const std::pair<const char*, json> cases[] = {
      {"0", 0},
      {"42", 42},
      {"-7", -7},
      {"007", 7.0},  // a leading zero: not an integer, but a decimal (as YAML 1.2 core reads it)
      {"9223372036854775808", "9223372036854775808"},  // beyond int64: kept as written
      {"1.5", 1.5},
      {"-0.25", -0.25},
      {".5", 0.5},
      {"3.", 3.0},
      {"1e3", 1000.0},
      {"2.5E-1", 0.25},
      {"1e", "1e"},
      {"+1", "+1"},
      {"inf", "inf"},
      {"nan", "nan"},
      {"0x10", "0x10"},
      {"24.1.rc2", "24.1.rc2"},
      {"true", true},
      {"False", false},
      {"~", nullptr},
      {"\"12\"", "12"},
      {"'true'", "true"},
  };
  for (const auto& [text, want] : cases) {
    SCOPED_TRACE(text);
    EXPECT_EQ(yaml_to_json(YAML::Load(std::string("v: ") + text))["v"], want);
  }
}

TEST(Profiles, TemplatesPerFamily) {
  auto names = [](Family f, int mem) {
    std::vector<std::string> out;
    for (const auto& t : templates_for(f, mem)) out.push_back(t.name);
    return out;
  };
  EXPECT_EQ(names(Family::k910B, 65536), (std::vector<std::string>{"vir10_3c_32g", "vir05_1c_16g"}));
  EXPECT_EQ(names(Family::k910B, 32768),
            (std::vector<std::string>{"vir10_3c_16g", "vir10_4c_16g_m", "vir10_3c_16g_nm", "vir05_1c_8g"}));
  EXPECT_EQ(names(Family::k910, 32768), (std::vector<std::string>{"vir02", "vir04", "vir08", "vir16"}));
  EXPECT_EQ(names(Family::k310P, 24576).size(), 7U);
  EXPECT_EQ(templates_for(Family::k310P, 49152)[0].memory_mb, 6144);
}

}  // namespace
}  // namespace ascend::npu
