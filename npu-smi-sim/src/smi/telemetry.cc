// Telemetry the emulated state does not carry, per chip family (telemetry.h).
#include "ascend/npu/smi/telemetry.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

#include <fmt/printf.h>

namespace ascend::npu::smi {

BoardFacts board_facts(Family f) {
  switch (f) {
    case Family::k910:
      return {false, "", 0x02, 0, 0xD801, 0x0200, 0x0100};
    case Family::k910B:
      return {true, "IT21HMDC_Bin5", 0x60, 0, 0xD802, 0x19E5, 0x3003};
    case Family::k910_93:
      return {true, "IT22SMDA_A3", 0x68, 0x1c, 0xD803, 0x19E5, 0x3005};
    case Family::k310P:
      return {true, "IT21PDDA01", 0x64, 0, 0xD500, 0x0200, 0x0110};
  }
  return {false, "", 0, 0, 0, 0, 0};
}

std::string serial_number(int card_id) {
  return fmt::sprintf("1025C9048%03d", 791 + card_id);
}

Clocks clocks(Family f) {
  switch (f) {
    case Family::k910:
      return {1000, 1000, 1200, 2666};
    case Family::k910B:
    case Family::k910_93:
      return {1800, 800, 1600, 0};
    case Family::k310P:
      return {1080, 1080, 0, 3200};
  }
  return {0, 0, 0, 0};
}

// The MCU of a card reads 8 degrees below the chip (SAMPLE A: 46 / 38).
int mcu_temp(const Chip& c) {
  return c.temp_c - 8;
}

// Die ids: five 32-bit words, stable per chip (FNV-1a of the bus id, the chip and the word index). The
// emulator derives a chip's vdie id for every snapshot, so for every container that asks for NPUs: the key
// is made once, its last character (the word's index, one digit) set per word.
std::array<unsigned, 5> die_words(const Chip& c, char kind) {
  std::array<unsigned, 5> out{};
  std::string key = c.bus_id + ":" + std::to_string(c.phy_id) + ":" + kind + '0';
  for (std::size_t k = 0; k < out.size(); ++k) {
    std::uint32_t h = 2166136261U;
    key.back() = static_cast<char>('0' + k);
    for (unsigned char ch : key) {
      h ^= ch;
      h *= 16777619U;
    }
    out[k] = h;
  }
  return out;
}

namespace {

// A word as %08X writes it (the vdie id is made for every snapshot: no format string parsed per word).
void append_hex8(std::string& out, unsigned w) {
  constexpr char kDigits[] = "0123456789ABCDEF";
  for (int shift = 28; shift >= 0; shift -= 4) out += kDigits[(w >> shift) & 0xFU];
}

}  // namespace

std::string die_id(const Chip& c, char kind) {
  std::string out;
  for (unsigned w : die_words(c, kind)) {
    out += ' ';
    append_hex8(out, w);
  }
  return out;
}

char vdie_kind(Family f) {
  return f == Family::k310P ? 'D' : 'V';
}

std::string vdie_id(const Chip& c, Family f) {
  std::string out;
  for (unsigned w : die_words(c, vdie_kind(f))) {
    if (!out.empty()) out += '-';
    append_hex8(out, w);
  }
  return out;
}

std::string power_text(const HostState& s, const Chip& c) {
  if (s.family == Family::k310P || c.power_na) return "NA";
  if (c.power_w < 0) return "-";
  return fmt::sprintf("%.1f", c.power_w);
}

// How many chips the physical card has (the MCU's chip id on -m comes after them).
int physical_chip_count(const HostState& s, int card_id) {
  return static_cast<int>(
      std::count_if(s.chips.begin(), s.chips.end(), [&](const Chip& c) { return c.card_id == card_id; }));
}

PciIdentity pci_identity(Family f) {
  const BoardFacts b = board_facts(f);
  return {0x19E5, b.pci_device, b.subsys_vendor, b.subsys_device};
}

int usage_pct(long long used, long long total) {
  return total > 0 ? static_cast<int>(used * 100 / total) : 0;
}

int hbm_clock_mhz(Family f) {
  return clocks(f).hbm_mhz;
}

int ddr_clock_mhz(Family f) {
  return clocks(f).ddr_mhz;
}

}  // namespace ascend::npu::smi
