// Node-level chip choice: which `size` chips of one host a container gets, given what is free. Pure
// function of its inputs; thread-safe.
//
// Rules (see docs/scheduler.md, "Node-level choice"):
//  - Ascend 910 A1 (Atlas 800 9000): sizes 1, 2, 4, 8 inside HCCS rings {0-3}/{4-7} (8 = both rings);
//    a ring with exactly the needed free chips first: 1 chip -> rings with 1, then 3, then 2, then 4 free;
//    2 chips -> 2, then 4, then 3; 4 chips -> a fully free ring.
//  - 910B (full HCCS mesh): any size; keep the largest free blocks whole.
//  - A3 (910_93): keep the two dies (SIO pair) of a card together.
//  - 310P and custom profiles: fewest cards, lowest ids.
#pragma once

#include <vector>

#include "ascend/common/error.h"
#include "ascend/npu/seam.h"

namespace ascend::topology {

// `host` gives the family, cards and HCCS domains; `free` the phy ids that may be used; `must_include`
// ids that must be in the answer (a subset of free). Returns `size` phy ids in ascending order, or an error
// (EINVAL: size not allowed for this family; ENOSPC: no placement) naming why.
Result<std::vector<int>> choose(const npu::DeviceSnapshot& host, const std::vector<int>& free,
                                const std::vector<int>& must_include, int size);

}  // namespace ascend::topology
