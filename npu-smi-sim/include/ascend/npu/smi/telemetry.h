// Facts a real host reads from hardware and the emulated state does not carry, per chip family: board
// identity, clocks, die ids, the MCU's temperature, power text. Each is a fixed value of the chip family,
// chosen from the captures (see tests/fixtures/npu-smi/README.md) or, where no capture shows one, a
// plausible constant. npu-smi prints them (format.cc) and the emulated libdcmi.so reports the same values.
// Pure functions; thread-safe.
#pragma once

#include <array>
#include <string>

#include "ascend/npu/state.h"

namespace ascend::npu::smi {

struct BoardFacts {
  bool product_lines;        // Product Name / Model / Manufacturer / Serial Number lines (not on A1)
  const char* product_name;  // 910B: SAMPLE M (IT21HMDC_Bin5); 310P: Atlas 300I Duo (IT21PDDA01)
  int board_id;              // 910B: 0x60 (SAMPLE M); A1: 0x02 (SAMPLE B)
  int main_board_id;         // printed on 910_93 only
  int pci_device;            // 910: 0xD801, 910B: 0xD802 (SAMPLE B, M, L lspci), 310P: 0xD500
  int subsys_vendor;
  int subsys_device;
};
BoardFacts board_facts(Family f);
// Serial numbers follow the one captured (card 0 of SAMPLE M: 1025C9048791), one per card.
std::string serial_number(int card_id);

struct Clocks {
  int aicore_mhz;       // "Aicore Freq(MHZ)"
  int aicore_idle_mhz;  // "Aicore curFreq(MHZ)" while the AICores are idle (SAMPLE A: 1800 / 800)
  int hbm_mhz;
  int ddr_mhz;
};
Clocks clocks(Family f);

int mcu_temp(const Chip& c);                                  // 8 degrees below the chip (SAMPLE A: 46 / 38)
std::string die_id(const Chip& c, char kind);                 // " XXXXXXXX" x 5, stable per chip
std::array<unsigned, 5> die_words(const Chip& c, char kind);  // the same five words
// The VDIE id, as NPU Exporter labels it ("XXXXXXXX-...-XXXXXXXX") and DCMI's dcmi_get_device_die_v2 gives
// its words: the "VDie ID" npu-smi -t board -c prints on the 910 families, the "Die ID" on the 310P.
char vdie_kind(Family f);
std::string vdie_id(const Chip& c, Family f);
std::string power_text(const HostState& s, const Chip& c);  // "NA" (310P), "-" (die 1 of an A3), "93.6"
int physical_chip_count(const HostState& s, int card_id);   // chips of the physical card

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

}  // namespace ascend::npu::smi
