// The names of the DRA driver's devices (docs/dra.md): what ascend-device-plugin publishes in its
// ResourceSlices and what the scheduler reads back from a ResourceClaim's allocation. One place for the rule,
// so that writer and reader cannot drift. Pure functions.
#pragma once

#include <string>
#include <string_view>

#include "ascend/common/error.h"

namespace ascend::deviceinfo {

// The DRA driver's name, the pool of each node being the node's name.
inline constexpr const char* kDraDriver = "npu.ascend.huawei.com";

std::string device_name(int phy);                    // "npu-3"
Result<int> phy_of_device(std::string_view device);  // "npu-3" -> 3; anything else (a vNPU's too): EINVAL
// "npu-3-vir05-1c-16g-0": instance `k` of template `tmpl` on chip `phy` (a DNS label: '_' becomes '-').
std::string vnpu_device_name(int phy, std::string_view tmpl, int k);
// "npu-<phy>-<rest>" with `rest` of a DNS label's characters, not ending in '-': a vNPU's name, not a chip's.
bool is_vnpu_device_name(std::string_view device);
// The chip a device is, or is carved from (a vNPU): "npu-3" and "npu-3-vir05-1c-16g-0" -> 3; EINVAL else.
Result<int> chip_of_device(std::string_view device);

}  // namespace ascend::deviceinfo
