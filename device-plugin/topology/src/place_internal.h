// The three placement policies behind place(). Internal.
#pragma once

#include <vector>

#include "ascend/topology/place.h"

namespace ascend::topology::detail {

Result<Placement> topo(const Cluster& c, const ClusterState& state, const Job& job, const Groups& groups);
Result<Placement> first_fit(const Cluster& c, const ClusterState& state, const Job& job,
                            const Groups& groups);
Result<Placement> volcano(const Cluster& c, const ClusterState& state, const Job& job, const Groups& groups);

// The slots of `mask` in rank layout order: canonical (domain, card, chip) or ascending phy id.
void chips_in_order(const NodeType& t, std::uint64_t mask, bool canonical, std::vector<int>& out);

}  // namespace ascend::topology::detail
