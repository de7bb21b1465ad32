// The project's splitmix64 stream (common/include/ascend/common/splitmix.h) under the tests' name. Included
// by path: some test programs (the kill and churn helpers) link nothing of common/.
#pragma once

#include "../../common/include/ascend/common/splitmix.h"

namespace ascend::testing {

using SplitMix64 = ascend::SplitMix64;

}  // namespace ascend::testing
