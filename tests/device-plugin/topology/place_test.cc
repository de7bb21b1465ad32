// Whole-job placement: invariants of every policy on random clusters, and the scenarios each policy is
// defined by (topo's HCCS and locality choices, first-fit's order, Volcano's affinity scores).
#include "ascend/topology/place.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <random>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace ascend::topology {
namespace {

using testing::expect_valid;
using testing::job;
using testing::make;
using testing::node;

constexpr Policy kAll[] = {Policy::kTopo, Policy::kFirstFit, Policy::kVolcano};

// Random clusters of 2..12 nodes (910B, A1, A3), random busy and unhealthy chips, random jobs: every policy
// either places the job keeping every invariant, or says why not; topo places whenever first-fit can.
TEST(Place, InvariantsOnRandomClusters) {
  std::mt19937 rng(2024);
  const char* profiles[] = {"atlas800t-a2", "atlas800t-a2", "atlas800-9000", "atlas800t-a3"};
  int placed[3] = {0, 0, 0};
  for (int iter = 0; iter < 300; ++iter) {
    int nodes = 2 + static_cast<int>(rng() % 11);
    bool mixed = rng() % 3 == 0;
    const char* base = profiles[rng() % 4];
    std::vector<NodeSpec> specs;
    for (int i = 0; i < nodes; ++i) {
      const char* prof = mixed ? profiles[rng() % 4] : base;
      int size = std::string(prof) == "atlas800t-a3" ? 16 : 8;
      std::vector<int> busy, bad;
      for (int s = 0; s < size; ++s) {
        if (rng() % 4 == 0) busy.push_back(s);
        if (rng() % 40 == 0) bad.push_back(s);
      }
      int leaf = i / (1 + static_cast<int>(rng() % 4));
      specs.push_back(node(std::string("n") + std::to_string(i), prof,
                           std::string("leaf-") + std::to_string(leaf),
                           std::string("spine-") + std::to_string(leaf / 2), busy, bad));
    }
    auto cluster = make_cluster("r", {}, specs, builtin_profiles());
    if (!cluster.ok()) continue;  // a leaf drawn under two spines
    ClusterState state = ClusterState::initial(*cluster);
    static const int shapes[][4] = {{8, 8, 1, 1},  {16, 8, 2, 1}, {16, 4, 2, 2}, {32, 8, 2, 2}, {8, 2, 2, 2},
                                    {12, 4, 3, 1}, {4, 1, 1, 4},  {24, 4, 2, 3}, {16, 2, 1, 8}, {2, 2, 1, 1}};
    const auto& s = shapes[rng() % 10];
    int pods[] = {0, 1, 2, 4, 8};
    int per_pod = pods[rng() % 5];
    if (per_pod > 0 && s[0] % per_pod != 0) per_pod = 0;
    // Draws in statements of their own: a function's arguments are evaluated in an unspecified order.
    const CommBytes bytes = {1e9 * static_cast<int>(rng() % 3), 2e8 * static_cast<int>(rng() % 3),
                             4e9 * static_cast<int>(rng() % 3)};
    const RankOrder order = rng() % 2 == 0 ? RankOrder::kTpDpPp : RankOrder::kTpPpDp;
    Job j = job(s[0], s[1], s[2], s[3], per_pod, bytes, order);
    Result<Placement> got[3] = {Error::invalid(""), Error::invalid(""), Error::invalid("")};
    for (int k = 0; k < 3; ++k) {
      got[k] = place(*cluster, state, j, kAll[k]);
      if (!got[k].ok()) {
        EXPECT_TRUE(got[k].error().code() == ENOSPC || got[k].error().code() == EINVAL)
            << got[k].error().message();
        EXPECT_NE(got[k].error().message().find("job " + j.name), std::string::npos);
        continue;
      }
      ++placed[k];
      SCOPED_TRACE(std::string(to_string(kAll[k])) + " iteration " + std::to_string(iter));
      EXPECT_EQ(got[k]->policy, kAll[k]);
      expect_valid(*cluster, state, j, *got[k]);
      Evaluation again = evaluate(*cluster, j, groups_of(j), got[k]->chips);
      EXPECT_DOUBLE_EQ(again.cost.total, got[k]->eval.cost.total);
      EXPECT_EQ(again.tp_groups_outside_hccs, got[k]->eval.tp_groups_outside_hccs);
      // occupy() then release() gives the state back; occupy() takes exactly N chips.
      ClusterState s2 = state;
      occupy(s2, *got[k]);
      EXPECT_EQ(s2.free_chips(), state.free_chips() - j.npus);
      release(s2, *got[k]);
      EXPECT_EQ(s2.free, state.free);
    }
    if (got[1].ok()) {
      ASSERT_TRUE(got[0].ok()) << "topo must place what first-fit places: " << got[0].error().message();
      // topo is never worse than first-fit: fewer TP groups outside HCCS, or as many at no higher cost.
      const auto& t = got[0]->eval;
      const auto& f = got[1]->eval;
      EXPECT_TRUE(t.tp_groups_outside_hccs < f.tp_groups_outside_hccs ||
                  (t.tp_groups_outside_hccs == f.tp_groups_outside_hccs &&
                   t.cost.total <= f.cost.total * (1 + 1e-9)));
    }
  }
  EXPECT_GT(placed[0], 100);  // the test really placed jobs
  EXPECT_GT(placed[1], 100);
  EXPECT_GT(placed[2], 50);
}

// A1 node with ring {0-3} half busy: first-fit's 4 lowest free chips straddle the rings; topo takes the free
// ring; Volcano's rule (4 chips = a whole ring) does the same.
TEST(Place, TopoKeepsTpInsideAnHccsRing) {
  Cluster c = make({node("a1", "atlas800-9000", "l0", "s0", {2, 3})});
  ClusterState s = ClusterState::initial(c);
  Job j = job(4, 4, 1, 1);
  auto ff = place(c, s, j, Policy::kFirstFit);
  auto topo = place(c, s, j, Policy::kTopo);
  auto vc = place(c, s, j, Policy::kVolcano);
  ASSERT_TRUE(ff.ok() && topo.ok() && vc.ok());
  EXPECT_EQ(ff->eval.tp_groups_outside_hccs, 1);
  EXPECT_EQ(topo->eval.tp_groups_outside_hccs, 0);
  EXPECT_EQ(vc->eval.tp_groups_outside_hccs, 0);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(topo->chips[static_cast<std::size_t>(r)], (ChipRef{0, 4 + r}));
}

// tp 8 with pods of 4: the two pods of a TP group must share a node to keep TP on HCCS. First-fit and
// Volcano fill the half-free nodes; topo puts both pods on one node.
TEST(Place, TopoPutsThePodsOfATpGroupOnOneNode) {
  Cluster c =
      make({node("a", "atlas800t-a2", "l0", "s0", {0, 1, 2, 3}),
            node("b", "atlas800t-a2", "l0", "s0", {4, 5, 6, 7}), node("c", "atlas800t-a2", "l0", "s0")});
  ClusterState s = ClusterState::initial(c);
  Job j = job(8, 8, 1, 1, 4);
  auto ff = place(c, s, j, Policy::kFirstFit);
  auto vc = place(c, s, j, Policy::kVolcano);
  auto topo = place(c, s, j, Policy::kTopo);
  ASSERT_TRUE(ff.ok() && topo.ok() && vc.ok());
  EXPECT_EQ(ff->eval.tp_groups_outside_hccs, 1);
  EXPECT_EQ(vc->eval.tp_groups_outside_hccs, 1);
  EXPECT_EQ(topo->eval.tp_groups_outside_hccs, 0);
  EXPECT_EQ(nodes_of(*topo), std::vector<int>{2});
  EXPECT_LT(topo->eval.cost.tp, ff->eval.cost.tp);
}

// DP groups of 4 pods: leaf l0 has 3 free nodes, leaf l1 has 4. First-fit spreads a DP group over both
// leaves (spine bandwidth); topo keeps it inside l1.
TEST(Place, TopoKeepsADpGroupInsideALeaf) {
  std::vector<NodeSpec> specs;
  specs.reserve(7);
  for (int i = 0; i < 3; ++i)
    specs.push_back(node(std::string("x") + std::to_string(i), "atlas800t-a2", "l0"));
  for (int i = 0; i < 4; ++i)
    specs.push_back(node(std::string("y") + std::to_string(i), "atlas800t-a2", "l1"));
  Cluster c = make(specs);
  ClusterState s = ClusterState::initial(c);
  Job j = job(32, 8, 1, 4);
  auto ff = place(c, s, j, Policy::kFirstFit);
  auto topo = place(c, s, j, Policy::kTopo);
  ASSERT_TRUE(ff.ok() && topo.ok());
  EXPECT_DOUBLE_EQ(ff->eval.cost.dp, ring_cost(4, 4.4e9, 12.5e9));
  EXPECT_DOUBLE_EQ(topo->eval.cost.dp, ring_cost(4, 4.4e9, 25e9));
  EXPECT_EQ(nodes_of(*topo), (std::vector<int>{3, 4, 5, 6}));
}

// Pipeline: 2 stages x 2 replicas with pods of 8 on two spines of 2 free nodes each. The DP groups (one per
// stage) must each share a leaf; putting a whole pipeline (not a stage) on a leaf would move the heavy DP
// traffic to the core.
TEST(Place, TopoWeighsDpAgainstPp) {
  Cluster c = make({node("a0", "atlas800t-a2", "la", "s0"), node("a1", "atlas800t-a2", "la", "s0"),
                    node("b0", "atlas800t-a2", "lb", "s1"), node("b1", "atlas800t-a2", "lb", "s1")});
  ClusterState s = ClusterState::initial(c);
  Job heavy_dp = job(32, 8, 2, 2, 8, {1e9, 1e8, 8e9});
  auto p = place(c, s, heavy_dp, Policy::kTopo);
  ASSERT_TRUE(p.ok());
  EXPECT_DOUBLE_EQ(p->eval.cost.dp, ring_cost(2, 8e9, 25e9));
  EXPECT_DOUBLE_EQ(p->eval.cost.pp, 1e8 / 6.25e9);
  Job heavy_pp = job(32, 8, 2, 2, 8, {1e9, 8e9, 1e8});
  auto q = place(c, s, heavy_pp, Policy::kTopo);
  ASSERT_TRUE(q.ok());
  EXPECT_DOUBLE_EQ(q->eval.cost.pp, 8e9 / 25e9);
  EXPECT_DOUBLE_EQ(q->eval.cost.dp, ring_cost(2, 1e8, 6.25e9));
}

TEST(Place, FirstFitTakesTheFirstFreeChipsInNodeOrder) {
  Cluster c = make({node("a", "atlas800t-a2", "l0", "s0", {0, 1, 2, 3, 4, 5}),
                    node("b", "atlas800t-a2", "l0", "s0", {1}), node("c", "atlas800t-a2", "l0", "s0")});
  ClusterState s = ClusterState::initial(c);
  auto p = place(c, s, job(8, 2, 1, 4, 2), Policy::kFirstFit);
  ASSERT_TRUE(p.ok());
  std::vector<ChipRef> want = {{0, 6}, {0, 7}, {1, 0}, {1, 2}, {1, 3}, {1, 4}, {1, 5}, {1, 6}};
  EXPECT_EQ(p->chips, want);
}

// Volcano (module910bx8): score = 8 x (healthy chips - (free - asked)): the fullest node that fits wins,
// and a node with an unhealthy chip loses to a healthy one.
TEST(Place, VolcanoPrefersTheFullestHealthyNode) {
  Cluster c =
      make({node("free", "atlas800t-a2", "l0"), node("half", "atlas800t-a2", "l0", "spine-0", {0, 1, 2, 3}),
            node("tight", "atlas800t-a2", "l0", "spine-0", {0, 1, 2, 3, 4, 5}),
            node("sick", "atlas800t-a2", "l0", "spine-0", {0, 1, 2, 3, 4}, {5})});
  ClusterState s = ClusterState::initial(c);
  auto p = place(c, s, job(2, 2, 1, 1), Policy::kVolcano);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->chips, (std::vector<ChipRef>{{2, 6}, {2, 7}}));
  // Four pods of 2 (a distributed job): tight, then sick (7 healthy x 8 - 0) before half, then half twice.
  auto q = place(c, s, job(8, 2, 1, 4, 2), Policy::kVolcano);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(nodes_of(*q), (std::vector<int>{2, 3, 1}));
}

// Volcano (module910x8) on Ascend 910: a 1-chip pod goes to the node whose best ring has exactly 1 free
// chip, and to that ring; a distributed job must use pods of 8.
TEST(Place, VolcanoAscend910RingAffinity) {
  Cluster c = make({node("n0", "atlas800-9000", "l0", "s0", {0, 1}),          // rings free 2 / 4
                    node("n1", "atlas800-9000", "l0", "s0", {4, 5, 6}),       // rings free 4 / 1
                    node("n2", "atlas800-9000", "l0", "s0", {0, 1, 2, 4})});  // rings free 1 / 3
  ClusterState s = ClusterState::initial(c);
  auto p = place(c, s, job(1, 1, 1, 1), Policy::kVolcano);
  ASSERT_TRUE(p.ok());
  // n1 and n2 both score 8 x (8 x 4 - 0); the first in order wins (Volcano breaks ties at random).
  EXPECT_EQ(p->chips, (std::vector<ChipRef>{ChipRef{1, 7}}));
  auto two = place(c, s, job(2, 2, 1, 1), Policy::kVolcano);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->chips, (std::vector<ChipRef>{{0, 2}, {0, 3}}));  // a ring with exactly 2 free
  Cluster big = make({node("a", "atlas800-9000", "l0"), node("b", "atlas800-9000", "l0")});
  auto bad = place(big, ClusterState::initial(big), job(16, 4, 1, 4, 4), Policy::kVolcano);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), EINVAL);
  EXPECT_NE(bad.error().message().find("8 x N"), std::string::npos) << bad.error().message();
}

TEST(Place, InfeasibleSaysWhy) {
  Cluster c = make({node("a", "atlas800t-a2", "l0", "s0", {0}), node("b", "atlas800t-a2", "l0", "s0", {0})});
  ClusterState s = ClusterState::initial(c);
  for (Policy pol : kAll) {
    auto p = place(c, s, job(16, 8, 1, 2), pol);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.error().code(), ENOSPC) << p.error().message();
  }
  auto p = place(c, s, job(8, 8, 1, 1), Policy::kTopo);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message().find("needs 1 pods of 8 NPUs"), std::string::npos) << p.error().message();
  auto q = place(c, s, job(16, 16, 1, 1, 16), Policy::kTopo);
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.error().message().find("larger than any node"), std::string::npos) << q.error().message();
}

TEST(Place, JsonForm) {
  Cluster c = make({node("node-000", "atlas800t-a2", "l0", "s0", {0, 1})});
  auto p = place(c, ClusterState::initial(c), job(2, 2, 1, 1), Policy::kTopo);
  ASSERT_TRUE(p.ok());
  auto j = to_json(c, *p);
  EXPECT_EQ(j["job"], "j2");
  EXPECT_EQ(j["policy"], "topo");
  ASSERT_EQ(j["ranks"].size(), 2U);
  EXPECT_EQ(j["ranks"][0]["rank"], 0);
  EXPECT_EQ(j["ranks"][0]["pod"], 0);
  EXPECT_EQ(j["ranks"][0]["node"], "node-000");
  EXPECT_EQ(j["ranks"][1]["device_id"], p->chips[1].slot);
  EXPECT_DOUBLE_EQ(j["cost"]["tp"].get<double>(), ring_cost(2, 1e9, 56e9));
  EXPECT_DOUBLE_EQ(j["cost"]["total"].get<double>(), p->eval.cost.total);
  EXPECT_EQ(j["tp_groups_outside_hccs"], 0);
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"job", "policy", "ranks", "cost", "tp_groups_outside_hccs"}));
}

}  // namespace
}  // namespace ascend::topology
