// The npu-smi output formats, as pure functions from a View (or a HostState) to the exact bytes the real
// tool prints. Layouts follow the captures in tests/fixtures/npu-smi (see its README for each source):
//   - "A2/A3 classic" table, 98 columns, for 910 (A1), 910B and 910_93 (A3: Phy-ID column, "-" power on
//     die 1, a full "+----+" line between the dies of a card);
//   - "310/310P" table, 106 columns, for 310P (Device column, no HBM, power "NA");
//   - key:value lines "\t%-30s : %s" for -l, -t board/usages/common/health/memory/vnpu-mode;
//   - the -m mapping columns, the topo matrix, and the template-info / info-vnpu boxes.
// Telemetry that the state does not carry (board identity, clocks, die ids) is derived per chip family and
// documented next to each value in format.cc. Thread-safe (no shared state).
#pragma once

#include <string>
#include <string_view>

#include "ascend/npu/smi/view.h"
#include "ascend/npu/state.h"

namespace ascend::npu::smi {

// "\t<key padded to 30> : <value>\n", the real tool's key:value line.
std::string kv(std::string_view key, std::string_view value);

std::string info_table(const View& v);  // npu-smi info
std::string card_list(const View& v);   // npu-smi info -l
std::string mapping(const View& v);     // npu-smi info -m
std::string topo(const View& v);        // npu-smi info -t topo

// -t board -i N: the card; with -c C: one chip of it.
std::string card_board(const View& v, const Card& card);
std::string chip_board(const View& v, const Device& d);
// -t usages|common|health|memory -i N [-c C]: `only` restricts the output to one device of the card.
std::string usages(const View& v, const Card& card, const Device* only);
std::string common(const View& v, const Card& card, const Device* only);
std::string health(const View& v, const Card& card, const Device* only);
std::string memory(const View& v, const Card& card, const Device* only);

std::string template_info(const HostState& s);                // -t template-info
std::string info_vnpu(const HostState& s, const Chip& chip);  // -t info-vnpu -i N -c C
std::string vnpu_mode(const HostState& s);                    // -t vnpu-mode

// Facts of a chip family that npu-smi prints but the state does not carry (format.cc says where each
// comes from). Exposed so that the emulated libdcmi.so reports the same values as npu-smi.
struct PciIdentity {
  int vendor = 0;  // "PCI Vendor ID"
  int device = 0;  // "PCI Device ID"
  int subsys_vendor = 0;
  int subsys_device = 0;
};
PciIdentity pci_identity(Family f);                // -t board -i N
int hbm_clock_mhz(Family f);                       // -t memory "HBM Clock Speed(MHz)"
int ddr_clock_mhz(Family f);                       // -t memory "DDR Clock Speed(MHz)"
inline constexpr const char* kChipVersion = "V1";  // -t board -i N -c C "Chip Version"
// A usage rate as npu-smi prints it: used * 100 / total, truncated; 0 when total is 0.
int usage_pct(long long used, long long total);

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
