// The free/total vNPU resources of one chip, as `npu-smi info -t info-vnpu` prints them and the emulated
// libdcmi.so reports them (VDEV_MNG). Pure; thread-safe.
#pragma once

#include "ascend/npu/state.h"

namespace ascend::npu::smi {

// The free/total resource accounting of info-vnpu for one chip. Totals come from
// HostState::vnpu_capacity (negative: "NA"); every vNPU on the chip takes its template's resources. On
// 910B and 910_93 the driver keeps 4 GB of HBM for itself: memory starts at total-4 GB free and each vNPU
// takes its template memory less its AICore share of that reserve (two vir10_3c_16g on a 32 GB 910B4
// leave 0/32, one leaves 14/32, as captured); once a 910B chip holds a vNPU one more AICPU appears
// (SR-IOV turns a data CPU into an AICPU: 6/6 becomes 1/7 after two 3-AICPU vNPUs).
struct Resource {
  int free = 0;
  int total = 0;
  bool na = false;
};
struct VnpuResources {
  Resource aicore, memory_gb, aicpu, vpc, venc, vdec, jpegd, jpege, pngd;
  // The same memory in MB, as DCMI reports it: what vNPUs can take on an empty chip (the capacity less
  // the driver's reserve) and what is still free. Both 0 when memory_gb is NA.
  long long memory_usable_mb = 0;
  long long memory_free_mb = 0;
};
VnpuResources vnpu_resources(const HostState& s, int phy_id);

}  // namespace ascend::npu::smi
