// The fault-code table shipped with the plugin (faults/fault-codes.yaml), compiled in by CMake.
#pragma once

#include <string>

namespace ascend::plugin {

const std::string& builtin_fault_codes();

}  // namespace ascend::plugin
