// The scheduler as a cache of the API server (issue 22): informers on pods (all namespaces), Nodes, the
// jobs' ConfigMaps and MindCluster's per-node device ConfigMaps feed the Scheduler's observe_* transitions,
// and one on ResourceClaims (when the API server serves resource.k8s.io/v1) its put_claimed (dra_claims.h);
// the records (kube_records.h) are written back: the pod annotations at bind before the Binding, the job's
// ConfigMap whenever its record moves (with its resourceVersion as precondition, and only when the record is
// newer than the one there, so that a replica acting on stale data never overwrites a newer record), and
// Events (AscendPlaced, AscendPlacementFailed, AscendReleased) from a queue of their own.
//
// Thread-safe. The scheduler is reached only through SchedulerAccess (the server's lock); no API request is
// made under it.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/common/kube_client.h"
#include "ascend/scheduler/dra_claims.h"
#include "ascend/scheduler/extender.h"

namespace ascend::scheduler {

// The server's scheduler and its lock: `with` runs f under the lock and persists after it.
class SchedulerAccess {
 public:
  virtual ~SchedulerAccess() = default;
  virtual void with(const std::function<void(Scheduler&)>& f) = 0;
};

struct KubeSyncOptions {
  std::string instance;            // reportingInstance of our Events (the pod's name in a cluster)
  std::size_t event_queue = 1000;  // Events waiting to be sent; more are dropped (counted)
};

class KubeSync {
 public:
  KubeSync(std::shared_ptr<kube::Client> client, SchedulerAccess& access, KubeSyncOptions o = {});
  ~KubeSync();  // stops
  KubeSync(const KubeSync&) = delete;
  KubeSync& operator=(const KubeSync&) = delete;

  void start();
  void stop();
  // Every informer has delivered its first LIST and the scheduler has been brought in line with it (Nodes
  // absent from the API marked, chips of pods the API no longer has freed).
  bool synced() const;
  bool wait_synced(std::chrono::milliseconds timeout) const;

  // At bind, before the Binding: the pod's annotations (its chips, its first rank), with its UID as
  // precondition; then the Binding. Either failing is an error naming the step. Without chips (a pod that
  // is not ours), the Binding alone.
  Status bind(const std::string& ns, const std::string& pod, const std::string& uid, const std::string& node,
              const std::vector<int>& chips, int rank_start);
  // Brings the job's ConfigMap in line with the scheduler's record of it (creates, updates, or deletes it
  // when the scheduler holds no such job). Errors are logged; the next change writes again.
  void sync_job(const std::string& ns, const std::string& job);
  // Whether the API server has this pod (namespace, name and, when given, UID): the cache first, then a GET
  // (a pod kube-scheduler just saw may not have reached our watch yet). An API error is "yes" only for a pod
  // the cache has.
  bool pod_exists(const std::string& ns, const std::string& pod, const std::string& uid);
  // A job pod that takes its chips from DRA ResourceClaims (dra_claims.h apply_claims): its claims from the
  // cache, else from the API server (a claim made a moment ago may not have reached our watch yet).
  void apply_claims(PodInfo& pod);
  // At bind, what the pod is to the scheduler: `found` false when the API server does not have it (as
  // pod_exists says: the cache, else one GET, which also gives the pod); `ours` when it asks for whole chips
  // (a resource, or claims with a job) or belongs to a job, and for a job pod whose chips come from DRA
  // ResourceClaims, `claimed`: the chips on `node` its claims were allocated (kube-scheduler's PreBind wrote
  // them just before), read from the API server. An error names the claim that is not allocated there or
  // what cannot be read.
  struct BindPod {
    bool found = true;
    bool ours = false;
    std::optional<std::vector<int>> claimed;
  };
  Result<BindPod> bind_pod(const std::string& ns, const std::string& pod, const std::string& uid,
                           const std::string& node);
  // Queues an Event about a pod (dropped when the queue is full).
  void pod_event(const std::string& ns, const std::string& pod, const std::string& uid,
                 const std::string& type, const std::string& reason, const std::string& note);

  struct Stats {
    std::uint64_t pods_observed = 0, released = 0, adopted = 0, conflicts = 0, jobs_written = 0,
                  write_errors = 0, events_sent = 0, events_dropped = 0;
    // Chip faults (issue 23): new fault codes the device ConfigMaps named, by level; the pods evicted and
    // the job restarts the recoveries made; the jobs that failed with max-restarts spent.
    std::map<std::string, std::uint64_t> faults_by_level;
    std::uint64_t evictions = 0, restarts = 0, jobs_failed = 0;
  };
  Stats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ascend::scheduler
