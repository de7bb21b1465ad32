// Helpers for topology tests: small clusters and jobs built in code, and the placement invariants every
// policy must keep.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <set>
#include <string>
#include <vector>

#include "ascend/topology/cluster.h"
#include "ascend/topology/job.h"
#include "ascend/topology/place.h"

namespace ascend::topology::testing {

inline NodeSpec node(std::string name, std::string profile, std::string leaf, std::string spine = "spine-0",
                     std::vector<int> busy = {}, std::vector<int> unhealthy = {}) {
  NodeSpec n;
  n.name = std::move(name);
  n.profile = std::move(profile);
  n.leaf = std::move(leaf);
  n.spine = std::move(spine);
  n.busy = std::move(busy);
  n.unhealthy = std::move(unhealthy);
  return n;
}

inline Cluster make(const std::vector<NodeSpec>& specs, const Bandwidth& bw = {}) {
  auto c = make_cluster("test", bw, specs, builtin_profiles());
  EXPECT_TRUE(c.ok()) << c.error().message();
  return std::move(c).value();
}

inline Job job(int npus, int tp, int pp, int dp, int per_pod = 0, CommBytes comm = {1e9, 2e8, 4.4e9},
               RankOrder order = RankOrder::kTpDpPp) {
  Job j;
  j.name = std::string("j") + std::to_string(npus);
  j.npus = npus;
  j.tp = tp;
  j.pp = pp;
  j.dp = dp;
  j.npus_per_pod = per_pod;
  j.comm = comm;
  j.order = order;
  return j;
}

// The invariants of any placement: ranks 0..N-1 each once, no chip twice, only chips free in `state`
// (hence healthy and not busy), every pod on one node.
inline void expect_valid(const Cluster& c, const ClusterState& state, const Job& j, const Placement& p) {
  ASSERT_EQ(static_cast<int>(p.chips.size()), j.npus) << "one chip per rank";
  ASSERT_GT(p.pod_size, 0);
  std::set<std::pair<int, int>> seen;
  for (std::size_t r = 0; r < p.chips.size(); ++r) {
    const ChipRef& ch = p.chips[r];
    ASSERT_GE(ch.node, 0);
    ASSERT_LT(ch.node, static_cast<int>(c.nodes.size()));
    ASSERT_GE(ch.slot, 0);
    ASSERT_LT(ch.slot, c.type_of(ch.node).size);
    EXPECT_TRUE(seen.insert({ch.node, ch.slot}).second) << "chip used twice by rank " << r;
    EXPECT_NE(state.free[static_cast<std::size_t>(ch.node)] >> ch.slot & 1, 0U)
        << "rank " << r << " on a chip that is not free";
    EXPECT_EQ(c.nodes[static_cast<std::size_t>(ch.node)].unhealthy >> ch.slot & 1, 0U) << "unhealthy chip";
    EXPECT_EQ(c.nodes[static_cast<std::size_t>(ch.node)].busy >> ch.slot & 1, 0U) << "busy chip";
    int pod = static_cast<int>(r) / p.pod_size;
    EXPECT_EQ(ch.node, p.chips[static_cast<std::size_t>(pod * p.pod_size)].node) << "pod " << pod << " split";
  }
}

}  // namespace ascend::topology::testing
