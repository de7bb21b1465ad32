// `npu-sim status`: a human summary and the JSON form of the loaded host. Pure functions.
#pragma once

#include <string>

#include "ascend/npu/state.h"

namespace ascend::npu {

std::string format_status(const HostState& s, const std::string& root);
std::string format_status_json(const HostState& s, const std::string& root);

}  // namespace ascend::npu
