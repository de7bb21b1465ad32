// Accelerators as data for the planner: peak bf16 throughput, HBM, chips per node, and the node whose
// topology the placer uses. The built-in Ascend chips carry public figures (sources in docs/scheduler.md,
// "Chips"); a chip file (`--chip FILE.yaml`) describes any other accelerator, so that published results on
// other hardware can be compared. Pure values and functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ascend/common/error.h"
#include "ascend/npu/host_model.h"
#include "ascend/topology/cluster.h"
#include "ascend/topology/fields.h"
#include "ascend/topology/interconnect.h"

namespace ascend::topology {

struct ChipSpec {
  std::string name;
  std::vector<std::string> aliases;  // other names it answers to (family, profile), lower case
  double hbm_gib = 0;
  double peak_tflops_bf16 = 0;  // dense; chips without bf16 (910 A1, 310P) carry their fp16 peak
  int chips_per_node = 0;
  std::string profile;  // built-in host profile of one node; empty: a full mesh of chips_per_node chips
  // Chip files only: GB/s inside a node (every intra-node level) and between nodes (leaf, spine, core);
  // 0 keeps the cost model's default for those levels.
  double intra_node_gbps = 0;
  double inter_node_gbps = 0;
  // Chip files only: the interconnect level by level (interconnect.h). When present, plan prices TP, PP and
  // DP with the collective model (collective.h) instead of the cost model's per-byte rates.
  Interconnect interconnect;
};

// 910ProA (910 A1), 910B1-B4, 910C (one die), 310P3.
const std::vector<ChipSpec>& builtin_chips();

// The built-in chip with this name or alias (case-insensitive); EINVAL naming the known ones.
Result<ChipSpec> builtin_chip(std::string_view name);

// The chip file's form: `name`, `hbm_gib`, `peak_tflops_bf16`, `chips_per_node` (1-64),
// optional `bandwidth_gbps: {intra_node, inter_node}`, optional `interconnect` (interconnect.h: `library`,
// then `die`, `domain`, `server`, `nic`, `leaf`, `spine`, each {links, link_gbps, latency_us, fabric,
// efficiency}).
// Unknown fields are rejected (EINVAL with the field path and, with a locator, the line).
Result<ChipSpec> chip_from_json(const nlohmann::json& j, const LineLocator& where = {});

// The host a node of this chip is: its built-in profile, or (chip files) a full HCCS mesh of
// chips_per_node chips.
Result<npu::HostModel> node_host(const ChipSpec& c);

// `defaults` with the chip file's intra-node and inter-node bandwidths applied.
Bandwidth bandwidth_for(const ChipSpec& c, const Bandwidth& defaults);

}  // namespace ascend::topology
