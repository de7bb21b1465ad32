// The three placement policies behind place(). Internal.
#pragma once

#include <cstdint>
#include <vector>

#include "ascend/topology/place.h"

namespace ascend::topology::detail {

Result<Placement> topo(const Cluster& c, const ClusterState& state, const Job& job, const Groups& groups);
Result<Placement> first_fit(const Cluster& c, const ClusterState& state, const Job& job,
                            const Groups& groups);
Result<Placement> volcano(const Cluster& c, const ClusterState& state, const Job& job, const Groups& groups);

// Checks that pods of `n` NPUs divide the job (EINVAL) and fit a node of the cluster (ENOSPC).
Status check_pod_size(const Cluster& c, const Job& job, int n);

// Places pods `pods` (pod indices, in this order) of `n` chips one after the other, each on one node, by
// first-fit's or Volcano's per-pod rules: takes their chips from `free` and writes them to `chips` (by rank).
// ENOSPC names the pod that found no room. volcano_check: EINVAL when Volcano cannot express pods of `n` of
// a job of `pods` pods on this cluster.
Status first_fit_pods(const Cluster& c, std::vector<std::uint64_t>& free, int n, const std::vector<int>& pods,
                      std::vector<ChipRef>& chips);
Status volcano_check(const Cluster& c, int n, int pods);
Status volcano_pods(const Cluster& c, std::vector<std::uint64_t>& free, int n, const std::vector<int>& pods,
                    std::vector<ChipRef>& chips);
// 0, 1, .., pods - 1.
std::vector<int> all_pods(int pods);

// The slots of `mask` in rank layout order: canonical (domain, card, chip) or ascending phy id.
void chips_in_order(const NodeType& t, std::uint64_t mask, bool canonical, std::vector<int>& out);

}  // namespace ascend::topology::detail
