// The parallelism planner: every (tp, pp, dp) with tp x pp x dp = N, the memory each NPU needs, whether it
// fits the chip's HBM, and the estimated communication cost of its ideal placement (topo on an empty
// cluster of just enough nodes of the chip's profile). Pure; thread-safe.
//
// Memory per NPU (bytes, P parameters, bf16 weights with fp32 Adam states):
//   weights 2P/(tp*pp), gradients 2P/(tp*pp), optimizer states 12P/(tp*pp) (divided by dp with optimizer
//   parallelism, ZeRO-1 style), activations 34*s*b*h*L/(pp*tp).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ascend/common/error.h"
#include "ascend/npu/state.h"
#include "ascend/topology/cluster.h"
#include "ascend/topology/cost.h"
#include "ascend/topology/job.h"

namespace ascend::topology {

struct PlanRequest {
  int npus = 0;
  std::string
      chip;  // chip name (910B3, 910ProA, Ascend910, 310P3), family (910B, 910, 910_93, 310P) or profile
  double params = 0;
  int layers = 0;
  int hidden = 0;
  int seq_len = 0;
  int micro_batch = 1;
  int global_batch = 0;  // 0: max(1024, npus x micro_batch) sequences per step
  bool optimizer_parallel = false;
  Bandwidth bw;
};

struct Memory {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;
  double activations = 0;
  double total = 0;
};

struct PlanEntry {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  Memory memory;
  bool fits = false;
  std::string why_not;  // when it does not fit
  Evaluation eval;      // ideal placement (when it fits)
  CommBytes comm;
};

struct PlanResult {
  PlanRequest request;
  std::string profile;
  std::string chip_name;
  double hbm_bytes = 0;
  int chips_per_node = 0;
  std::vector<PlanEntry> entries;  // fitting ones by cost (cheapest first), then the others by memory
};

// The built-in profile whose chip matches `chip` (case-insensitive).
Result<npu::HostState> profile_for_chip(const std::string& chip);

Memory memory_per_npu(const PlanRequest& r, int tp, int pp, int dp);

// EINVAL for a bad request; a request where nothing fits is not an error (every entry says why).
Result<PlanResult> plan(const PlanRequest& r);

nlohmann::ordered_json to_json(const PlanResult& r);
std::string to_text(const PlanResult& r);

}  // namespace ascend::topology
