// A training job as the placer sees it: N ranks split as TP x PP x DP, laid out in a framework's rank order,
// grouped into pods (one node each), with the bytes each kind of group exchanges per step. Plain values;
// thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ascend/common/error.h"
#include "ascend/topology/fields.h"

namespace ascend::topology {

// Which parallel dimension varies fastest with the rank. tp-dp-pp is Megatron/MindSpeed's order.
enum class RankOrder { kTpDpPp, kTpPpDp };
std::string_view to_string(RankOrder o);

// Bytes per rank per step of each kind of traffic.
struct CommBytes {
  double tp = 0;
  double pp = 0;
  double dp = 0;
};

struct ModelSpec {
  double params = 0;
  int layers = 0;
  int hidden = 0;
  int seq_len = 0;
  int micro_batch = 1;
  int global_batch = 0;  // 0: one micro-batch per data-parallel rank and step
};

// The default volumes of docs/scheduler.md (bf16): m = global_batch/(b*dp) micro-batches per step,
// tp = 8*b*s*h*(L/pp)*m, pp = 4*b*s*h*m, dp = 2*params/(tp*pp).
CommBytes comm_from_model(const ModelSpec& m, int tp, int pp, int dp);

struct Job {
  std::string name = "job";
  int npus = 0;
  int tp = 1;
  int pp = 1;
  int dp = 1;
  RankOrder order = RankOrder::kTpDpPp;
  int npus_per_pod = 0;  // 0: min(npus, chips of the largest node)
  CommBytes comm;
  std::optional<ModelSpec> model;
};

// Checks npus = tp*pp*dp, positive sizes and npus_per_pod | npus (EINVAL naming the field).
Status validate(const Job& j);

// The job file format (see docs/scheduler.md, "Job file"). Unknown fields are rejected; comm_bytes keys
// override the values derived from `model`; one of the two must be given.
Result<Job> job_from_json(const nlohmann::json& j, const LineLocator& where = {});

// A job's position in each parallel dimension.
struct Coord {
  int t = 0;
  int d = 0;
  int p = 0;
};
Coord coord_of(const Job& j, int rank);
int rank_of(const Job& j, const Coord& c);

// The communication groups of a job, each in rank order. TP and DP groups are rings; pp holds every
// pipeline-neighbour pair (stage s, stage s+1).
struct Groups {
  std::vector<std::vector<int>> tp;
  std::vector<std::vector<int>> dp;
  std::vector<std::pair<int, int>> pp;
};
Groups groups_of(const Job& j);

}  // namespace ascend::topology
