// Trace replay (FIFO, backfill, rejection, run time from the placement cost) and the parallelism planner.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ascend/topology/plan.h"
#include "ascend/topology/simulate.h"
#include "test_util.h"

namespace ascend::topology {
namespace {

using nlohmann::json;
using testing::job;
using testing::make;
using testing::node;

TraceJob tj(const char* name, int npus, double arrival, double duration) {
  TraceJob t;
  t.job = job(npus, npus <= 8 ? npus : 8, 1, npus <= 8 ? 1 : npus / 8, 0, {0, 0, 0});
  t.job.name = name;
  t.arrival = arrival;
  t.duration = duration;
  return t;
}

// Two 8-chip nodes. a: 16 NPUs for 100 s; b: 8 NPUs arrives at 10 and waits for a; c: 16 arrives at 20.
TEST(Simulate, FifoQueue) {
  Cluster c = make({node("n0", "atlas800t-a2", "l0"), node("n1", "atlas800t-a2", "l0")});
  std::vector<TraceJob> t = {tj("a", 16, 0, 100), tj("b", 8, 10, 50), tj("c", 16, 20, 30), tj("d", 8, 25, 5)};
  auto r = simulate(c, t, {Policy::kTopo, false});
  ASSERT_EQ(r.detail.size(), 4U);
  EXPECT_DOUBLE_EQ(r.detail[0].start, 0);
  EXPECT_DOUBLE_EQ(r.detail[1].start, 100);  // waits for a
  EXPECT_DOUBLE_EQ(r.detail[2].start, 150);  // needs both nodes: waits for b
  EXPECT_DOUBLE_EQ(r.detail[3].start, 180);  // strict FIFO: behind c although a node is free at 100..150
  EXPECT_EQ(r.jobs, 4);
  EXPECT_EQ(r.completed, 4);
  EXPECT_DOUBLE_EQ(r.mean_wait_s, (0 + 90 + 130 + 155) / 4.0);
  EXPECT_DOUBLE_EQ(r.p95_wait_s, 155);
  EXPECT_DOUBLE_EQ(r.makespan_s, 185);
  EXPECT_DOUBLE_EQ(r.utilization, (16 * 100 + 8 * 50 + 16 * 30 + 8 * 5) / (16 * 185.0));
}

TEST(Simulate, BackfillStartsJobsThatEndBeforeTheHeadCouldStart) {
  Cluster c = make({node("n0", "atlas800t-a2", "l0"), node("n1", "atlas800t-a2", "l0")});
  // a holds one node until 100; b (16) must wait for it; c (8, 40 s) fits now and ends by 100: backfilled;
  // d (8, 500 s) would delay b: not backfilled.
  std::vector<TraceJob> t = {tj("a", 8, 0, 100), tj("b", 16, 1, 10), tj("c", 8, 2, 40), tj("d", 8, 3, 500)};
  auto fifo = simulate(c, t, {Policy::kTopo, false});
  auto bf = simulate(c, t, {Policy::kTopo, true});
  EXPECT_DOUBLE_EQ(fifo.detail[2].start, 110);
  EXPECT_DOUBLE_EQ(bf.detail[2].start, 2);
  EXPECT_DOUBLE_EQ(bf.detail[1].start, 100);  // the head is not delayed
  EXPECT_DOUBLE_EQ(bf.detail[3].start, 110);
  EXPECT_LT(bf.mean_wait_s, fifo.mean_wait_s);
}

TEST(Simulate, RejectsJobsThatNeverFitAndRunsByStepsAndCost) {
  Cluster c = make({node("n0", "atlas800t-a2", "l0"), node("n1", "atlas800t-a2", "l1", "spine-1")});
  TraceJob big = tj("too-big", 32, 0, 10);
  TraceJob steps;
  steps.job = job(16, 8, 1, 2, 8, {0, 0, 1e9});
  steps.job.name = "steps";
  steps.arrival = 5;
  steps.steps = 1000;
  steps.step_compute_s = 0.5;
  auto r = simulate(c, {big, steps}, {Policy::kTopo, false});
  EXPECT_EQ(r.completed, 1);
  EXPECT_EQ(r.rejected, 1);
  EXPECT_FALSE(r.detail[0].rejected.empty());
  // DP of 2 across the core: 2 (2-1)/2 x 1e9 / 6.25e9 per step.
  double cost = 1e9 / 6.25e9;
  EXPECT_DOUBLE_EQ(r.detail[1].comm_total, cost);
  EXPECT_DOUBLE_EQ(r.detail[1].end - r.detail[1].start, 1000 * (0.5 + cost));
  EXPECT_DOUBLE_EQ(r.mean_comm_cost, cost);
  auto j = to_json(r);
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"policy", "jobs", "completed", "rejected", "mean_wait_s",
                                            "p95_wait_s", "makespan_s", "utilization", "mean_comm_cost",
                                            "tp_groups_outside_hccs"}));
}

TEST(TraceFile, ParsesAndRejectsBadEntries) {
  auto t = trace_from_json(json::parse(R"({"name": "t", "jobs": [
      {"name": "a", "npus": 8, "tp": 8, "comm_bytes": {"tp": 1e9}, "arrival": 0, "duration": 60},
      {"name": "b", "npus": 16, "tp": 8, "model": {"params": 7e9, "layers": 32, "hidden": 4096, "seq_len": 4096},
       "arrival": 30.5, "steps": 100, "step_compute_s": 1.5}]})"));
  ASSERT_TRUE(t.ok()) << t.error().message();
  ASSERT_EQ(t->size(), 2U);
  EXPECT_EQ((*t)[1].job.dp, 2);
  EXPECT_EQ((*t)[1].steps, 100);
  EXPECT_DOUBLE_EQ((*t)[1].arrival, 30.5);
  struct Case {
    const char* json;
    const char* message;
  };
  const Case cases[] = {
      {R"([{"npus": 8, "comm_bytes": {}, "arrival": 0}])",
       "[0].duration: give duration, or steps and step_compute_s"},
      {R"([{"npus": 8, "comm_bytes": {}, "arrival": -1, "duration": 1}])",
       "[0].arrival: must not be negative"},
      {R"([{"npus": 8, "comm_bytes": {}, "arrival": 0, "duration": 1, "steps": 3}])",
       "[0].steps: give duration or steps"},
      {R"({"jobs": [{"npus": 8, "comm_bytes": {}, "arrival": 0, "steps": 3}]})",
       "jobs[0].step_compute_s: required"},
      {R"({"jobs": 3})", "jobs: expected a list"},
  };
  for (const auto& k : cases) {
    auto r = trace_from_json(json::parse(k.json));
    ASSERT_FALSE(r.ok()) << k.json;
    EXPECT_NE(r.error().message().find(k.message), std::string::npos) << r.error().message();
  }
}

PlanRequest ten_b(int npus) {
  PlanRequest r;
  r.npus = npus;
  r.chip = "910B3";
  r.params = 10e9;
  r.layers = 40;
  r.hidden = 5120;
  r.seq_len = 2048;
  return r;
}

TEST(Plan, TenBillionParametersNeedMoreThanOneChip) {
  auto one = plan(ten_b(1));
  ASSERT_TRUE(one.ok()) << one.error().message();
  ASSERT_EQ(one->entries.size(), 1U);
  EXPECT_FALSE(one->entries[0].fits);
  EXPECT_NE(one->entries[0].why_not.find("GiB per NPU, the chip has 64.0 GiB"), std::string::npos)
      << one->entries[0].why_not;
  auto eight = plan(ten_b(8));
  ASSERT_TRUE(eight.ok());
  EXPECT_EQ(eight->entries.size(), 10U);  // ordered triples with product 8
  ASSERT_TRUE(eight->entries.front().fits);
  // 16P/(tp pp) + activations must fit 64 GiB: tp x pp >= 4 here.
  for (const auto& e : eight->entries) {
    EXPECT_EQ(e.fits, e.memory.total <= 64.0 * (1 << 30)) << e.tp << " " << e.pp << " " << e.dp;
    if (e.fits) {
      EXPECT_GE(e.tp * e.pp, 4);
    }
  }
  // Ranked: fitting entries by cost, cheapest first.
  for (std::size_t i = 1; i < eight->entries.size(); ++i) {
    if (eight->entries[i].fits) {
      EXPECT_LE(eight->entries[i - 1].eval.cost.total, eight->entries[i].eval.cost.total);
    }
    if (!eight->entries[i - 1].fits) {
      EXPECT_FALSE(eight->entries[i].fits);
    }
  }
}

TEST(Plan, MemoryBreakdown) {
  PlanRequest r = ten_b(8);
  Memory m = memory_per_npu(r, 2, 2, 2);
  EXPECT_DOUBLE_EQ(m.weights, 2 * 10e9 / 4);
  EXPECT_DOUBLE_EQ(m.gradients, 2 * 10e9 / 4);
  EXPECT_DOUBLE_EQ(m.optimizer, 12 * 10e9 / 4);
  EXPECT_DOUBLE_EQ(m.activations, 34.0 * 2048 * 1 * 5120 * 40 / 4);
  EXPECT_DOUBLE_EQ(m.total, m.weights + m.gradients + m.optimizer + m.activations);
  r.optimizer_parallel = true;
  EXPECT_DOUBLE_EQ(memory_per_npu(r, 2, 2, 2).optimizer, 12 * 10e9 / 4 / 2);
  // Optimizer parallelism makes pure data parallelism over 8 chips fit... not for 10B (4P + 12P/8 + act).
  auto p = plan(r);
  ASSERT_TRUE(p.ok());
  for (const auto& e : p->entries) {
    if (e.tp == 1 && e.pp == 1) {
      EXPECT_FALSE(e.fits);
    }
  }
}

TEST(Plan, ChipNamesAndErrors) {
  for (const char* chip : {"910B3", "910b", "atlas800t-a2", "910ProA", "Ascend910", "910C", "310P3"}) {
    EXPECT_TRUE(profile_for_chip(chip).ok()) << chip;
  }
  auto bad = profile_for_chip("H100");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("known: "), std::string::npos);
  PlanRequest r = ten_b(8);
  r.layers = 0;
  EXPECT_FALSE(plan(r).ok());
  r = ten_b(16);
  r.layers = 2;
  auto p = plan(r);
  ASSERT_TRUE(p.ok());
  for (const auto& e : p->entries) {
    if (e.pp > 2) {
      EXPECT_NE(e.why_not.find("pipeline stages for 2 layers"), std::string::npos);
    }
  }
  auto j = to_json(*p);
  EXPECT_EQ(j["chip"], "910B3");
  EXPECT_EQ(j["candidates"].size(), p->entries.size());
}

}  // namespace
}  // namespace ascend::topology
