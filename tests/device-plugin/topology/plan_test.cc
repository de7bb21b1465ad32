// The step model and the planner, against numbers worked out by hand in the comments (no value here is
// read back from the code under test).
//
// The paper model used throughout: L = 4 layers, h = 64, a = 4 heads, s = 128, V = 1000, b = 2, B = 16,
// P = 12 L h^2 + 2 V h = 4 x 49152 + 128000 = 324608 (49152 parameters per layer, 64000 each for the
// embedding and the output layer). Layout tp 2 x pp 2 x dp 2, v 1: m = B / (b dp) = 4 micro-batches,
// 2 layers per stage, s b h = 128 x 2 x 64 = 16384.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "ascend/topology/place.h"
#include "ascend/topology/plan.h"

namespace ascend::topology {
namespace {

using nlohmann::json;

ModelShape paper_model() {
  return {324608, 4, 64, 4, 128, 1000, 2, 16};
}

constexpr Layout kT2P2D2{2, 2, 2, 1};

TEST(StepModel, ParametersPerStage) {
  ModelShape m = paper_model();
  EXPECT_EQ(micro_batches(m, kT2P2D2), 4);
  // First stage: 2 layers + embedding = 98304 + 64000, over tp 2. The last: 2 layers + output layer.
  EXPECT_DOUBLE_EQ(stage_params(m, kT2P2D2, 0), 81152);
  EXPECT_DOUBLE_EQ(stage_params(m, kT2P2D2, 1), 81152);
  // One stage holds everything: 324608 / 2.
  EXPECT_DOUBLE_EQ(stage_params(m, {2, 1, 4, 1}, 0), 162304);
  // Uneven: 5 layers over 2 stages is 3 + 2.
  EXPECT_EQ(stage_layers(5, 2, 0), 3);
  EXPECT_EQ(stage_layers(5, 2, 1), 2);
}

// Korthikanti et al. 2022, Table 2, with s b h = 16384, t = 2, 5 a s / h = 5 x 4 x 128 / 64 = 40.
TEST(StepModel, ActivationsPerLayer) {
  ModelShape m = paper_model();
  struct Case {
    bool sp;
    Recompute r;
    double bytes;
  };
  const Case cases[] = {
      {false, Recompute::kNone, 16384 * (10 + 24 / 2.0 + 40 / 2.0)},  // sbh(10 + 24/t + 5as/(ht)) = 688128
      {true, Recompute::kNone, 16384 * (34 + 40) / 2.0},              // sbh(34 + 5as/h)/t = 606208
      {false, Recompute::kSelective, 16384 * (10 + 24 / 2.0)},        // sbh(10 + 24/t) = 360448
      {true, Recompute::kSelective, 16384 * 34 / 2.0},                // 34 sbh/t = 278528
      {false, Recompute::kFull, 2 * 16384},                           // the layer's bf16 input
      {true, Recompute::kFull, 2 * 16384 / 2.0},
  };
  for (const auto& c : cases) {
    TrainOptions o;
    o.sequence_parallel = c.sp;
    o.recompute = c.r;
    EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, o, 2), c.bytes) << c.sp << " " << to_string(c.r);
  }
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, {}, 2), 688128);
}

// 1F1B: stage i holds min(p - i, m) micro-batches. Interleaved, p = 4, v = 2, m = 8: stage 0 runs
// 2(p-1) + (v-1)p + 1 = 11 chunks ahead = 5.5 micro-batches of its layers, which is Korthikanti's
// p (1 + (p-1)/(p v)) = 4 x 11/8; the last stage 2 x 0 + 4 + 1 = 5 chunks = 2.5.
TEST(StepModel, MicroBatchesInFlight) {
  EXPECT_DOUBLE_EQ(in_flight(4, 1, 8, 0), 4);
  EXPECT_DOUBLE_EQ(in_flight(4, 1, 8, 3), 1);
  EXPECT_DOUBLE_EQ(in_flight(4, 1, 2, 0), 2);  // fewer micro-batches than stages
  EXPECT_DOUBLE_EQ(in_flight(4, 2, 8, 0), 5.5);
  EXPECT_DOUBLE_EQ(in_flight(4, 2, 8, 3), 2.5);
  EXPECT_DOUBLE_EQ(in_flight(1, 1, 8, 0), 1);
}

// Stage 0: weights 2 x 81152 = 162304, gradients the same, Adam 12 x 81152 = 973824, activations
// 688128 x 2 layers x 2 in flight = 2752512: total 4050944. Stage 1 (last): 1 in flight = 1376256 plus the
// fp32 logits 4 s b V / t = 512000: total 324608 + 973824 + 1888256 = 3186688. The peak is stage 0.
TEST(StepModel, MemoryOfTheLargestStage) {
  ModelShape m = paper_model();
  Memory first = stage_memory(m, {}, kT2P2D2, 0);
  EXPECT_DOUBLE_EQ(first.weights, 162304);
  EXPECT_DOUBLE_EQ(first.gradients, 162304);
  EXPECT_DOUBLE_EQ(first.optimizer, 973824);
  EXPECT_DOUBLE_EQ(first.activations, 2752512);
  EXPECT_DOUBLE_EQ(first.total, 4050944);
  EXPECT_DOUBLE_EQ(first.in_flight, 2);
  Memory last = stage_memory(m, {}, kT2P2D2, 1);
  EXPECT_DOUBLE_EQ(last.activations, 1888256);
  EXPECT_DOUBLE_EQ(last.total, 3186688);
  Memory peak = peak_memory(m, {}, kT2P2D2);
  EXPECT_EQ(peak.stage, 0);
  EXPECT_DOUBLE_EQ(peak.total, 4050944);
  // ZeRO-1 shards Adam over dp 2: 486912.
  TrainOptions zero;
  zero.optimizer_parallel = true;
  EXPECT_DOUBLE_EQ(stage_memory(m, zero, kT2P2D2, 0).optimizer, 486912);
  // Full recompute keeps 2 sbh per layer and in flight micro-batch (32768 x 2 x 2 = 131072) and one layer's
  // full activations while it is recomputed (688128): 819200.
  TrainOptions full;
  full.recompute = Recompute::kFull;
  EXPECT_DOUBLE_EQ(stage_memory(m, full, kT2P2D2, 0).activations, 819200);
}

// The issue's point: under 1F1B the first stage holds p micro-batches of L/p layers, so its activations
// do not shrink with p. Paper model, tp 1, 16 micro-batches: per layer sbh(34 + 5as/h) = 16384 x 74 =
// 1212416 bytes; L x that = 4849664 for pp 1, 2 and 4 alike. With only 2 micro-batches per pipeline
// (B = 4, dp 1, b 2), pp 4 holds 2 x 1 layer = 2424832.
TEST(StepModel, OneFOneBActivationsDoNotShrinkWithPipelineStages) {
  ModelShape m = paper_model();
  m.global_batch = 32;
  for (int pp : {1, 2, 4}) {
    Memory first = stage_memory(m, {}, {1, pp, 1, 1}, 0);
    double logits = pp == 1 ? 4.0 * 128 * 2 * 1000 : 0;  // the only stage is also the last
    EXPECT_DOUBLE_EQ(first.activations - logits, 4849664) << pp;
  }
  m.global_batch = 4;
  EXPECT_DOUBLE_EQ(stage_memory(m, {}, {1, 4, 1, 1}, 0).activations, 2424832);
}

// Per micro-batch: a layer forward is 2 b s P_layer + 4 b s^2 h = 2 x 256 x 49152 + 4 x 2 x 16384 x 64
// = 25165824 + 8388608 = 33554432; the output layer 2 b s h V = 32768000. A step: 3 (B/b) (L x layer +
// logits) = 24 x 166985728 = 4007657472.
TEST(StepModel, Flops) {
  ModelShape m = paper_model();
  EXPECT_DOUBLE_EQ(layer_forward_flops(m), 33554432);
  EXPECT_DOUBLE_EQ(logits_forward_flops(m), 32768000);
  EXPECT_DOUBLE_EQ(recompute_flops(m, Recompute::kNone), 0);
  EXPECT_DOUBLE_EQ(recompute_flops(m, Recompute::kSelective), 8388608);  // 4 b s^2 h
  EXPECT_DOUBLE_EQ(recompute_flops(m, Recompute::kFull), 33554432);
  EXPECT_DOUBLE_EQ(model_flops_per_step(m), 4007657472);
  // Narayanan et al. 2021, eq. (3) with full recompute, for a GPT of B = 512, s = 2048, L = 24, h = 2304,
  // V = 51200: 96 B s L h^2 (1 + s/(6h) + V/(16 L h)) equals our model FLOPs plus the recompute.
  ModelShape gpt{12.0 * 24 * 2304 * 2304 + 2.0 * 51200 * 2304, 24, 2304, 24, 2048, 51200, 16, 512};
  double eq3 =
      96.0 * 512 * 2048 * 24 * 2304.0 * 2304 * (1 + 2048 / (6.0 * 2304) + 51200 / (16.0 * 24 * 2304));
  double ours = model_flops_per_step(gpt) + recompute_flops(gpt, Recompute::kFull) * 24 * 512 / 16;
  EXPECT_NEAR(ours / eq3, 1, 1e-12);
}

// Bytes per NPU and step: TP 4 collectives x 2 sbh (32768) x 2 layers x 4 micro-batches = 1048576;
// PP one activation and one gradient of 2 sbh / t = 16384 per micro-batch plus the fill: 2 x 16384 x
// (4 + 1) = 163840; DP the largest stage's bf16 gradients 2 x 81152 = 162304.
TEST(StepModel, Volumes) {
  Volumes v = step_volumes(paper_model(), {}, kT2P2D2);
  EXPECT_DOUBLE_EQ(v.tp, 1048576);
  EXPECT_DOUBLE_EQ(v.pp, 163840);
  EXPECT_DOUBLE_EQ(v.dp, 162304);
  TrainOptions full;
  full.recompute = Recompute::kFull;  // 6 collectives: the recomputed forward's two more
  EXPECT_DOUBLE_EQ(step_volumes(paper_model(), full, kT2P2D2).tp, 1572864);
  Volumes alone = step_volumes(paper_model(), {}, {1, 1, 8, 1});
  EXPECT_DOUBLE_EQ(alone.tp, 0);
  EXPECT_DOUBLE_EQ(alone.pp, 0);
}

// Peak 1e12, efficiency 0.5, so a tp-2 stage runs at 1e12 FLOP/s. Stage work per micro-batch: stage 0 two
// layers x 3 x 33554432 = 201326592; the last stage adds 3 x 32768000 of logits = 299630592, the slowest.
// compute = 4 x 299630592 / 1e12 = 1.198522368e-3. Given TP 0.01 s, PP 0.002 s, a DP all-reduce of 0.05 s:
// bubble = (p-1)/(m v) (compute + TP) = 0.011198522368 / 4 = 2.799630592e-3; the last micro-batch's
// backward on stage 0 (2 layers x 2 x 33554432 / 1e12 = 1.34217728e-4) hides that much of the all-reduce:
// exposed max(0.05 / 2 buckets, 0.05 - 1.34217728e-4) = 0.049865782272. Total 0.065863935232 s.
TEST(StepModel, StepTime) {
  ModelShape m = paper_model();
  StepTime t = step_time(m, {}, kT2P2D2, 1e12, 0.5, {0.01, 0.002, 0.05});
  EXPECT_DOUBLE_EQ(t.compute, 1.198522368e-3);
  EXPECT_DOUBLE_EQ(t.bubble, 2.799630592e-3);
  EXPECT_DOUBLE_EQ(t.tp, 0.01);
  EXPECT_DOUBLE_EQ(t.pp, 0.002);
  EXPECT_DOUBLE_EQ(t.dp_exposed, 0.049865782272);
  EXPECT_DOUBLE_EQ(t.total, 0.065863935232);
  EXPECT_DOUBLE_EQ(t.tokens_per_s_per_npu, 16.0 * 128 / (0.065863935232 * 8));
  EXPECT_DOUBLE_EQ(t.mfu, 4007657472 / (0.065863935232 * 8 * 1e12));
  // ZeRO-1: the reduce-scatter (0.025) overlaps the same way, max(0.0125, 0.025 - 1.34217728e-4); the
  // all-gather (0.025) after the optimizer step is exposed: 0.049865782272 again.
  TrainOptions zero;
  zero.optimizer_parallel = true;
  EXPECT_DOUBLE_EQ(step_time(m, zero, kT2P2D2, 1e12, 0.5, {0.01, 0.002, 0.05}).dp_exposed, 0.049865782272);
  // A short all-reduce is hidden except its last bucket: 1e-4 / 2.
  EXPECT_DOUBLE_EQ(step_time(m, {}, kT2P2D2, 1e12, 0.5, {0, 0, 1e-4}).dp_exposed, 5e-5);
  // v = 2 halves the bubble: (p-1)/(m v) = 1/8 of compute + TP.
  EXPECT_DOUBLE_EQ(step_time(m, {}, {2, 2, 2, 2}, 1e12, 0.5, {0.01, 0.002, 0}).bubble, 0.011198522368 / 8);
}

TEST(Chips, BuiltinNamesAndAliases) {
  struct Case {
    const char* name;
    const char* chip;
  };
  const Case cases[] = {{"910B3", "910B3"},    {"910b", "910B3"},      {"atlas800t-a2", "910B3"},
                        {"910b4", "910B4"},    {"910ProA", "910ProA"}, {"atlas800-9000", "910ProA"},
                        {"Ascend910", "910C"}, {"910C", "910C"},       {"910_93", "910C"},
                        {"310P3", "310P3"},    {"310p", "310P3"},      {"atlas300i-duo", "310P3"}};
  for (const auto& c : cases) {
    auto chip = builtin_chip(c.name);
    ASSERT_TRUE(chip.ok()) << c.name;
    EXPECT_EQ(chip->name, c.chip) << c.name;
    auto host = node_host(*chip);
    ASSERT_TRUE(host.ok()) << c.name;
    EXPECT_EQ(static_cast<int>(host->host.chips.size()), chip->chips_per_node) << c.name;
  }
  auto bad = builtin_chip("H100");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("unknown chip 'H100' (known: 910ProA, 910B1"), std::string::npos)
      << bad.error().message();
}

TEST(Chips, ChipFile) {
  auto c = chip_from_json(json::parse(R"({"name": "X1", "hbm_gib": 80, "peak_tflops_bf16": 312,
      "chips_per_node": 16, "bandwidth_gbps": {"intra_node": 300, "inter_node": 25}})"));
  ASSERT_TRUE(c.ok()) << c.error().message();
  auto host = node_host(*c);
  ASSERT_TRUE(host.ok());
  ASSERT_EQ(host->host.chips.size(), 16U);
  auto type = make_node_type(*host);
  ASSERT_TRUE(type.ok());
  EXPECT_EQ(type->level_of(0, 15), Level::kHccs);  // a full mesh
  Bandwidth bw = bandwidth_for(*c, {});
  EXPECT_DOUBLE_EQ(bw.gbps[static_cast<int>(Level::kHccs)], 300);
  EXPECT_DOUBLE_EQ(bw.gbps[static_cast<int>(Level::kPcie)], 300);
  EXPECT_DOUBLE_EQ(bw.gbps[static_cast<int>(Level::kLeaf)], 25);
  EXPECT_DOUBLE_EQ(bw.gbps[static_cast<int>(Level::kCore)], 25);
  struct Case {
    const char* json;
    const char* message;
  };
  const Case cases[] = {
      {R"({"name": "x", "hbm_gib": 0, "peak_tflops_bf16": 1, "chips_per_node": 8})",
       "hbm_gib: must be positive"},
      {R"({"name": "x", "hbm_gib": 8, "peak_tflops_bf16": 1, "chips_per_node": 65})",
       "chips_per_node: 65 is out of range [1, 64]"},
      {R"({"name": "x", "hbm_gib": 8, "peak_tflops_bf16": 1, "chips_per_node": 8, "tflops": 3})",
       "tflops: unknown field"},
      {R"({"name": "x", "hbm_gib": 8, "chips_per_node": 8})", "peak_tflops_bf16: required field is missing"},
      {R"({"name": "x", "hbm_gib": 8, "peak_tflops_bf16": 1, "chips_per_node": 8,
           "bandwidth_gbps": {"intra": 3}})",
       "bandwidth_gbps.intra: unknown field"},
  };
  for (const auto& k : cases) {
    auto r = chip_from_json(json::parse(k.json));
    ASSERT_FALSE(r.ok()) << k.json;
    EXPECT_NE(r.error().message().find(k.message), std::string::npos) << r.error().message();
  }
}

// The issue's example: 10B (40 layers, hidden 5120, 40 heads, sequence 4096) on 8 x 910B3. Weights,
// gradients and Adam are 16 P / (t p) = 20e9 bytes for every layout of 8; activations per layer are
// sbh(10 + 24/t + 5as/(ht)) with sbh = 4096 x 5120 = 20971520 and 5as/h = 160, and the first stage holds
// p micro-batches of L/p layers: 40 layers' worth. tp 1: 194 sbh x 40 = 163 GB; tp 2: 102 sbh x 40 =
// 85.6 GB; tp 4: 56 sbh x 40 = 47.0 GB; tp 8: 33 sbh x 40 = 27.7 GB. With 64 GiB = 68.7 GB only tp 4 x pp 2
// (67.0 GB) and tp 8 (47.7 GB) fit: the planner must rank a layout with tp >= 2, inside one node, first.
TEST(Plan, TenBillionOnOneNodeRanksTensorParallelFirst) {
  PlanRequest r;
  r.npus = 8;
  r.chip = "910B3";
  r.model = {10e9, 40, 5120, 40, 4096, 0, 1, 0};
  auto p = plan(r);
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->request.model.global_batch, 1024);  // max(1024, N x b)
  std::set<std::pair<int, int>> fitting;
  for (const auto& e : p->entries) {
    if (e.fits) fitting.emplace(e.layout.tp, e.layout.pp);
  }
  EXPECT_EQ(fitting, (std::set<std::pair<int, int>>{{4, 2}, {8, 1}}));
  const PlanEntry& best = p->entries.front();
  ASSERT_TRUE(best.fits);
  EXPECT_GE(best.layout.tp, 2);
  EXPECT_EQ(best.eval.tp_groups_outside_hccs, 0);
  // Its TP ring of 4 runs on HCCS (56 GB/s in the cost model): 2 (4-1)/4 x bytes / 56e9; its pipeline pair
  // too: bytes / 56e9. The same placement through `place` gives the same cost.
  EXPECT_DOUBLE_EQ(best.time.tp, 2.0 * 3 / 4 * best.volumes.tp / 56e9);
  EXPECT_NEAR(best.time.pp, best.volumes.pp / 56e9, 1e-12 * best.time.pp);
  // Ranked fastest first; the tp 1 layouts that used to win do not fit, and say by how much.
  for (std::size_t i = 1; i < p->entries.size(); ++i) {
    if (p->entries[i].fits) {
      EXPECT_LE(p->entries[i - 1].time.total, p->entries[i].time.total);
    }
    if (!p->entries[i - 1].fits) {
      EXPECT_FALSE(p->entries[i].fits);
    }
  }
  for (const auto& e : p->entries) {
    if (e.layout.tp == 1 && e.layout.pp == 4 && e.layout.v == 1) {
      EXPECT_NE(e.why_not.find("4 micro-batches in flight"), std::string::npos) << e.why_not;
      EXPECT_NE(e.why_not.find("GiB over"), std::string::npos) << e.why_not;
    }
  }
}

// A job made from a plan entry, placed by `place` on the same ideal cluster, costs what the plan says.
TEST(Plan, PlanPlaceAndTheCostModelAgree) {
  PlanRequest r;
  r.npus = 32;
  r.chip = "910B3";
  r.model = {13e9, 40, 5120, 40, 4096, 32000, 1, 256};
  r.train.sequence_parallel = true;
  r.train.recompute = Recompute::kSelective;
  auto p = plan(r);
  ASSERT_TRUE(p.ok()) << p.error().message();
  auto specs = generate_nodes("atlas800t-a2", 4, 16, 4, "node-");
  auto cluster = make_cluster("c", {}, specs, builtin_profiles());
  ASSERT_TRUE(cluster.ok());
  int checked = 0;
  for (const auto& e : p->entries) {
    if (!e.fits || e.layout.v != 1) continue;
    auto placed = place(*cluster, ClusterState::initial(*cluster), job_of(*p, e), Policy::kTopo);
    ASSERT_TRUE(placed.ok()) << placed.error().message();
    EXPECT_NEAR(placed->eval.cost.tp, e.time.tp, 1e-9 * (1 + e.time.tp)) << e.layout.tp << "x" << e.layout.pp;
    EXPECT_NEAR(placed->eval.cost.pp, e.time.pp, 1e-9 * (1 + e.time.pp)) << e.layout.tp << "x" << e.layout.pp;
    ++checked;
  }
  EXPECT_GT(checked, 3);
  // The job file round-trips the layout and volumes.
  Job j = job_of(*p, p->entries.front());
  std::string yaml = to_job_yaml(j, *p, p->entries.front());
  EXPECT_NE(yaml.find("tp: " + std::to_string(j.tp) + "\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("comm_bytes: {tp: "), std::string::npos) << yaml;
}

TEST(Plan, WhyNot) {
  PlanRequest r;
  r.npus = 48;
  r.chip = "910B3";
  r.model = {1e9, 24, 2048, 32, 2048, 0, 1, 1000};
  auto p = plan(r);
  ASSERT_TRUE(p.ok()) << p.error().message();
  using Key = std::tuple<int, int, int>;
  std::map<Key, std::string> why;
  for (const auto& e : p->entries) why[{e.layout.tp, e.layout.pp, e.layout.v}] = e.why_not;
  auto why_of = [&](int tp, int pp) { return why[Key(tp, pp, 1)]; };
  EXPECT_EQ(why_of(3, 1), "tp 3 does not divide the 32 heads");
  EXPECT_EQ(why_of(16, 1), "tp 16 spans nodes of 8 chips (--allow-tp-across-nodes to consider it)");
  EXPECT_EQ(why_of(1, 48), "pp 48 exceeds the 24 layers");
  EXPECT_EQ(why_of(1, 1), "the global batch 1000 is not a multiple of dp x micro-batch = 48");
  r.model.global_batch = 24;
  r.npus = 16;
  p = plan(r);
  ASSERT_TRUE(p.ok());
  for (const auto& e : p->entries) {
    if (e.layout.tp == 1 && e.layout.pp == 2 && e.layout.v == 2) {
      // dp 8: 24 / 8 = 3 micro-batches; interleaving needs a multiple of pp 2.
      EXPECT_EQ(e.why_not, "the interleaved schedule needs the 3 micro-batches to be a multiple of pp 2");
    }
  }
  r.allow_tp_across_nodes = true;
  p = plan(r);
  ASSERT_TRUE(p.ok());
  bool tp16 = false;
  for (const auto& e : p->entries) tp16 = tp16 || (e.layout.tp == 16 && e.fits);
  EXPECT_TRUE(tp16);
}

TEST(Plan, BadRequests) {
  PlanRequest ok;
  ok.npus = 8;
  ok.chip = "910B3";
  ok.model = {1e9, 24, 2048, 32, 2048, 0, 1, 0};
  ASSERT_TRUE(plan(ok).ok());
  struct Case {
    void (*edit)(PlanRequest&);
    const char* message;
  };
  const Case cases[] = {
      {[](PlanRequest& r) { r.model.heads = 0; }, "--heads"},
      {[](PlanRequest& r) { r.model.vocab = 300000; }, "leaves nothing for the layers"},
      {[](PlanRequest& r) { r.efficiency = 1.5; }, "--efficiency must be in (0, 1]"},
      {[](PlanRequest& r) { r.chip = "H100"; }, "unknown chip 'H100'"},
  };
  for (const auto& c : cases) {
    PlanRequest r = ok;
    c.edit(r);
    auto p = plan(r);
    ASSERT_FALSE(p.ok()) << c.message;
    EXPECT_NE(p.error().message().find(c.message), std::string::npos) << p.error().message();
  }
  auto j = to_json(*plan(ok));
  EXPECT_EQ(j["chip"], "910B3");
  EXPECT_EQ(j["peak_tflops_bf16"], 313);
  EXPECT_EQ(j["candidates"][0]["fits"], true);
  EXPECT_TRUE(j["candidates"][0].contains("step_s"));
  EXPECT_TRUE(j["candidates"][0].contains("mfu"));
}

}  // namespace
}  // namespace ascend::topology
