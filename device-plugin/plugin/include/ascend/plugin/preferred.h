// GetPreferredAllocation, planned: which `size` of the available ids the plugin would like a container to
// get. Whole chips go to the node-level allocator (ascend::topology::choose: HCCS rings on Atlas 800,
// largest free blocks kept whole on 910B, SIO pairs kept together on A3); static vNPUs are taken in id
// order; AICore units are taken from one chip, the one that fits the request most tightly. Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/npu/seam.h"
#include "ascend/plugin/inventory.h"
#include "ascend/plugin/ledger.h"

namespace ascend::plugin {

// Fails (EINVAL) naming ids that the resource does not know or a size that cannot be met, and passes the
// allocator's refusal on (the kubelet then chooses by itself).
Result<std::vector<std::string>> preferred_allocation(const npu::DeviceSnapshot& host,
                                                      const ResourceSpec& res, const Ledger& ledger,
                                                      const std::vector<std::string>& available,
                                                      const std::vector<std::string>& must_include, int size);

}  // namespace ascend::plugin
