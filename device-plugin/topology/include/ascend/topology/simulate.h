// Trace replay: jobs arrive, wait in a FIFO queue, are placed by a policy, run, and leave. Run time is
// `duration`, or steps x (step_compute_s + the placement's cost.total), so a worse placement runs longer.
// With backfill, a later job may start ahead of a blocked head job when it fits now and ends before the
// earliest time the head job could start (EASY backfilling without over-promising). A job that cannot be
// placed even on the cluster with no trace job running is rejected. Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ascend/common/error.h"
#include "ascend/topology/cluster.h"
#include "ascend/topology/fields.h"
#include "ascend/topology/job.h"
#include "ascend/topology/place.h"

namespace ascend::topology {

struct TraceJob {
  Job job;
  double arrival = 0;    // seconds from the start of the trace
  double duration = -1;  // seconds; < 0: steps x (step_compute_s + cost.total)
  long long steps = 0;
  double step_compute_s = 0;
};

// The trace format (see docs/scheduler.md, "`simulate` and `plan`"): a list of entries, or {name, jobs:
// [...]}; every entry is a job (the job file's fields) plus `arrival` and either `duration` or `steps` +
// `step_compute_s`.
Result<std::vector<TraceJob>> trace_from_json(const nlohmann::json& j, const LineLocator& where = {});

struct SimOptions {
  Policy policy = Policy::kTopo;
  bool backfill = false;
};

struct SimJob {
  std::string name;
  int npus = 0;
  double arrival = 0;
  double start = -1;  // < 0: rejected
  double end = -1;
  double comm_total = 0;
  int tp_groups_outside_hccs = 0;
  std::string rejected;  // why, when rejected
};

struct SimResult {
  Policy policy = Policy::kTopo;
  int jobs = 0;
  int completed = 0;
  int rejected = 0;
  double mean_wait_s = 0;
  double p95_wait_s = 0;
  double makespan_s = 0;      // last end - first arrival
  double utilization = 0;     // NPU-seconds used / (NPUs free at the start x makespan)
  double mean_comm_cost = 0;  // mean cost.total of the placed jobs
  int tp_groups_outside_hccs = 0;
  std::vector<SimJob> detail;  // in trace order
};

SimResult simulate(const Cluster& c, const std::vector<TraceJob>& trace, const SimOptions& opt);

// {"policy", "jobs", "completed", "rejected", "mean_wait_s", "p95_wait_s", "makespan_s", "utilization",
//  "mean_comm_cost", "tp_groups_outside_hccs"}
nlohmann::ordered_json to_json(const SimResult& r);

}  // namespace ascend::topology
