// The cluster and job models (file forms, defaults, errors) and the cost model, against hand computations.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "ascend/topology/cluster.h"
#include "ascend/topology/cost.h"
#include "ascend/topology/job.h"
#include "test_util.h"

namespace ascend::topology {
namespace {

using nlohmann::json;
using testing::job;
using testing::make;
using testing::node;

TEST(ClusterFile, DefaultsAndGenerate) {
  json j = json::parse(R"({
    "name": "pod-a",
    "nodes": [{"name": "node-x", "profile": "atlas800t-a2", "leaf": "leaf-a", "busy": [0, 3], "unhealthy": [5]}],
    "generate": [{"profile": "atlas800-9000", "count": 5, "nodes_per_leaf": 2, "leaves_per_spine": 2, "prefix": "g-"}]
  })");
  auto c = cluster_from_json(j, builtin_profiles());
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->name, "pod-a");
  ASSERT_EQ(c->nodes.size(), 6U);
  EXPECT_EQ(c->nodes[0].name, "node-x");
  EXPECT_EQ(c->spines[static_cast<std::size_t>(c->nodes[0].spine)], "spine-0");  // default
  EXPECT_EQ(c->nodes[0].busy, 0b1001U);
  EXPECT_EQ(c->nodes[0].unhealthy, 0b100000U);
  EXPECT_EQ(c->initially_free(0), 0xFFU & ~0b101001U);
  // Generated: names padded, 2 nodes per leaf, 2 leaves per spine; numbering continues after the listed
  // nodes.
  std::vector<std::string> names, leaves, spines;
  for (std::size_t i = 1; i < 6; ++i) {
    names.push_back(c->nodes[i].name);
    leaves.push_back(c->leaves[static_cast<std::size_t>(c->nodes[i].leaf)]);
    spines.push_back(c->spines[static_cast<std::size_t>(c->nodes[i].spine)]);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"g-000", "g-001", "g-002", "g-003", "g-004"}));
  EXPECT_EQ(leaves, (std::vector<std::string>{"leaf-01", "leaf-01", "leaf-02", "leaf-02", "leaf-03"}));
  EXPECT_EQ(spines, (std::vector<std::string>{"spine-1", "spine-1", "spine-1", "spine-1", "spine-2"}));
  EXPECT_EQ(c->bw.gbps, (Bandwidth{}.gbps));
  EXPECT_EQ(c->max_node_size(), 8);
}

TEST(ClusterFile, Bandwidth) {
  json j = json::parse(R"({"bandwidth_gbps": {"leaf": 50, "core": 3},
                           "nodes": [{"name": "a", "profile": "atlas800t-a2", "leaf": "l"}]})");
  auto c = cluster_from_json(j, builtin_profiles());
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->bw.gbps, (std::array<double, 6>{224, 56, 16, 50, 12.5, 3}));
}

TEST(ClusterFile, ErrorsNameTheField) {
  struct Case {
    const char* json;
    const char* message;
  };
  const Case cases[] = {
      {R"({"nodes": [{"name": "a", "profile": "atlas800t-a2", "leaf": "l", "busy": [1, 8]}]})",
       "nodes[0].busy[1]: chip 8 is not on atlas800t-a2"},
      {R"({"nodes": [{"name": "a", "profile": "atlas800t-a9", "leaf": "l"}]})", "nodes[0].profile: "},
      {R"({"nodes": [{"name": "a", "profile": "atlas800t-a2"}]})",
       "nodes[0].leaf: required field is missing"},
      {R"({"nodes": [{"name": "a", "profile": "atlas800t-a2", "leaf": "l", "color": 1}]})",
       "nodes[0].color: unknown field"},
      {R"({"nodes": [{"name": "a", "profile": "atlas800t-a2", "leaf": "l"}, {"name": "a", "profile": "atlas800t-a2", "leaf": "l"}]})",
       "nodes[1].name: duplicate node name a"},
      {R"({"nodes": [{"name": "a", "profile": "atlas800t-a2", "leaf": "l"}, {"name": "b", "profile": "atlas800t-a2", "leaf": "l", "spine": "s2"}]})",
       "nodes[1].spine: leaf l is under spine-0"},
      {R"({"bandwidth_gbps": {"leaf": -1}, "nodes": []})", "bandwidth_gbps.leaf: must be positive"},
      {R"({"nodes": []})", "no nodes"},
      {R"({"generate": [{"profile": "atlas800t-a2", "count": 0}]})", "generate[0].count: 0 is out of range"},
      {R"({"nodes": {"name": "a"}})", "nodes: expected a list of nodes"},
      {R"([1, 2])", "expected a mapping"},
  };
  for (const auto& k : cases) {
    auto c = cluster_from_json(json::parse(k.json), builtin_profiles());
    ASSERT_FALSE(c.ok()) << k.json;
    EXPECT_NE(c.error().message().find(k.message), std::string::npos) << c.error().message();
    EXPECT_EQ(c.error().code(), EINVAL);
  }
  // With a locator the line comes first.
  auto c = cluster_from_json(json::parse(cases[0].json), builtin_profiles(),
                             [](const FieldPath& p) { return p.str() == "nodes[0].busy[1]" ? 12 : 0; });
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message().rfind("line 12: nodes[0].busy[1]: ", 0), 0U) << c.error().message();
}

TEST(ClusterModel, Levels) {
  Cluster c = make({node("a", "atlas800-9000", "l0", "s0"), node("b", "atlas800t-a2", "l0", "s0"),
                    node("c", "atlas800t-a3", "l1", "s0"), node("d", "atlas800t-a2", "l2", "s1")});
  EXPECT_EQ(c.level(0, 0, 0, 3), Level::kHccs);  // A1 ring
  EXPECT_EQ(c.level(0, 0, 0, 4), Level::kPcie);  // across rings
  EXPECT_EQ(c.level(1, 0, 1, 7), Level::kHccs);  // 910B mesh
  EXPECT_EQ(c.level(2, 0, 2, 1), Level::kSio);   // A3 dies of one card
  EXPECT_EQ(c.level(2, 0, 2, 2), Level::kHccs);  // A3 HCCS switch
  EXPECT_EQ(c.level(0, 0, 1, 0), Level::kLeaf);
  EXPECT_EQ(c.level(0, 0, 2, 0), Level::kSpine);
  EXPECT_EQ(c.level(0, 0, 3, 0), Level::kCore);
}

TEST(JobFile, ParsesAndDerivesVolumes) {
  auto j = job_from_json(json::parse(R"({"name": "llama-70b", "npus": 64, "tp": 8, "pp": 4, "dp": 2,
      "model": {"params": 70e9, "layers": 80, "hidden": 8192, "seq_len": 4096, "micro_batch": 1, "global_batch": 512}})"));
  ASSERT_TRUE(j.ok()) << j.error().message();
  EXPECT_EQ(j->order, RankOrder::kTpDpPp);
  EXPECT_EQ(j->npus_per_pod, 0);
  double m = 512.0 / (1 * 2);
  EXPECT_DOUBLE_EQ(j->comm.tp, 8.0 * 1 * 4096 * 8192 * (80.0 / 4) * m);
  EXPECT_DOUBLE_EQ(j->comm.pp, 4.0 * 1 * 4096 * 8192 * m);
  EXPECT_DOUBLE_EQ(j->comm.dp, 2.0 * 70e9 / (8 * 4));
  // comm_bytes keys override what the model gives.
  auto k = job_from_json(json::parse(R"({"npus": 8, "tp": 8, "comm_bytes": {"tp": 5},
      "model": {"params": 1e9, "layers": 2, "hidden": 4, "seq_len": 8}})"));
  ASSERT_TRUE(k.ok()) << k.error().message();
  EXPECT_EQ(k->comm.tp, 5);
  EXPECT_EQ(k->dp, 1);  // defaults to npus / (tp x pp)
  EXPECT_DOUBLE_EQ(k->comm.dp, 2.0 * 1e9 / 8);
}

TEST(JobFile, Errors) {
  struct Case {
    const char* json;
    const char* message;
  };
  const Case cases[] = {
      {R"({"npus": 64, "tp": 8, "pp": 4, "dp": 4, "comm_bytes": {}})",
       "npus: 64 is not tp x pp x dp = 8 x 4 x 4"},
      {R"({"npus": 8, "tp": 3, "comm_bytes": {}})", "npus: 8 is not a multiple of tp x pp = 3"},
      {R"({"npus": 8, "order": "pp-dp-tp", "comm_bytes": {}})", "order: unknown rank order 'pp-dp-tp'"},
      {R"({"npus": 8, "npus_per_pod": 3, "comm_bytes": {}})", "npus_per_pod: 3 does not divide npus 8"},
      {R"({"npus": 8})", "comm_bytes: give comm_bytes or model"},
      {R"({"npus": 8, "comm_bytes": {"tp": -1}})", "comm_bytes.tp: must not be negative"},
      {R"({"npus": 8, "model": {"params": 1e9, "layers": 2, "hidden": 4}})",
       "model.seq_len: required field is missing"},
      {R"({"npus": "eight", "comm_bytes": {}})", "npus: expected an integer"},
      {R"({"npus": 8, "comm_bytes": {}, "gpus": 8})", "gpus: unknown field"},
  };
  for (const auto& k : cases) {
    auto j = job_from_json(json::parse(k.json));
    ASSERT_FALSE(j.ok()) << k.json;
    EXPECT_NE(j.error().message().find(k.message), std::string::npos) << j.error().message();
  }
}

TEST(JobModel, RankOrdersAndGroups) {
  Job a = job(16, 2, 2, 4);  // tp-dp-pp: rank = t + 2 (d + 4 p)
  EXPECT_EQ(rank_of(a, {1, 3, 1}), 1 + 2 * (3 + 4 * 1));
  Job b = job(16, 2, 2, 4, 0, {}, RankOrder::kTpPpDp);  // rank = t + 2 (p + 2 d)
  EXPECT_EQ(rank_of(b, {1, 3, 1}), 1 + 2 * (1 + 2 * 3));
  for (const Job& j : {a, b}) {
    for (int r = 0; r < j.npus; ++r) EXPECT_EQ(rank_of(j, coord_of(j, r)), r);
  }
  Groups g = groups_of(a);
  ASSERT_EQ(g.tp.size(), 8U);
  ASSERT_EQ(g.dp.size(), 4U);
  ASSERT_EQ(g.pp.size(), 8U);
  EXPECT_EQ(g.tp[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(g.dp[0], (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(g.dp[1], (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(g.pp[0], (std::pair<int, int>{0, 8}));
  Groups h = groups_of(b);
  EXPECT_EQ(h.dp[0], (std::vector<int>{0, 4, 8, 12}));
  EXPECT_EQ(h.pp[0], (std::pair<int, int>{0, 2}));
}

// The cost model by hand: 2 nodes of 910B on one leaf, A1 node on another spine.
TEST(CostModel, MatchesHandComputation) {
  Cluster c = make({node("a", "atlas800t-a2", "l0", "s0"), node("b", "atlas800t-a2", "l0", "s0"),
                    node("c", "atlas800-9000", "l1", "s1")});
  Job j = job(8, 4, 2, 1, 4, {1e9, 2e8, 4.4e9});  // TP groups {0..3} {4..7}, pp pairs (r, r+4)
  Groups g = groups_of(j);
  // Ranks 0-3 on node a, 4-7 on node b.
  std::vector<ChipRef> chips(8);
  for (int r = 0; r < 8; ++r) chips[static_cast<std::size_t>(r)] = {r / 4, r % 4};
  Evaluation e = evaluate(c, j, g, chips);
  EXPECT_DOUBLE_EQ(e.cost.tp, 2.0 * 3 / 4 * 1e9 / 56e9);
  EXPECT_DOUBLE_EQ(e.cost.pp, 2e8 / 25e9);
  EXPECT_DOUBLE_EQ(e.cost.dp, 0);  // dp = 1
  EXPECT_DOUBLE_EQ(e.cost.total, e.cost.tp + e.cost.pp);
  EXPECT_EQ(e.tp_groups_outside_hccs, 0);
  // Second TP group straddles the A1 rings (slots 2..5 of node c): slowest hop is PCIe.
  for (int r = 4; r < 8; ++r) chips[static_cast<std::size_t>(r)] = {2, r - 2};
  e = evaluate(c, j, g, chips);
  EXPECT_DOUBLE_EQ(e.cost.tp, 2.0 * 3 / 4 * 1e9 / 16e9);
  EXPECT_DOUBLE_EQ(e.cost.pp, 2e8 / 6.25e9);  // a (spine s0) to c (spine s1): core
  EXPECT_EQ(e.tp_groups_outside_hccs, 1);
  // DP ring: the slowest hop of the ring in rank order counts, including the hop back to the start.
  Job d = job(4, 1, 1, 4, 1, {0, 0, 1e9});
  std::vector<ChipRef> dchips = {{0, 0}, {0, 1}, {1, 0}, {1, 1}};
  e = evaluate(c, d, groups_of(d), dchips);
  EXPECT_DOUBLE_EQ(e.cost.dp, 2.0 * 3 / 4 * 1e9 / 25e9);
  dchips[3] = {2, 0};
  e = evaluate(c, d, groups_of(d), dchips);
  EXPECT_DOUBLE_EQ(e.cost.dp, 2.0 * 3 / 4 * 1e9 / 6.25e9);
  EXPECT_DOUBLE_EQ(ring_cost(1, 1e9, 1e9), 0);
}

}  // namespace
}  // namespace ascend::topology
