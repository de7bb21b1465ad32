// The built-in profiles' data (npu-smi-sim/profiles/<name>.json, compiled in by CMake), in
// builtin_profile_names() order. Internal to the npu core.
#pragma once

#include <string_view>
#include <vector>

namespace ascend::npu {

struct ProfileText {
  std::string_view name;  // the file's name without .json
  std::string_view json;  // its text: a host state without run-time state (see profiles/README.md)
};
const std::vector<ProfileText>& builtin_profile_texts();

}  // namespace ascend::npu
