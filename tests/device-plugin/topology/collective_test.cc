// The collective model (collective.h) pinned to hand-derived values of each formula, the library's choice
// of algorithm, the interconnect in chip files (old single-bandwidth files unchanged), and plan using it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ascend/common/yaml_json.h"
#include "ascend/topology/collective.h"
#include "ascend/topology/plan.h"

namespace ascend::topology {
namespace {

const std::string kChips = ASCEND_CHIPS_DIR;
const std::string kPlanFixtures = std::string(ASCEND_FIXTURES) + "/plan";

Link link(double gbps, double alpha_s, int links = 1, Fabric f = Fabric::kSwitch) {
  Link l;
  l.link_bytes_per_s = gbps * 1e9;
  l.bytes_per_s = l.link_bytes_per_s * links;
  l.links = links;
  l.alpha_s = alpha_s;
  l.fabric = f;
  return l;
}

TEST(Collective, RingIsTwoNMinusOneStepsOfOneNth) {
  // 4 ranks, 1 GB at 1 GB/s, 10 us: all-reduce 2 x 3 x (10 us + 0.25 s), a half 3 x (10 us + 0.25 s).
  EXPECT_DOUBLE_EQ(ring_time(Op::kAllReduce, 4, 1e9, link(1, 1e-5)), 1.50006);
  EXPECT_DOUBLE_EQ(ring_time(Op::kReduceScatter, 4, 1e9, link(1, 1e-5)), 0.75003);
  EXPECT_DOUBLE_EQ(ring_time(Op::kAllGather, 4, 1e9, link(1, 1e-5)), 0.75003);
  EXPECT_EQ(ring_time(Op::kAllReduce, 1, 1e9, link(1, 1e-5)), 0);
}

TEST(Collective, MeshDrivesEveryLinkAtOnce) {
  // 8 ranks, 7 links of 1 GB/s, 8 GB: each peer gets 1 GB over its own link: 1 s per half, 2 s all-reduce.
  Link mesh = link(1, 0, 7, Fabric::kFullMesh);
  EXPECT_DOUBLE_EQ(mesh_time(Op::kReduceScatter, 8, 8e9, mesh), 1.0);
  EXPECT_DOUBLE_EQ(mesh_time(Op::kAllReduce, 8, 8e9, mesh), 2.0);
  // 4 of the 8: 3 links used, 4 GB: 3/4 x 4 GB / 3 GB/s = 1 s.
  EXPECT_DOUBLE_EQ(mesh_time(Op::kReduceScatter, 4, 4e9, mesh), 1.0);
  // The latency is paid once per half.
  EXPECT_DOUBLE_EQ(mesh_time(Op::kAllReduce, 8, 8e9, link(1, 0.5, 7, Fabric::kFullMesh)), 3.0);
}

TEST(Collective, HalvingDoublingAndTreeHaveLogarithmicLatency) {
  // 8 ranks, 8 GB at 1 GB/s, 1 ms: 2 (3 ms + 7/8 x 8 s) = 14.006 s.
  EXPECT_DOUBLE_EQ(halving_doubling_time(Op::kAllReduce, 8, 8e9, link(1, 1e-3)), 14.006);
  EXPECT_DOUBLE_EQ(halving_doubling_time(Op::kAllGather, 8, 8e9, link(1, 1e-3)), 7.003);
  // 5 ranks: ceil(log2 5) = 3 steps each way; 1 GB at 1 GB/s: 2 (3 ms + 1 s).
  EXPECT_DOUBLE_EQ(double_binary_tree_time(5, 1e9, link(1, 1e-3)), 2.006);
  EXPECT_DOUBLE_EQ(send_time(1e9, link(2, 1e-3)), 0.501);
  // On a full mesh of 7 links of 1 GB/s a send to one peer has one link: 1 ms + 1 s, not 1/7 s.
  EXPECT_DOUBLE_EQ(send_time(1e9, link(1, 1e-3, 7, Fabric::kFullMesh)), 1.001);
}

Interconnect a2() {
  Interconnect ic;
  ic.library = Library::kHccl;
  ic.domain = {true, 7, 56, 0, Fabric::kFullMesh};
  ic.nic = {true, 1, 25, 0, Fabric::kSwitch};
  return ic;
}

TEST(Collective, HcclPicksMeshInsideAFullMeshServer) {
  GroupSpan g{8, 1, Level::kHccs, Level::kLeaf};
  CollectiveCost c = collective(Op::kAllReduce, g, 8e9, a2(), Bandwidth{});
  EXPECT_EQ(c.algorithm, Algorithm::kMesh);
  EXPECT_DOUBLE_EQ(c.seconds, 2 * 7.0 / 8 * 8e9 / (7 * 56e9));
}

TEST(Collective, HierarchicalIsReduceScatterInsideAllReduceAcrossAllGatherInside) {
  // 2 servers x 8: inside 7/8 x 8 GB / 392 GB/s each way; across, 1 GB per rank over 2 servers at 25 GB/s:
  // ring 2 x 1/2 x 1 GB / 25 GB/s = 0.04 s (halving-doubling ties; ring is kept).
  GroupSpan g{8, 2, Level::kHccs, Level::kLeaf};
  CollectiveCost c = collective(Op::kAllReduce, g, 8e9, a2(), Bandwidth{});
  EXPECT_EQ(c.algorithm, Algorithm::kHierarchical);
  EXPECT_EQ(c.inter, Algorithm::kRing);
  EXPECT_NEAR(c.seconds, 2 * 7e9 / 392e9 + 0.04, 1e-12);
}

TEST(Collective, NcclPicksTheTreeForSmallMessagesAndTheRingForLargeOnes) {
  Interconnect ic;
  ic.library = Library::kNccl;
  ic.domain = {true, 12, 25, 0, Fabric::kSwitch};
  ic.nic = {true, 1, 25, 100, Fabric::kSwitch};  // 100 us per hop
  GroupSpan g{1, 16, Level::kHccs, Level::kLeaf};
  // 1 kB: ring 30 x (100 us + 2.5 ns) = 3.0 ms against the tree's 2 (4 x 100 us + 40 ns) = 0.8 ms.
  CollectiveCost small = collective(Op::kAllReduce, g, 1e3, ic, Bandwidth{});
  EXPECT_EQ(small.algorithm, Algorithm::kDoubleBinaryTree);
  EXPECT_NEAR(small.seconds, 2 * (4 * 1e-4 + 1e3 / 25e9), 1e-15);
  // 1 GB: ring 30 x (100 us + 2.5 ms) = 78 ms against the tree's 2 (0.4 ms + 40 ms) = 80.8 ms.
  CollectiveCost large = collective(Op::kAllReduce, g, 1e9, ic, Bandwidth{});
  EXPECT_EQ(large.algorithm, Algorithm::kRing);
  EXPECT_NEAR(large.seconds, 30 * (1e-4 + 1e9 / (16 * 25e9)), 1e-12);
}

TEST(Collective, HcclHalvingDoublingOnlyForPowersOfTwo) {
  Interconnect ic = a2();
  ic.nic.latency_us = 100;
  EXPECT_EQ(collective(Op::kAllReduce, {1, 8, Level::kHccs, Level::kLeaf}, 1e3, ic, Bandwidth{}).algorithm,
            Algorithm::kHalvingDoubling);
  EXPECT_EQ(collective(Op::kAllReduce, {1, 6, Level::kHccs, Level::kLeaf}, 1e3, ic, Bandwidth{}).algorithm,
            Algorithm::kRing);
}

Result<ChipSpec> load(const std::string& path) {
  ASCEND_ASSIGN(nlohmann::json j, ascend::load_yaml_file(path), path);
  return chip_from_json(j);
}

TEST(ChipInterconnect, ShippedFilesLoadAndOldFilesHaveNone) {
  for (const char* f : {"atlas-800t-a2.yaml", "atlas-900-a2-pod.yaml", "atlas-900-a3-superpod.yaml",
                        "dgx-a100.yaml", "dgx-h100.yaml"}) {
    auto c = load(kChips + "/" + f);
    ASSERT_TRUE(c.ok()) << f << ": " << c.error().message();
    EXPECT_TRUE(c->interconnect.present()) << f;
  }
  auto old = load(kPlanFixtures + "/a100-80gb-selene.yaml");
  ASSERT_TRUE(old.ok()) << old.error().message();
  EXPECT_FALSE(old->interconnect.present());
  EXPECT_EQ(old->intra_node_gbps, 300);
}

TEST(ChipInterconnect, RejectsAnUnknownFabricNamingTheField) {
  nlohmann::json j = {{"name", "x"},
                      {"hbm_gib", 64},
                      {"peak_tflops_bf16", 100},
                      {"chips_per_node", 8},
                      {"interconnect", {{"domain", {{"link_gbps", 56}, {"fabric", "torus"}}}}}};
  auto c = chip_from_json(j);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("interconnect.domain.fabric"), std::string::npos) << c.error().message();
  EXPECT_NE(c.error().message().find("full_mesh"), std::string::npos);
}

PlanRequest llama70b(ChipSpec chip) {
  PlanRequest r;
  r.npus = 64;
  r.chip_spec = std::move(chip);
  r.model = {70e9, 80, 8192, 64, 4096, 32000, 1, 256};
  r.train.sequence_parallel = true;
  r.train.recompute = Recompute::kSelective;
  return r;
}

const PlanEntry* find(const PlanResult& p, int tp, int pp, int v) {
  for (const auto& e : p.entries) {
    if (e.fits && e.layout.tp == tp && e.layout.pp == pp && e.layout.v == v) return &e;
  }
  return nullptr;
}

TEST(PlanInterconnect, OldFilesKeepTheCostModelsTimes) {
  auto chip = load(kPlanFixtures + "/a100-80gb-selene.yaml");
  ASSERT_TRUE(chip.ok());
  auto p = plan(llama70b(*chip));
  ASSERT_TRUE(p.ok()) << p.error().message();
  for (const auto& e : p->entries) {
    if (!e.fits) continue;
    EXPECT_EQ(e.tp_collective.algorithm, Algorithm::kNone);
    EXPECT_NEAR(e.time.tp, e.eval.cost.tp, 1e-9 * e.eval.cost.tp);
    // The placement is made with v = 1 volumes; v changes only the pipeline's.
    if (e.layout.v == 1) {
      EXPECT_NEAR(e.time.pp, e.eval.cost.pp, 1e-9 * e.eval.cost.pp);
    }
  }
}

TEST(PlanInterconnect, TensorParallelOverTheWholeMeshIsSevenTimesCheaperThanOneLink) {
  // The same server with its 7 HCCS links (mesh) and with the old one-link ring at 56 GB/s: with no latency
  // the mesh's TP time is the ring's / 7 (2(n-1)/n M/(7 b) against 2(n-1)/n M/b).
  auto mesh = load(kChips + "/atlas-800t-a2.yaml");
  ASSERT_TRUE(mesh.ok());
  ChipSpec ring = *mesh;
  ring.interconnect = Interconnect{};
  ring.intra_node_gbps = 56;
  ring.inter_node_gbps = 25;
  auto pm = plan(llama70b(*mesh));
  auto pr = plan(llama70b(ring));
  ASSERT_TRUE(pm.ok() && pr.ok());
  const PlanEntry* m = find(*pm, 8, 4, 1);
  const PlanEntry* r = find(*pr, 8, 4, 1);
  ASSERT_TRUE(m != nullptr && r != nullptr);
  EXPECT_EQ(m->tp_collective.algorithm, Algorithm::kMesh);
  EXPECT_NEAR(m->time.tp, r->time.tp / 7, 1e-9 * r->time.tp);
  EXPECT_LT(m->time.total, r->time.total);
}

TEST(PlanExplain, NamesTheTermThatFavoursTheFirstLayoutMost) {
  PlanResult r;
  PlanEntry a;
  a.fits = true;
  a.time = {10, 1, 2, 0.5, 0.2, 13.7};  // compute, bubble, tp, pp, dp_exposed, total
  PlanEntry b = a;
  b.layout.tp = 4;
  b.time = {10, 3, 1, 0.5, 0.2, 14.7};  // 2 s more bubble, 1 s less tp
  r.entries = {a, b};
  Explanation x = explain(r);
  EXPECT_EQ(x.deciding_term, "bubble");
  EXPECT_DOUBLE_EQ(x.margin_s, 1.0);
  EXPECT_NE(x.text.find("decided by bubble (2 s less)"), std::string::npos) << x.text;
  EXPECT_NE(x.text.find("tp +1 s"), std::string::npos) << x.text;
  r.entries.pop_back();
  EXPECT_TRUE(explain(r).deciding_term.empty());
}

}  // namespace
}  // namespace ascend::topology
