// The driver files every NPU container receives: the shipped mount list runtime-hook/mount-lists/base.list,
// compiled in at build time (it is the one list; nothing else names these paths). Absolute paths as the
// host sees them, before DeviceQuery::host_path.
#pragma once

#include <string>
#include <vector>

namespace ascend::npu {

const std::vector<std::string>& driver_files();

}  // namespace ascend::npu
