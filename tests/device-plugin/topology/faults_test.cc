// simulate --faults (faults.h): one job and one fault at a known time, with the chip-hours derived by hand
// for pod and job recovery; random faults are deterministic for a seed.
#include <gtest/gtest.h>

#include "ascend/topology/faults.h"

namespace ascend::topology {
namespace {

constexpr double kHour = 3600;

Cluster cluster(int nodes) {
  auto c = make_cluster("c", Bandwidth{}, generate_nodes("atlas800t-a2", nodes, 16, 4, "node-"),
                        builtin_profiles());
  EXPECT_TRUE(c.ok()) << c.error().message();
  return *c;
}

// 8 NPUs in two pods of 4, no communication, 10 hours of work.
std::vector<TraceJob> one_job() {
  TraceJob t;
  t.job.name = "j";
  t.job.npus = 8;
  t.job.tp = 1;
  t.job.pp = 1;
  t.job.dp = 8;
  t.job.npus_per_pod = 4;
  t.arrival = 0;
  t.duration = 10 * kHour;
  return {t};
}

// A fault at 3.5 h on the chip of rank 0 (pod 0) as the replay first places the job; checkpoints every hour,
// 4 h repair, 0.1 h restart.
FaultOptions fault_on_rank0(const Cluster& c) {
  auto p = place(c, ClusterState::initial(c), one_job()[0].job, Policy::kTopo);
  EXPECT_TRUE(p.ok());
  FaultOptions o;
  o.fixed = {{3.5 * kHour, p->chips[0].node, p->chips[0].slot}};
  o.checkpoint_s = kHour;
  o.repair_s = 4 * kHour;
  o.restart_s = 0.1 * kHour;
  return o;
}

TEST(Faults, OneNodePodRecoveryHoldsTheSurvivorsUntilTheRepair) {
  // One node of 8: the job fills it. At 3.5 h the job goes back to its 3 h checkpoint (0.5 h x 8 chips
  // rolled back).
  //  pod: pod 0 lets go of its 4 chips, but only 3 healthy chips are free: the pod waits for the repair at
  //   7.5 h while pod 1 holds its 4 chips idle; restart 0.1 h, 7 h of work left: ends at 14.6 h. Held:
  //   8 x 3.5 + 4 x 4 + 8 x 7.1 = 100.8 chip-hours; useful 8 x 10 = 80; lost 20.8.
  //  job: every chip goes; the job cannot be placed on 7 healthy chips until 7.5 h; ends at 14.6 h.
  //   Held: 8 x 3.5 + 8 x 7.1 = 84.8; lost 4.8 (4 rolled back, 0.8 restart).
  Cluster c = cluster(1);
  auto r = simulate_faults(c, one_job(), Policy::kTopo, fault_on_rank0(c));
  ASSERT_TRUE(r.ok()) << r.error().message();
  for (const RecoveryStats* s : {&r->pod, &r->job}) {
    EXPECT_EQ(s->faults, 1);
    EXPECT_EQ(s->hits, 1);
    EXPECT_EQ(s->restarts, 1);
    EXPECT_EQ(s->completed, 1);
    EXPECT_NEAR(s->useful_chip_hours, 80, 1e-9);
    EXPECT_NEAR(s->rollback_chip_hours, 4, 1e-9);
    EXPECT_NEAR(s->makespan_s, 14.6 * kHour, 1e-6);
  }
  EXPECT_NEAR(r->pod.held_chip_hours, 100.8, 1e-9);
  EXPECT_NEAR(r->pod.lost_chip_hours, 20.8, 1e-9);
  EXPECT_NEAR(r->pod.goodput, 80 / 100.8, 1e-12);
  EXPECT_NEAR(r->job.held_chip_hours, 84.8, 1e-9);
  EXPECT_NEAR(r->job.lost_chip_hours, 4.8, 1e-9);
  EXPECT_NEAR(r->job.goodput, 80 / 84.8, 1e-12);
}

TEST(Faults, WithASpareNodeBothRecoveriesRestartAtOnce) {
  // Two nodes: pod 0 (pod recovery) or the whole job (job recovery) is placed again at 3.5 h on healthy
  // chips; restart 0.1 h, 7 h left: ends at 10.6 h. Held 8 x 3.5 + 8 x 7.1 = 84.8 either way.
  Cluster c = cluster(2);
  auto r = simulate_faults(c, one_job(), Policy::kTopo, fault_on_rank0(c));
  ASSERT_TRUE(r.ok());
  for (const RecoveryStats* s : {&r->pod, &r->job}) {
    EXPECT_NEAR(s->makespan_s, 10.6 * kHour, 1e-6);
    EXPECT_NEAR(s->held_chip_hours, 84.8, 1e-9);
    EXPECT_NEAR(s->lost_chip_hours, 4.8, 1e-9);
  }
}

TEST(Faults, AFaultOnAFreeChipCostsNothing) {
  Cluster c = cluster(2);
  FaultOptions o = fault_on_rank0(c);
  o.fixed[0].node = 1 - o.fixed[0].node;  // the other node: nobody there
  auto r = simulate_faults(c, one_job(), Policy::kTopo, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->pod.hits, 0);
  EXPECT_NEAR(r->job.held_chip_hours, 80, 1e-9);
  EXPECT_NEAR(r->job.goodput, 1, 1e-12);
  EXPECT_NEAR(r->pod.makespan_s, 10 * kHour, 1e-6);
}

TEST(Faults, RandomFaultsAreDeterministicForASeed) {
  Cluster c = cluster(4);
  std::vector<TraceJob> trace;
  for (int i = 0; i < 6; ++i) {
    TraceJob t = one_job()[0];
    t.job.name = "j" + std::to_string(i);
    t.arrival = i * kHour;
    trace.push_back(t);
  }
  FaultOptions o;
  o.mtbf_hours = 200;  // 32 chips: a fault every 6 h or so
  o.seed = 7;
  auto a = simulate_faults(c, trace, Policy::kTopo, o);
  auto b = simulate_faults(c, trace, Policy::kTopo, o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GT(a->job.faults, 0);
  EXPECT_EQ(a->job.faults, b->job.faults);
  EXPECT_EQ(a->pod.held_chip_hours, b->pod.held_chip_hours);
  EXPECT_EQ(a->job.held_chip_hours, b->job.held_chip_hours);
  EXPECT_EQ(a->job.completed, 6);
  EXPECT_NEAR(a->job.useful_chip_hours, 6 * 80, 1e-9);
  EXPECT_GE(a->job.lost_chip_hours, 0);
  o.seed = 8;
  auto d = simulate_faults(c, trace, Policy::kTopo, o);
  ASSERT_TRUE(d.ok());
  EXPECT_NE(a->job.held_chip_hours, d->job.held_chip_hours);
  // No faults in the replay's time: nothing lost.
  o.mtbf_hours = 1e12;
  auto none = simulate_faults(c, trace, Policy::kTopo, o);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->pod.faults, 0);
  EXPECT_NEAR(none->pod.goodput, 1, 1e-12);
}

TEST(Faults, BadOptionsAreErrors) {
  Cluster c = cluster(1);
  FaultOptions o;
  EXPECT_FALSE(simulate_faults(c, one_job(), Policy::kTopo, o).ok());  // no MTBF
  o.mtbf_hours = 10;
  o.checkpoint_s = 0;
  EXPECT_FALSE(simulate_faults(c, one_job(), Policy::kTopo, o).ok());
  o.checkpoint_s = kHour;
  o.fixed = {{0, 3, 0}};  // no node 3
  auto r = simulate_faults(c, one_job(), Policy::kTopo, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("no such chip"), std::string::npos);
}

}  // namespace
}  // namespace ascend::topology
