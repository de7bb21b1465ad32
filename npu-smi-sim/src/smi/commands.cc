// Placeholder until the npu-smi commands land.
#include "ascend/npu/smi.h"

namespace ascend::npu::smi {
Visible visible_devices(const HostState&, const std::string&) { return {}; }
Output run(const std::vector<std::string>&, const std::string&) { return {1, "", "npu-smi: not built yet\n"}; }
}  // namespace ascend::npu::smi
