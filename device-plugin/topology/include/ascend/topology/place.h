// Whole-job placement: which chip of which node each rank of a job gets. Three policies:
//  - topo: ours. Places the whole job at once so that TP groups stay inside HCCS domains first and the
//    cost model's total is smallest second (see docs/scheduler.md, "How topo places a job").
//  - first-fit: each pod, in order, takes the lowest free chips of the first node with room.
//  - volcano: each pod, in order, goes to the node with the best Volcano Ascend affinity score and takes the
//    chips Volcano's node-local rules pick; no job-level awareness.
// place() is a pure function of its inputs and thread-safe; it is the call a scheduler extender makes per
// job (filter: the placement's nodes; prioritize: nodes_of(); bind: occupy()). place_missing() places again
// the pods of a placed job that lost their chips, around the pods that kept theirs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ascend/common/error.h"
#include "ascend/topology/cluster.h"
#include "ascend/topology/cost.h"
#include "ascend/topology/job.h"

namespace ascend::topology {

enum class Policy { kTopo, kFirstFit, kVolcano };
std::string_view to_string(Policy p);
Result<Policy> parse_policy(std::string_view s);  // "topo", "first-fit", "volcano"

struct Placement {
  std::string job;
  Policy policy = Policy::kTopo;
  int pod_size = 0;
  std::vector<ChipRef> chips;  // by rank; pod of rank r = r / pod_size
  Evaluation eval;
};

// The pod size a job gets on this cluster: npus_per_pod, or min(npus, chips of the largest node).
int pod_size_of(const Job& job, const Cluster& c);

// Places `job` on the free chips of `state`. EINVAL: the job itself is invalid (or the policy cannot express
// it, e.g. Volcano's 8 x N rule on Ascend 910); ENOSPC: it does not fit. Messages say why.
Result<Placement> place(const Cluster& c, const ClusterState& state, const Job& job, Policy policy);

// Places the pods of `job` that lost their chips around the pods that hold theirs: the pods with
// keep_pod[i] keep the chips of `current` exactly (whether or not `state` shows them free, no other pod gets
// them); every other pod gets pod-size chips on one node from the free chips of `state`, chosen by `policy`
// (topo: the job's whole cost, TP groups on the fastest links first, as low as it can make it around the
// kept pods; first-fit and volcano: their per-pod rules). The result's eval is the whole job's. All kept:
// `current` with its eval recomputed; none kept: place(). EINVAL: the job, `current` (its size, pod size,
// a kept pod's chips not on one node or used twice) or keep_pod (one flag per pod) is wrong; ENOSPC: the
// missing pods do not fit. Pure and thread-safe, like place().
Result<Placement> place_missing(const Cluster& c, const ClusterState& state, const Job& job,
                                const Placement& current, const std::vector<bool>& keep_pod, Policy policy);

// Marks the placement's chips used / free again.
void occupy(ClusterState& state, const Placement& p);
void release(ClusterState& state, const Placement& p);

// Distinct nodes of a placement, in order of their first rank.
std::vector<int> nodes_of(const Placement& p);

// The placement JSON of docs/scheduler.md: {"job", "policy", "ranks": [{"rank", "pod", "node", "device_id"}],
// "cost": {"tp", "pp", "dp", "total"}, "tp_groups_outside_hccs"}.
nlohmann::ordered_json to_json(const Cluster& c, const Placement& p);

}  // namespace ascend::topology
