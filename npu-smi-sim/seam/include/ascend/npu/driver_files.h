// The driver files every NPU container receives: the device seam's list npu-smi-sim/seam/driver-files.list,
// compiled in at build time (it is the one list; the runtime's shipped base.list is made from it, and nothing
// else names these paths). Absolute paths as the host sees them, before DeviceQuery::host_path. Components
// ask their DeviceQuery (DeviceQuery::driver_files), whose default this is.
#pragma once

#include <string>
#include <vector>

namespace ascend::npu {

const std::vector<std::string>& driver_files();

}  // namespace ascend::npu
