// The one vNPU capacity rule. What vNPUs take from their chip is the sum of their templates (VnpuLoad); a
// template fits next to a load when every resource it carries (AICore, memory, AICPU and the media units
// VPC, VENC, VDEC, JPEGD, JPEGE, PNGD) stays within the chip's capacity (a capacity the chip reports as NA,
// negative, limits nothing). Used by every creator and checker alike: the emulator's create (and so npu-smi's
// and the emulated DCMI's), npu-smi's tables, and the device plugin's ledger of promised cores.
#pragma once

#include <string>
#include <vector>

#include "ascend/npu/seam.h"

namespace ascend::npu {

struct VnpuLoad {
  int count = 0;  // vNPUs (or promises) summed
  int aicore = 0;
  long long memory_mb = 0;
  double aicpu = 0;
  int vpc = 0;
  int venc = 0;
  int vdec = 0;
  int jpegd = 0;
  int jpege = 0;
  double pngd = 0;

  void add(const VnpuTemplate& t);
  // Each resource's larger value (two views of one chip: the vNPUs made, the cores promised).
  static VnpuLoad larger(const VnpuLoad& a, const VnpuLoad& b);
};

// The load of chip `phy_id`'s vNPUs (a vNPU whose template is unknown counts, but takes nothing).
VnpuLoad vnpu_load(const std::vector<Vnpu>& vnpus, const std::vector<VnpuTemplate>& templates, int phy_id);

// The first resource, in the order AICore, memory, AICPU, VPC, VENC, VDEC, JPEGD, JPEGE, PNGD, that `t`
// needs beyond what `cap` leaves next to `load`; empty when `t` fits.
std::string vnpu_shortfall(const VnpuLoad& load, const VnpuTemplate& t, const VnpuCapacity& cap);

}  // namespace ascend::npu
