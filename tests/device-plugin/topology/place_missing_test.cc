// place_missing(): the pods of a placed job that lost their chips, placed again around the pods that kept
// theirs. Expected choices are worked out by hand from the cost model (cost.h: a ring's cost is set by its
// slowest hop; docs/scheduler.md bandwidths hccs 56, leaf 25, spine 12.5 GB/s), and on small uniform clusters
// the allocator is judged against an exhaustive search over the nodes the missing pods could take.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <random>
#include <set>

#include "ascend/topology/cost.h"
#include "ascend/topology/place.h"
#include "test_util.h"

namespace ascend::topology {
namespace {

using testing::expect_valid;
using testing::job;
using testing::make;
using testing::node;

constexpr CommBytes kComm = {1e9, 2e8, 4.4e9};  // tp, pp, dp bytes (test_util's defaults)

// A placement of `j` whose pod p holds `pods[p]` = (node, first slot): slots first .. first+n-1.
Placement placed(const Job& j, int n, const std::vector<std::pair<int, int>>& pods) {
  Placement p;
  p.job = j.name;
  p.pod_size = n;
  for (const auto& [nd, first] : pods) {
    for (int k = 0; k < n; ++k) p.chips.push_back({nd, first + k});
  }
  return p;
}

// The chips of pod `pod`, as a set.
std::set<std::pair<int, int>> pod_chips(const Placement& p, int pod) {
  std::set<std::pair<int, int>> out;
  for (int k = 0; k < p.pod_size; ++k) {
    const ChipRef& ch = p.chips[static_cast<std::size_t>(pod * p.pod_size + k)];
    out.insert({ch.node, ch.slot});
  }
  return out;
}

std::set<std::pair<int, int>> chips_on(int node, std::vector<int> slots) {
  std::set<std::pair<int, int>> out;
  for (int s : slots) out.insert({node, s});
  return out;
}

// 4 pods of 4 (tp 4, dp 4): pods 0 and 1 kept on n0 (full); n1 is on another leaf, n2 on n0's leaf, both
// empty. The DP rings {t, t+4, t+8, t+12} cross from n0 to the missing pods' node: over the leaf (25 GB/s)
// on n2, over the spine (12.5 GB/s) on n1. Both missing pods go to n2 although n1 comes first.
TEST(PlaceMissing, TheSameLeafWinsOverAnotherLeaf) {
  Cluster c = make(
      {node("n0", "atlas800t-a2", "l0"), node("n1", "atlas800t-a2", "l1"), node("n2", "atlas800t-a2", "l0")});
  ClusterState s = ClusterState::initial(c);
  s.free[0] = 0;  // the kept pods' chips
  Job j = job(16, 4, 1, 4, 4, kComm);
  Placement cur = placed(j, 4, {{0, 0}, {0, 4}, {1, 0}, {1, 4}});
  auto p = place_missing(c, s, j, cur, {true, true, false, false}, Policy::kTopo);
  ASSERT_TRUE(p.ok()) << p.error().message();
  expect_valid(c, ClusterState::initial(c), j, *p);
  EXPECT_EQ(p->policy, Policy::kTopo);
  EXPECT_EQ(pod_chips(*p, 0), chips_on(0, {0, 1, 2, 3})) << "a kept pod never moves";
  EXPECT_EQ(pod_chips(*p, 1), chips_on(0, {4, 5, 6, 7}));
  EXPECT_EQ(nodes_of(*p), (std::vector<int>{0, 2}));
  EXPECT_EQ(p->eval.tp_groups_outside_hccs, 0);
  EXPECT_DOUBLE_EQ(p->eval.cost.tp, ring_cost(4, 1e9, 56e9));
  EXPECT_DOUBLE_EQ(p->eval.cost.dp, ring_cost(4, 4.4e9, 25e9));
  EXPECT_DOUBLE_EQ(p->eval.cost.total, ring_cost(4, 1e9, 56e9) + ring_cost(4, 4.4e9, 25e9));
  // First-fit does what it always does: the first node with room, n1.
  auto ff = place_missing(c, s, j, cur, {true, true, false, false}, Policy::kFirstFit);
  ASSERT_TRUE(ff.ok()) << ff.error().message();
  EXPECT_EQ(ff->policy, Policy::kFirstFit);
  EXPECT_EQ(pod_chips(*ff, 2), chips_on(1, {0, 1, 2, 3}));
  EXPECT_EQ(pod_chips(*ff, 3), chips_on(1, {4, 5, 6, 7}));
  EXPECT_DOUBLE_EQ(ff->eval.cost.dp, ring_cost(4, 4.4e9, 12.5e9));
}

// Kept chips are never given to another pod, even when the state shows them free; the missing pod's DP
// partner is on n0, so it takes n0's other four chips (HCCS, 56 GB/s) rather than n1 (leaf, 25 GB/s).
TEST(PlaceMissing, KeptChipsAreNeverReusedAndTheKeptPodsNodeWins) {
  Cluster c = make({node("n0", "atlas800t-a2", "l0"), node("n1", "atlas800t-a2", "l0")});
  ClusterState s = ClusterState::initial(c);  // everything free, the kept pod's chips too
  Job j = job(8, 4, 1, 2, 4, kComm);
  Placement cur = placed(j, 4, {{0, 4}, {1, 0}});
  auto p = place_missing(c, s, j, cur, {true, false}, Policy::kTopo);
  ASSERT_TRUE(p.ok()) << p.error().message();
  expect_valid(c, s, j, *p);
  EXPECT_EQ(pod_chips(*p, 0), chips_on(0, {4, 5, 6, 7}));
  EXPECT_EQ(pod_chips(*p, 1), chips_on(0, {0, 1, 2, 3}));
  EXPECT_DOUBLE_EQ(p->eval.cost.dp, ring_cost(2, 4.4e9, 56e9));
}

// Ascend 910 (two HCCS rings of 4, PCIe between them): the missing pod's TP group of 4 stays inside HCCS
// only on one ring. n1 has chips 2..7 free: the pod takes ring 4..7, never a set across the rings.
TEST(PlaceMissing, ATpGroupStaysInsideAnHccsRing) {
  Cluster c = make({node("n0", "atlas800-9000", "l0", "spine-0", {4, 5}),
                    node("n1", "atlas800-9000", "l0", "spine-0", {0, 1})});
  ClusterState s = ClusterState::initial(c);
  s.free[0] &= ~0xFULL;  // the kept pod's ring
  Job j = job(8, 4, 1, 2, 4, kComm);
  Placement cur = placed(j, 4, {{0, 0}, {0, 4}});
  auto p = place_missing(c, s, j, cur, {true, false}, Policy::kTopo);
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(pod_chips(*p, 1), chips_on(1, {4, 5, 6, 7}));
  EXPECT_EQ(p->eval.tp_groups_outside_hccs, 0);
}

TEST(PlaceMissing, NoRoomIsEnospcWithTheReason) {
  Cluster c = make({node("n0", "atlas800t-a2", "l0"), node("n1", "atlas800t-a2", "l0", "spine-0", {0, 1, 2}),
                    node("n2", "atlas800t-a2", "l1", "spine-0", {0, 1, 2, 3, 4, 5})});
  ClusterState s = ClusterState::initial(c);
  s.free[0] = 0;
  Job j = job(16, 4, 1, 4, 4, kComm);
  Placement cur = placed(j, 4, {{0, 0}, {0, 4}, {1, 0}, {1, 4}});
  for (Policy pol : {Policy::kTopo, Policy::kFirstFit}) {
    auto p = place_missing(c, s, j, cur, {true, true, false, false}, pol);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.error().code(), ENOSPC);
    EXPECT_EQ(
        p.error().message(),
        "job j16: needs 2 more pods of 4 NPUs, each on one node, around the 2 kept; the free chips hold 1");
  }
  // One missing pod of a 3-pod job fits: n1 has 5 free chips.
  Job three = job(12, 4, 1, 3, 4, kComm);
  auto one = place_missing(c, s, three, placed(three, 4, {{0, 0}, {0, 4}, {2, 0}}), {true, true, false},
                           Policy::kTopo);
  ASSERT_TRUE(one.ok()) << one.error().message();
  EXPECT_EQ(nodes_of(*one), (std::vector<int>{0, 1}));
}

TEST(PlaceMissing, AllKeptIsTheSamePlacementAndNoneKeptIsPlace) {
  Cluster c = make({node("n0", "atlas800t-a2", "l0"), node("n1", "atlas800t-a2", "l1"),
                    node("n2", "atlas800t-a2", "l0", "spine-0", {1, 6})});
  ClusterState s = ClusterState::initial(c);
  Job j = job(16, 4, 2, 2, 4, kComm);
  for (Policy pol : {Policy::kTopo, Policy::kFirstFit, Policy::kVolcano}) {
    SCOPED_TRACE(std::string(to_string(pol)));
    auto first = place(c, s, j, pol);
    ASSERT_TRUE(first.ok()) << first.error().message();
    ClusterState after = s;
    occupy(after, *first);
    auto same = place_missing(c, after, j, *first, std::vector<bool>(4, true), pol);
    ASSERT_TRUE(same.ok()) << same.error().message();
    EXPECT_EQ(same->chips, first->chips);
    EXPECT_DOUBLE_EQ(same->eval.cost.total, first->eval.cost.total);
    auto again = place_missing(c, s, j, *first, std::vector<bool>(4, false), pol);
    ASSERT_TRUE(again.ok()) << again.error().message();
    EXPECT_EQ(again->chips, first->chips) << "nothing kept: place() on the same state";
    EXPECT_EQ(again->policy, pol);
  }
}

TEST(PlaceMissing, AWrongCurrentPlacementOrKeepListIsEinval) {
  Cluster c = make({node("n0", "atlas800t-a2", "l0"), node("n1", "atlas800t-a2", "l0")});
  ClusterState s = ClusterState::initial(c);
  Job j = job(8, 4, 1, 2, 4, kComm);
  Placement good = placed(j, 4, {{0, 0}, {1, 0}});
  Placement split = good;
  split.chips[3] = {1, 7};
  Placement twice = placed(j, 4, {{0, 0}, {0, 2}});
  Placement short_one = good;
  short_one.chips.pop_back();
  Placement outside = good;
  outside.chips[0] = {0, 8};
  struct Case {
    Placement cur;
    std::vector<bool> keep;
    std::string want;
  };
  const std::vector<Case> cases = {
      {good, {true}, "job j8: keep_pod has 1 flags; the job has 2 pods"},
      {split, {true, false}, "job j8: kept pod 0 spans nodes n0 and n1; a pod lives on one node"},
      {twice, {true, true}, "job j8: kept pod 1: chip slot 2 of n0 is used twice"},
      {short_one, {true, true}, "job j8: the current placement has 7 ranks; the job has 8"},
      {outside, {true, false}, "job j8: kept pod 0: rank 0 has no chip of the cluster (node 0, slot 8)"},
  };
  for (const auto& k : cases) {
    auto p = place_missing(c, s, j, k.cur, k.keep, Policy::kTopo);
    ASSERT_FALSE(p.ok()) << k.want;
    EXPECT_EQ(p.error().code(), EINVAL);
    EXPECT_EQ(p.error().message(), k.want);
  }
}

// Random clusters (910B, A1, A3), a job placed by topo, some of its pods lose their chips and others take
// some free chips: the kept pods never move, no chip is used twice, new chips are free ones, every pod sits
// on one node, eval is the whole job's, and topo is never worse than first-fit nor fails where it places.
TEST(PlaceMissing, InvariantsOnRandomClusters) {
  std::mt19937 rng(7);
  const char* profiles[] = {"atlas800t-a2", "atlas800-9000", "atlas800t-a3"};
  int replaced = 0;
  for (int iter = 0; iter < 200; ++iter) {
    const char* prof = profiles[rng() % 3];
    std::vector<NodeSpec> specs;
    int nodes = 3 + static_cast<int>(rng() % 8);
    for (int i = 0; i < nodes; ++i) {
      specs.push_back(
          node("n" + std::to_string(i), prof, "l" + std::to_string(i % 3), "s" + std::to_string(i % 3 / 2)));
    }
    Cluster c = make(specs);
    ClusterState s = ClusterState::initial(c);
    static const int shapes[][4] = {
        {16, 4, 2, 2}, {16, 2, 1, 8}, {32, 8, 2, 2}, {24, 4, 3, 2}, {16, 8, 1, 2}};
    const auto& sh = shapes[rng() % 5];
    const int pods_of[] = {2, 4, 8};
    const int n = pods_of[rng() % 3];
    Job j =
        job(sh[0], sh[1], sh[2], sh[3], n, kComm, rng() % 2 == 0 ? RankOrder::kTpDpPp : RankOrder::kTpPpDp);
    auto first = place(c, s, j, Policy::kTopo);
    if (!first.ok()) continue;
    occupy(s, *first);
    const int pods = j.npus / n;
    std::vector<bool> keep(static_cast<std::size_t>(pods));
    for (int p = 0; p < pods; ++p) keep[static_cast<std::size_t>(p)] = rng() % 2 == 0;
    for (int r = 0; r < j.npus; ++r) {  // the missing pods' chips are free again ...
      const ChipRef& ch = first->chips[static_cast<std::size_t>(r)];
      if (!keep[static_cast<std::size_t>(r / n)])
        s.free[static_cast<std::size_t>(ch.node)] |= 1ULL << ch.slot;
    }
    for (auto& f : s.free) {  // ... and others take some free chips
      for (int slot = 0; slot < 16; ++slot) {
        if (rng() % 4 == 0) f &= ~(1ULL << slot);
      }
    }
    SCOPED_TRACE("iteration " + std::to_string(iter));
    auto topo = place_missing(c, s, j, *first, keep, Policy::kTopo);
    auto ff = place_missing(c, s, j, *first, keep, Policy::kFirstFit);
    ASSERT_EQ(topo.ok(), ff.ok()) << (topo.ok() ? ff.error().message() : topo.error().message());
    if (!topo.ok()) {
      EXPECT_EQ(topo.error().code(), ENOSPC) << topo.error().message();
      continue;
    }
    ++replaced;
    ClusterState usable = s;  // the free chips and the kept pods' own
    for (int p = 0; p < pods; ++p) {
      if (!keep[static_cast<std::size_t>(p)]) continue;
      EXPECT_EQ(pod_chips(*topo, p), pod_chips(*first, p)) << "kept pod " << p << " moved";
      for (const auto& [nd, slot] : pod_chips(*first, p))
        usable.free[static_cast<std::size_t>(nd)] |= 1ULL << slot;
    }
    expect_valid(c, usable, j, *topo);
    Evaluation e = evaluate(c, j, groups_of(j), topo->chips);
    EXPECT_DOUBLE_EQ(e.cost.total, topo->eval.cost.total);
    EXPECT_EQ(e.tp_groups_outside_hccs, topo->eval.tp_groups_outside_hccs);
    const bool ff_better = ff->eval.tp_groups_outside_hccs < topo->eval.tp_groups_outside_hccs ||
                           (ff->eval.tp_groups_outside_hccs == topo->eval.tp_groups_outside_hccs &&
                            ff->eval.cost.total < topo->eval.cost.total * (1 - 1e-9));
    EXPECT_FALSE(ff_better) << "topo worse than first-fit";
  }
  EXPECT_GT(replaced, 60);
}

// The oracle: on Atlas 800T A2 nodes (every two chips of a node joined by HCCS) the cost depends only on
// which node each missing pod takes, so a search over every assignment of the missing pods to nodes with
// room finds the optimum. place_missing must be within 2% of it on average and never leave more TP groups
// outside HCCS.
TEST(PlaceMissing, NearTheOptimumOnSmallUniformClusters) {
  std::mt19937 rng(std::getenv("ORACLE_SEED") ? std::atoi(std::getenv("ORACLE_SEED")) : 5);
  const CommBytes volumes[] = {{1e9, 2e8, 4.4e9}, {6e9, 1e9, 2e9}, {3e8, 3e8, 8e9}, {2e10, 5e8, 1e9}};
  static const int shapes[][4] = {{16, 4, 2, 2}, {16, 2, 2, 4}, {16, 8, 1, 2}, {24, 4, 3, 2}, {16, 4, 1, 4}};
  double ratio_sum = 0, worst = 1;
  int instances = 0, exact = 0;
  while (instances < 150) {
    std::vector<NodeSpec> specs;
    const int nodes = 3 + static_cast<int>(rng() % 4);
    const bool two_spines = rng() % 2 == 0;
    for (int i = 0; i < nodes; ++i) {
      std::vector<int> busy;
      for (int k = 0; k < 8; ++k) {
        if (rng() % 3 == 0) busy.push_back(k);
      }
      specs.push_back(node("n" + std::to_string(i), "atlas800t-a2", "l" + std::to_string(i % 3),
                           two_spines ? "s" + std::to_string(i % 3 == 2 ? 1 : 0) : "s0", busy));
    }
    Cluster c = make(specs);
    const auto& sh = shapes[rng() % 5];
    const int n = rng() % 2 == 0 ? 2 : 4;
    Job j = job(sh[0], sh[1], sh[2], sh[3], n, volumes[rng() % 4],
                rng() % 2 == 0 ? RankOrder::kTpDpPp : RankOrder::kTpPpDp);
    ClusterState s = ClusterState::initial(c);
    auto first = place(c, s, j, Policy::kFirstFit);  // a placement to start from, not a good one
    if (!first.ok()) continue;
    const int pods = j.npus / n;
    std::vector<bool> keep(static_cast<std::size_t>(pods), true);
    std::vector<int> missing;
    for (int p = 0; p < pods; ++p) {
      if (rng() % 3 == 0 && missing.size() < 3) {
        keep[static_cast<std::size_t>(p)] = false;
        missing.push_back(p);
      }
    }
    if (missing.empty()) continue;
    // The kept pods hold their chips; the missing pods' chips are free.
    std::vector<std::uint64_t> free = s.free;
    for (int r = 0; r < j.npus; ++r) {
      const ChipRef& ch = first->chips[static_cast<std::size_t>(r)];
      if (keep[static_cast<std::size_t>(r / n)])
        free[static_cast<std::size_t>(ch.node)] &= ~(1ULL << ch.slot);
    }
    ClusterState st{free};
    auto got = place_missing(c, st, j, *first, keep, Policy::kTopo);
    ASSERT_TRUE(got.ok()) << got.error().message();
    // Every assignment of the missing pods to nodes, each taking the lowest free chips left.
    const Groups g = groups_of(j);
    std::vector<ChipRef> chips = first->chips;
    Evaluation best;
    best.tp_groups_outside_hccs = std::numeric_limits<int>::max();
    std::function<void(std::size_t, std::vector<std::uint64_t>&)> search =
        [&](std::size_t i, std::vector<std::uint64_t>& f) {
          if (i == missing.size()) {
            Evaluation e = evaluate(c, j, g, chips);
            if (e.tp_groups_outside_hccs < best.tp_groups_outside_hccs ||
                (e.tp_groups_outside_hccs == best.tp_groups_outside_hccs && e.cost.total < best.cost.total))
              best = e;
            return;
          }
          for (std::size_t nd = 0; nd < f.size(); ++nd) {
            if (std::popcount(f[nd]) < n) continue;
            std::uint64_t before = f[nd];
            for (int k = 0; k < n; ++k) {
              int slot = __builtin_ctzll(f[nd]);
              f[nd] &= f[nd] - 1;
              chips[static_cast<std::size_t>(missing[i] * n + k)] = {static_cast<int>(nd), slot};
            }
            search(i + 1, f);
            f[nd] = before;
          }
        };
    search(0, free);
    EXPECT_LE(got->eval.tp_groups_outside_hccs, best.tp_groups_outside_hccs);
    EXPECT_GE(got->eval.cost.total, best.cost.total * (1 - 1e-9)) << "better than every assignment?";
    const double ratio = best.cost.total > 0 ? got->eval.cost.total / best.cost.total : 1.0;
    ratio_sum += ratio;
    worst = std::max(worst, ratio);
    exact += ratio <= 1 + 1e-9 ? 1 : 0;
    ++instances;
  }
  std::printf("place_missing oracle: %d instances, optimal on %d, mean %.4f of the optimum, worst %.4f\n",
              instances, exact, ratio_sum / instances, worst);
  EXPECT_LE(ratio_sum / instances, 1.02);
}

}  // namespace
}  // namespace ascend::topology
