// YAML documents read with yaml-cpp and handed on as nlohmann::json, so that every structured input of the
// project (profiles, cluster and job files, configs) is validated by one kind of code. Plain scalars that
// look like numbers or booleans become numbers or booleans; quoted scalars stay strings.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "ascend/common/error.h"

namespace YAML {
class Node;
}

namespace ascend {

nlohmann::json yaml_to_json(const YAML::Node& n);
// A plain (unquoted) scalar as yaml_to_json reads it: an integer, a decimal, true/True, false/False,
// null/~, else the string itself.
nlohmann::json plain_scalar_to_json(std::string_view v);
// Parses a YAML document; errors name `name` (the file it came from) and the line.
Result<nlohmann::json> parse_yaml(const std::string& text, const std::string& name);
// Reads and parses a YAML file; errors name the file and line.
Result<nlohmann::json> load_yaml_file(const std::string& path);

// Whether a name given where a built-in's name or a YAML file is accepted (a profile, a chip) names the file:
// it holds a '/' or ends in .yaml or .yml.
bool names_yaml_file(std::string_view name);

}  // namespace ascend
