// Placeholder until the npu-smi formatters land.
#include "ascend/npu/smi.h"
