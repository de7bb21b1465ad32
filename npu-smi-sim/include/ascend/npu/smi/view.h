// What npu-smi shows: the devices of one host snapshot that are visible under a root, grouped into cards
// the way the real tool numbers them (NPU = card id, Chip = index on the card). A visible chip is a row of
// its own; a vNPU is a row of its own only where its parent chip is not visible (inside a container that
// received /dev/vdavinci<id> as /dev/davinci<id>), named "<family><template>" (e.g. "310Pvir01") and sized
// by its template. Pure values built from a HostState; the View points into the HostState it was built
// from, which must outlive it. Thread-safe to share read-only.
#pragma once

#include <string>
#include <vector>

#include "ascend/npu/smi.h"
#include "ascend/npu/state.h"

namespace ascend::npu::smi {

struct Device {
  const Chip* chip = nullptr;          // the physical chip (the parent of a vNPU)
  const Vnpu* vnpu = nullptr;          // set for a vNPU row
  const VnpuTemplate* tmpl = nullptr;  // the vNPU's template, when known
  int card_id = 0;                     // NPU column
  int chip_index = 0;                  // Chip column
  int logic_id = 0;                    // Device column (310P), "Chip Logic ID" (-m)
  int phy_id = 0;                      // Phy-ID column (A3): the chip's physical id, or the vNPU id
  std::string name;                    // Name column: "910B3", "310Pvir01"
  int aicore_count = 0;
  int hbm_total_mb = 0;
  int hbm_used_mb = 0;
  int mem_total_mb = 0;
  int mem_used_mb = 0;
  int aicore_usage_pct = 0;
};

struct Card {
  int id = 0;
  std::vector<Device> devices;  // in chip-index order
};

struct View {
  const HostState* state = nullptr;
  std::vector<Card> cards;  // in card-id order

  const Card* card(int id) const;
  const Device* device(int card_id, int chip_index) const;
  std::size_t device_count() const;
};

// The Name column of a vNPU row: the chip family and the template, "310Pvir01", "910Bvir10_3c_32g".
std::string vnpu_display_name(const HostState& s, const Vnpu& v);

// Builds the view of `s` restricted to `visible`.
View make_view(const HostState& s, const Visible& visible);

// Everything visible: every chip (what a host without device nodes, or a test, shows).
Visible all_chips(const HostState& s);

}  // namespace ascend::npu::smi
