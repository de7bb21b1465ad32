// Which names given for a profile or a chip are YAML files rather than built-ins' names.
#include <gtest/gtest.h>

#include "ascend/common/yaml_json.h"

namespace ascend {
namespace {

TEST(NamesYamlFile, ASlashOrAYamlEndingMakesAFile) {
  const std::pair<const char*, bool> cases[] = {
      {"atlas800t-a2", false},   {"910B3", false},       {"yaml", false},
      {"a.yaml.bak", false},     {".yamlx", false},      {"", false},
      {"chips/h100.yaml", true}, {"h100.yaml", true},    {"h100.yml", true},
      {"./atlas800t-a2", true},  {"/etc/profile", true}, {".yml", true},
  };
  for (const auto& [name, file] : cases) EXPECT_EQ(names_yaml_file(name), file) << "'" << name << "'";
}

}  // namespace
}  // namespace ascend
