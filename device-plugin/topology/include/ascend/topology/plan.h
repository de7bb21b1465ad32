// The parallelism planner: every (tp, pp, dp, v) layout of N NPUs for a model, whether it fits the chip's
// HBM (and if not, which term overflows and by how much), and, for those that fit, the predicted step time
// of the step model (step_model.h) with the communication times of topo's placement on an ideal cluster of
// the chip's nodes: the same levels, bandwidths and cost model as `place` and `simulate`. Best first.
// Pure; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ascend/common/error.h"
#include "ascend/topology/chip.h"
#include "ascend/topology/cluster.h"
#include "ascend/topology/collective.h"
#include "ascend/topology/cost.h"
#include "ascend/topology/job.h"
#include "ascend/topology/step_model.h"

namespace ascend::topology {

// The fraction of peak the layers' kernels reach (docs/scheduler.md, "The step model": calibrated on the
// published configurations in tests/fixtures/plan).
inline constexpr double kDefaultEfficiency = 0.6;

struct PlanRequest {
  int npus = 0;
  std::string chip;                   // a built-in chip, family or profile name (builtin_chip)
  std::optional<ChipSpec> chip_spec;  // a chip file's chip; takes the place of `chip`
  ModelShape model;                   // global_batch 0: max(1024, N x b)
  TrainOptions train;
  int virtual_stages = 0;  // 0: v = 1 and every v that splits each stage's layers evenly
  double efficiency = kDefaultEfficiency;
  double comm_factor = 1;  // multiplies every modelled TP, PP and DP time (plan --measured fits it)
  bool allow_tp_across_nodes = false;
  Bandwidth bw;  // the cost model's levels (a chip file's bandwidths override them)
};

struct PlanEntry {
  Layout layout;
  int micro_batches = 0;  // per pipeline and step
  int layers_first = 0;   // layers of the first stage (the largest)
  int layers_last = 0;    // layers of the last stage
  Memory memory;          // the largest stage
  bool fits = false;
  std::string why_not;           // when it does not fit
  Volumes volumes;               // bytes per NPU per step the placement carries
  CommTime comm;                 // the modelled TP, PP, DP times (before comm_factor)
  std::optional<ZeroComm> zero;  // and ZeRO-1's, when the collective model prices them apart
  StepTime time;                 // when it fits
  Evaluation eval;               // topo's placement on the ideal cluster (when it fits)
  // Chips with an interconnect: the algorithm and time of one TP collective and one DP gradient bucket.
  CollectiveCost tp_collective;
  CollectiveCost dp_collective;
};

struct PlanResult {
  PlanRequest request;  // with the defaults filled in
  ChipSpec chip;
  std::string profile;
  Bandwidth cluster_bw;  // the cost model's levels for the chip (request.bw with the chip file's overrides)
  std::vector<PlanEntry> entries;  // fitting ones fastest first, then the others by memory
};

// Communication times times `factor` (PlanRequest::comm_factor).
CommTime scaled(const CommTime& c, double factor);
std::optional<ZeroComm> scaled(const std::optional<ZeroComm>& z, double factor);

// EINVAL for a bad request; a request where nothing fits is not an error (every entry says why).
Result<PlanResult> plan(const PlanRequest& r);

// The job `place` takes for an entry: its layout and the traffic volumes the plan used.
Job job_of(const PlanResult& r, const PlanEntry& e, std::string name = "plan");
// The job file (docs/scheduler.md, "Job file") for `job`, with a comment line of the plan's prediction for
// `e`.
std::string to_job_yaml(const Job& job, const PlanResult& r, const PlanEntry& e);

nlohmann::ordered_json to_json(const PlanResult& r);
std::string to_text(const PlanResult& r);

// Why the first layout beats the second: the step-time term (compute, bubble, tp, pp, dp_exposed) whose
// difference favours the first the most, with every term's difference. "" when fewer than two fit.
struct Explanation {
  std::string deciding_term;
  double margin_s = 0;  // second total - first total
  std::string text;     // one paragraph
};
Explanation explain(const PlanResult& r);

}  // namespace ascend::topology
