// Chip faults in the trace replay (`simulate --faults`, issue 23): what `pod` and `job` recovery cost a
// cluster. Faults arrive on every chip that starts free as a Poisson process (exponential gaps of mean MTBF,
// one seeded generator per chip, so a run is deterministic), or as a fixed list. A faulty chip is out of
// service for the repair time. A fault under a running job rolls the job back to its last checkpoint (every
// checkpoint interval of its own run time) and restarts it:
//  - job recovery: every pod goes; the whole job is placed again, before the queue, and resumes after the
//    restart time;
//  - pod recovery: only the pod on the faulty chip goes; the other pods keep their chips (idle, but held)
//    until the pod is placed again around them (place_missing), then the job resumes after the restart time.
// The replay is otherwise simulate()'s, FIFO without backfill; a job's work is the run time of its first
// placement. Chip-hours held = the integral of the chips jobs hold; useful = each completed job's work x its
// NPUs; lost = held - useful (rolled-back work, restart times, chips held idle); goodput = useful / held.
// Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ascend/common/error.h"
#include "ascend/topology/cluster.h"
#include "ascend/topology/place.h"
#include "ascend/topology/simulate.h"

namespace ascend::topology {

struct Fault {
  double time = 0;  // seconds from the start of the trace
  int node = 0;     // node index
  int slot = 0;
};

struct FaultOptions {
  double mtbf_hours = 0;     // per chip
  std::uint64_t seed = 1;    // of the fault generators
  std::vector<Fault> fixed;  // not empty: exactly these faults, no random ones
  double checkpoint_s = 3600;
  double repair_s = 4 * 3600.0;
  double restart_s = 300;  // from the placement to training again (start, load the checkpoint)
};

enum class Recovery { kPod, kJob };
std::string_view to_string(Recovery r);

struct RecoveryStats {
  Recovery mode = Recovery::kJob;
  int faults = 0;    // faults until the last job ended
  int hits = 0;      // of them, on a chip a job held
  int restarts = 0;  // job restarts (job) or pod replacements (pod)
  int completed = 0;
  int rejected = 0;
  int unfinished = 0;  // still running when the replay's event bound ran out (faults faster than the work)
  double useful_chip_hours = 0;
  double held_chip_hours = 0;
  double lost_chip_hours = 0;
  double rollback_chip_hours = 0;  // work done again from the last checkpoint
  double goodput = 0;
  double makespan_s = 0;         // last end - first arrival
  double mean_completion_s = 0;  // arrival to end, completed jobs
};

struct FaultReport {
  FaultOptions options;
  RecoveryStats pod;
  RecoveryStats job;
};

// EINVAL for a bad option or a fixed fault on a chip the cluster does not have.
Status check(const Cluster& c, const FaultOptions& o);

RecoveryStats simulate_recovery(const Cluster& c, const std::vector<TraceJob>& trace, Policy policy,
                                const FaultOptions& o, Recovery mode);
// Both modes on the same faults.
Result<FaultReport> simulate_faults(const Cluster& c, const std::vector<TraceJob>& trace, Policy policy,
                                    const FaultOptions& o);

// {"mtbf_hours", "seed", "checkpoint_s", "repair_s", "restart_s", "pod": {...}, "job": {...}}
nlohmann::ordered_json to_json(const FaultReport& r);

}  // namespace ascend::topology
