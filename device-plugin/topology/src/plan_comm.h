// plan's communication times from the collective model, for chips whose file describes the interconnect:
// where topo put each kind of group (spans_of) and what the step's collectives and sends then cost
// (comm_time). Internal to ascend_topology.
#pragma once

#include "ascend/topology/collective.h"
#include "ascend/topology/place.h"
#include "ascend/topology/step_model.h"

namespace ascend::topology::detail {

// The widest TP group and DP group of a placement (most servers, then the slowest levels) and the slowest
// pipeline pair.
struct Spans {
  GroupSpan tp;
  GroupSpan dp;
  Level pp = Level::kHccs;
};
Spans spans_of(const Cluster& c, const Job& job, const Placement& p);

struct PlannedComm {
  CommTime time;
  std::optional<ZeroComm> zero;  // with ZeRO-1
  CollectiveCost tp;  // one TP collective (an all-reduce, or with SP a reduce-scatter and an all-gather)
  CollectiveCost dp;  // one gradient bucket's all-reduce (reduce-scatter with ZeRO-1)
};

// The TP, PP and DP times of one step of layout `l` placed as `s` (docs/scheduler.md, "The step model").
PlannedComm comm_time(const ModelShape& m, const TrainOptions& o, const Layout& l, const Spans& s,
                      const Interconnect& ic, const Bandwidth& fallback);

}  // namespace ascend::topology::detail
