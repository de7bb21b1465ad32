// Trace replay (FIFO, backfill, rejection, run time from the placement cost). The planner: plan_test.cc.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

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

}  // namespace
}  // namespace ascend::topology
