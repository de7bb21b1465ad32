// The cost model every policy is judged by (see docs/scheduler.md, "The cost model"). Bandwidth between two
// chips is the level they share; a ring of k ranks in rank order carrying B bytes costs 2(k-1)/k * B / min_i
// bw(r_i, r_(i+1 mod k)) seconds; a pipeline pair costs B_pp / bw. cost.tp, .dp, .pp are maxima over their
// groups/pairs and total is their sum. Pure functions; thread-safe.
#pragma once

#include <vector>

#include "ascend/topology/cluster.h"
#include "ascend/topology/job.h"

namespace ascend::topology {

// A chip of the cluster.
struct ChipRef {
  int node = -1;
  int slot = -1;
  bool operator==(const ChipRef&) const = default;
};

struct Cost {
  double tp = 0;
  double pp = 0;
  double dp = 0;
  double total = 0;
};

struct Evaluation {
  Cost cost;
  int tp_groups_outside_hccs = 0;  // TP groups (of 2+ ranks) not all inside one HCCS domain of one node
};

// `chips[r]` is the chip of rank r. `groups` must be groups_of(job). A rank whose chip has node -1 is not
// placed yet (a partial placement, as place_missing builds one): rings run over the placed ranks of each
// group at the whole group's volume, and pipeline pairs with an unplaced rank are left out.
Evaluation evaluate(const Cluster& c, const Job& job, const Groups& groups,
                    const std::vector<ChipRef>& chips);

// The cost of one ring of k ranks whose slowest hop runs at `bytes_per_s`.
double ring_cost(int k, double bytes, double bytes_per_s);

}  // namespace ascend::topology
