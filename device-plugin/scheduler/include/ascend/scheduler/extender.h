// The extender's state machine: which chips of the cluster each job and pod holds, and the answers to the
// kube-scheduler extender verbs (filter, prioritize, bind), the device plugins' inventory, reservation and
// allocation calls, and release. Every call is a pure transition of this value given `now`: no I/O, no
// clock, no locks. The HTTP server (server.h) owns one, guards it with a mutex and persists it.
//
// Lifecycle of the chips of a job: the first filter of any of its pods places the whole job with topo on the
// candidate nodes and reserves every pod's chips (a slot per pod). A slot is Reserved until its pod is
// bound, Bound until the node's device plugin reports the allocation, then Allocated; release frees it.
// A slot never bound expires after the reservation TTL; a released or expired slot is taken again by a pod
// with its index when its chips are still free; otherwise the job's slots without chips are placed again
// around the slots that hold chips (topology::place_missing). A job is forgotten when none of its slots holds
// chips. With an API server, the records (pod annotations, the job's ConfigMap) are read back by
// observe_pod/observe_job, so that a restarted scheduler or a second replica holds the same chips.
// A pod without a job is given chips by the node-level allocator at bind.
//
// Not thread-safe: callers serialise access.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "ascend/common/error.h"
#include "ascend/scheduler/pod.h"
#include "ascend/topology/cluster.h"
#include "ascend/topology/place.h"

namespace ascend::scheduler {

using Clock = std::chrono::system_clock;

enum class SlotState { kReserved, kBound, kAllocated, kReleased, kExpired };
std::string_view to_string(SlotState s);

// Where a job is (issue 23): Pending until every pod is bound, then Running; Recovering from a chip fault
// until every pod is bound again (its pods were evicted); Failed when a fault came with max-restarts spent
// (its pods are not evicted again and not placed again while the record is kept).
enum class JobState { kPending, kRunning, kRecovering, kFailed };
std::string_view to_string(JobState s);

// A chip fault under a pod of a job, as the job's record keeps it (the last kKeptFaults).
struct FaultNote {
  std::chrono::system_clock::time_point at{};
  std::string node;
  std::vector<int> chips;
  std::string pod;
  std::string why;  // the level and codes when the device ConfigMap gave them
};

// The chips one pod holds on one node.
struct Slot {
  int node = -1;
  std::vector<int> phys;  // ascending
  SlotState state = SlotState::kReserved;
  std::string pod;  // the bound pod's name (namespace: the job's)
  std::string uid;
  Clock::time_point since{};  // when the current state began
};

struct JobRecord {
  std::string ns;
  JobRequest spec;
  std::string resource;
  int chips_per_pod = 0;
  topology::Placement placement;
  std::vector<Slot> slots;  // by pod index
  Clock::time_point placed_at{};
  // Bumped by every change of the record: a replica takes a record from the API server (the job's
  // ConfigMap) only when it is newer than its own.
  std::uint64_t version = 1;
  int restarts = 0;  // recoveries from chip faults so far (issue 23)
  JobState state = JobState::kPending;
  Clock::time_point state_since{};
  std::string state_why;          // why Recovering or Failed
  std::vector<FaultNote> faults;  // the last kKeptFaults, oldest first
  static constexpr std::size_t kKeptFaults = 8;
  // The placement's total communication cost (topology::Cost::total) when the fault that began the current
  // or last recovery came, and once every pod was bound again after it: a recovery is reported against the
  // placement it had to leave. Negative: not known (no recovery yet; still recovering).
  double cost_before_fault = -1;
  double cost_after_recovery = -1;

  std::string key() const { return ns + "/" + spec.name; }
  topology::Job job() const;
};

// A pod without a job that was bound (slot.pod is its name).
struct PodRecord {
  std::string ns;
  std::string resource;
  Slot slot;
};

// Why nodes failed a filter, by node name, as the extender protocol's FailedNodes and
// FailedAndUnresolvableNodes maps have them: one reason per name (the last one given), read in name order.
// Made for the 5 000 nodes of a request: a node is its name and the number of its reason, so nodes that
// share a reason (every node but one, for a pod of a placed job) share one text; the name order is made once,
// when first read, from the names' places among the cluster's names (`rank`) when the filter knows them,
// else from the names themselves. Reading it the first time sorts it (not thread-safe until then);
// Scheduler::filter returns it sorted.
class NodeReasons {
 public:
  static constexpr std::uint32_t kNoRank = UINT32_MAX;
  NodeReasons() = default;
  NodeReasons(std::initializer_list<std::pair<std::string, std::string>> items);

  // A reason for nodes to share; its number (the last reason's, when it is the same text).
  std::uint32_t reason(std::string_view text);
  // Node `name` fails for reason `r` (a reason given for it before is replaced). `rank`: the name's place in
  // the sorted names of the cluster, when the caller knows it (the same name must always get the same rank,
  // and ranks must sort as the names do).
  void add(std::string_view name, std::uint32_t r, std::uint32_t rank = kNoRank);
  void reserve(std::size_t nodes);
  // add() with the text of the reason.
  void set(std::string_view name, std::string_view text) { add(name, reason(text)); }

  bool empty() const { return entries_.empty(); }
  std::size_t size() const;  // distinct names
  const std::string* find(std::string_view name) const;
  const std::string& at(std::string_view name) const;  // std::out_of_range when absent
  const std::string& text(std::uint32_t r) const { return reasons_[r]; }
  std::size_t reason_count() const { return reasons_.size(); }

  struct Item {
    std::string_view first;     // the node
    const std::string& second;  // its reason
  };
  class iterator {
   public:
    struct Arrow {
      Item item;
      const Item* operator->() const { return &item; }
    };
    iterator(const NodeReasons* r, std::size_t i) : r_(r), i_(i) {}
    Item operator*() const;
    Arrow operator->() const { return Arrow{**this}; }
    std::uint32_t reason() const;  // the number of this node's reason
    iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator==(const iterator& o) const { return i_ == o.i_; }

   private:
    const NodeReasons* r_;
    std::size_t i_;
  };
  iterator begin() const;  // in name order
  iterator end() const;
  // Sorts now: reading is then free of writes.
  void sort() const;
  // f(name, reason number) for each node, in name order: the loop of an answer over 5 000 nodes, inline.
  template <typename F>
  void for_each(F&& f) const {
    sort();
    for (std::uint32_t e : order_) f(name(entries_[e]), entries_[e].reason);
  }

 private:
  // A node: its name's place in names_ (no string of its own: 5 000 of them in a job pod's answer).
  struct Entry {
    std::uint32_t at;
    std::uint32_t size;
    std::uint32_t reason;
    std::uint32_t rank;
  };
  std::string_view name(const Entry& e) const { return {names_.data() + e.at, e.size}; }
  bool less(const Entry& a, const Entry& b) const;
  std::string names_;  // every name given, one after another
  std::vector<Entry> entries_;
  std::vector<std::string> reasons_;
  mutable std::vector<std::uint32_t> order_;  // entries in name order, the replaced ones left out
  mutable bool sorted_ = true;
};

// What a filter call decided, per node name given.
struct FilterResult {
  std::vector<std::string> passed;
  NodeReasons failed;        // may be helped by preemption
  NodeReasons unresolvable;  // cannot be helped
};

struct NodeScore {
  std::string host;
  int score = 0;
};

// The device plugin's report of one node.
struct ChipReport {
  int phy_id = 0;
  bool healthy = true;
  bool in_use = false;
  // Telemetry for the views (issue 26); -1: not reported.
  int aicore_pct = -1;
  long long hbm_used_mb = -1, hbm_total_mb = -1;
};
struct Inventory {
  std::string resource;
  std::vector<ChipReport> chips;
};

// A pending allocation as the plugins see it.
struct Reservation {
  std::string ns;
  std::string pod;
  std::string job;  // "" for a pod without a job
  std::vector<int> chips;
};

// What a container of an allocated reservation gets.
struct Grant {
  std::string ns;
  std::string pod;
  std::string job;
  std::map<std::string, std::string> env;
  std::optional<nlohmann::ordered_json> ranktable;
};

inline constexpr const char* kRankTablePath = "/etc/ascend/hccl.json";

// A pod as the API server has it: what the scheduler needs to follow it (kube_records.h reads it).
struct ApiPod {
  PodInfo info;
  std::string node;        // spec.nodeName ("" : not bound)
  std::string phase;       // status.phase
  std::vector<int> chips;  // the ascend.huawei.com/chips annotation (ascending; empty: none)
  bool finished() const { return phase == "Succeeded" || phase == "Failed"; }
};

// What observe_pod did.
enum class Observed {
  kNothing,   // the scheduler's record already says what the API server says
  kReleased,  // the pod is gone or finished: its chips are free
  kAdopted,   // a pod bound by another replica (or before a restart): its chips are held now
  kConflict,  // the pod's chips annotation names chips the scheduler holds for another pod (logged)
};

class Scheduler {
 public:
  explicit Scheduler(topology::Cluster cluster,
                     std::chrono::milliseconds reservation_ttl = std::chrono::minutes(5));

  const topology::Cluster& cluster() const { return *cluster_; }

  // A copy of everything the views and save() read (chips, jobs, pods, counters), sharing the cluster: what
  // the server takes under its lock so that it can build the views and the state file outside it. Cheap
  // next to the JSON it saves building under the lock: no cache, no remembered pods, the cluster not
  // copied. The copy answers views and save() exactly as the original would at the time of the copy.
  Scheduler snapshot() const;
  // The same for one job only (placement_of, ranktable_of, env_of); ENOENT when there is no such job.
  Result<Scheduler> job_snapshot(const std::string& ns, const std::string& job) const;

  // How many pods passed filter and are not bound yet may be remembered (see seen_).
  std::size_t seen_cap() const { return seen_cap_; }
  std::size_t seen_count() const { return seen_.size(); }

  // Extender verbs. `nodes` are the candidate node names kube-scheduler sends (views into the request's
  // list, wire.h NodeNameList; the vector forms are for callers that hold strings).
  FilterResult filter(const PodInfo& pod, std::span<const std::string_view> nodes, Clock::time_point now);
  std::vector<NodeScore> prioritize(const PodInfo& pod, std::span<const std::string_view> nodes) const;
  FilterResult filter(const PodInfo& pod, const std::vector<std::string>& nodes, Clock::time_point now);
  std::vector<NodeScore> prioritize(const PodInfo& pod, const std::vector<std::string>& nodes) const;
  // prioritize's scores alone, in the order of `nodes` (the server writes its answer from these and the
  // request's names: no copy of 5 000 names).
  std::vector<int> scores(const PodInfo& pod, std::span<const std::string_view> nodes) const;
  // Records pod -> node -> chips. EINVAL: unknown pod / wrong node; ENOSPC: the chips are gone; EBUSY: a pod
  // of another job (or without one) waits on that node for as many chips (the kubelet does not say which pod
  // an Allocate is for, so two such reservations could be swapped: the second bind waits, kube-scheduler
  // retries it).
  // `claimed` (a pod whose chips come through DRA ResourceClaims): the phys of `node` that kube-scheduler's
  // allocator gave the pod's claims; the extender only picked the node. The pod's slot (or record, for a pod
  // without a job) takes exactly those chips instead of the planned ones (the planned ones not among them are
  // free again), and is Allocated at once: no device plugin Allocate comes for such a pod, so the wait for
  // another pod's Allocate of the same size does not apply. A job's rank table, env and records then name
  // these chips, the pod's ranks in ascending phy order. A retried bind with other claimed chips moves the
  // pod onto them. The allocator does not know the plan: a chip planned for a pod of the same job not bound
  // yet is taken, and that pod's reservation gets the chips this pod leaves instead (same node, same count).
  // EINVAL: a chip the node does not have, or not as many as the pod asks for; EBUSY: a chip another pod's
  // slot holds (named).
  Status bind(const std::string& ns, const std::string& name, const std::string& uid, const std::string& node,
              Clock::time_point now, const std::vector<int>* claimed = nullptr);
  // Undoes a bind whose Binding could not be created in the API server.
  void unbind(const std::string& ns, const std::string& name, Clock::time_point now);
  // Frees the pod's chips. ENOENT: the scheduler holds nothing for it.
  // `uid` (when given): only what that pod holds or passed filter with goes; a pod of the same name made
  // again since (an Indexed Job's or a StatefulSet's) keeps its reservation and its chips.
  Status release(const std::string& ns, const std::string& name, Clock::time_point now,
                 const std::string& uid = {});
  // Ends never-bound reservations older than the TTL and forgets pods seen long ago. Returns how many
  // slots expired; `jobs` (when given) gets the jobs they were of ("ns/job").
  int expire(Clock::time_point now, std::vector<std::string>* jobs = nullptr);

  // Device plugins. ENOENT: node not in the cluster file; EINVAL: a chip it does not have.
  Status put_inventory(const std::string& node, const Inventory& inv, Clock::time_point now);
  // The chips of `node` that DRA ResourceClaims hold (their status.allocation, made by kube-scheduler's
  // allocator), replacing the node's previous set: never offered, counted and shown as in use. A chip that
  // one of our slots holds too is fine (a bound DRA pod's own chips are both). Not saved by save() and kept
  // by load(): the API server's claims are their source, and a restarted scheduler reads them again. ENOENT:
  // node not in the cluster file; EINVAL: a chip it does not have (named).
  Status put_claimed(const std::string& node, const std::vector<int>& phys);
  Result<std::vector<Reservation>> reservations(const std::string& node) const;
  // ENOENT: no pending reservation of this size (a pod the scheduler does not know); EBUSY: there are
  // some, but none has exactly these chips (the message says which and why).
  Result<Grant> take_allocation(const std::string& node, std::vector<int> chips, Clock::time_point now);
  // Undoes take_allocation when the plugin's Allocate failed after it (another container of the call was
  // refused, or the rank table could not be written): the pod waits for its chips again. ENOENT: no allocated
  // pod holds exactly these chips there.
  Status return_allocation(const std::string& node, std::vector<int> chips, Clock::time_point now);

  // Views (JSON of docs/scheduler.md).
  nlohmann::ordered_json cluster_view() const;
  Result<nlohmann::ordered_json> placement_of(const std::string& ns, const std::string& job) const;
  Result<nlohmann::ordered_json> ranktable_of(const std::string& ns, const std::string& job) const;
  Result<std::map<std::string, std::string>> env_of(const std::string& ns, const std::string& job,
                                                    int pod) const;

  struct Counts {
    int free = 0, used = 0, unhealthy = 0, isolated = 0;
    int jobs = 0, pending_jobs = 0, running_jobs = 0, recovering_jobs = 0, failed_jobs = 0;
    std::uint64_t placed = 0, refused = 0;
  };
  Counts counts() const;

  // Bumped by every change that save() would show (the server persists when it moved).
  std::uint64_t changes() const { return changes_; }
  // counts().placed and .refused without the walk over the nodes.
  std::uint64_t placed_count() const { return placed_; }
  std::uint64_t refused_count() const { return refused_; }

  // ---- the API server's view (kube_sync.h feeds these) ----
  // A pod the API server has (`gone`: it was deleted). A pod gone or finished gives its chips back; a bound
  // pod with our chips annotation that this scheduler does not hold is adopted (another replica bound it,
  // or this one restarted); a job pod whose job is not known yet is left for observe_job. `why` gets the
  // reason of a conflict.
  Observed observe_pod(const ApiPod& p, bool gone, Clock::time_point now, std::string* why = nullptr);
  // A job's record as its ConfigMap holds it (job_record()'s format). Taken when the scheduler has no record
  // of that job or an older one (by version); EEXIST when its chips are held by something else.
  Status observe_job(const nlohmann::json& record, Clock::time_point now);
  // A job's record for its ConfigMap; nullopt when the scheduler holds no such job.
  std::optional<nlohmann::json> job_record(const std::string& ns, const std::string& job) const;
  // The pods holding chips ("ns/name") of one job, or of every job and pod when `job_key` is empty.
  std::vector<std::string> holders(const std::string& job_key = {}) const;
  // A node's health from its device ConfigMap (deviceinfo.h): `unhealthy` chips and chips in neither list
  // are not usable, `healthy` ones are. Which chips containers use is not there: the plugin's HTTP report
  // (put_inventory) and our own holds say that, and are kept. ENOENT: node not in the cluster file.
  // Returns the chips that turned unusable with this report.
  // `isolated` (ManuallySeparateNPU) are shown as such (they are in `unhealthy` too).
  Result<std::vector<int>> put_health(const std::string& node, const std::vector<int>& healthy,
                                      const std::vector<int>& unhealthy, Clock::time_point now,
                                      const std::vector<int>& isolated = {});
  // Who holds chip `phy` of `node` (a bound pod of a job or a pod without one); nullopt when nobody does.
  struct Holder {
    std::string ns, pod, job;  // job: "" for a pod without a job
  };
  std::optional<Holder> holder_of(const std::string& node, int phy) const;
  // What to do about chips of `node` that just failed (issue 23): the pods to evict so that their job comes
  // back on healthy chips, by the job's recovery annotation (`pod`: the pods on those chips; `job`: every
  // pod of the job; `none`: nobody), counting a restart on the job's record; a job whose max-restarts are
  // spent evicts nobody. Pods without a job are left to their owner.
  struct Recovery {
    std::string ns, job;            // the job
    std::vector<std::string> pods;  // to evict (names, in the job's namespace)
    std::string faulted_pod;        // the pod on the failed chips
    std::vector<int> chips;         // the failed chips it held
    std::string mode;               // pod | job | none
    int restarts = 0;               // after this one
    bool exhausted = false;         // max-restarts spent: nobody evicted
    bool failed_now = false;        // this fault made the job Failed
  };
  // A job that is Recovering or Failed keeps its record (and so its nodes, its restart count and its state)
  // while none of its pods holds chips, for kRecordHold after the state began; then it is forgotten by
  // expire(). `why` (the fault's level and codes) goes into the job's fault notes.
  std::vector<Recovery> recover(const std::string& node, const std::vector<int>& failed,
                                Clock::time_point now, const std::string& why = {});
  static constexpr std::chrono::minutes kRecordHold{10};
  // How long each job that recovered took from the fault to its last pod bound again (seconds), since the
  // last call: the server's histogram.
  std::vector<double> take_recoveries();
  // A job that is Running again after a recovery (its last pod bound again), for the AscendRecovered Event
  // and log line, since the last call (the last kKeptRecovered).
  struct Recovered {
    std::string ns, job;
    std::string pod;  // the pod whose binding completed the job again
    int restarts = 0;
    std::string mode;  // pod | job
    double cost_before_fault = 0;
    double cost_after = 0;
    double seconds = 0;  // from the fault to the last pod bound again
  };
  std::vector<Recovered> take_recovered();
  static constexpr std::size_t kKeptRecovered = 256;
  // A job's status (GET /v1/jobs/{ns}/{name}): its view with state, since, why, restarts and last faults.
  Result<nlohmann::ordered_json> status_of(const std::string& ns, const std::string& job) const;
  // The chips each node's last device ConfigMap called unusable (node name -> chips), for the recoveries a
  // starting scheduler owes once its cache is synced.
  std::map<std::string, std::vector<int>> failed_chips() const;
  // A node the API server does not have (deleted, or never registered): none of its chips is offered.
  void set_node_present(const std::string& node, bool present);
  // The job a pod's chips belong to ("ns/job"), or "" for a pod without a job or one not held.
  std::string job_of(const std::string& ns, const std::string& pod) const;
  // The version of a job's record; 0 when there is no such job.
  std::uint64_t job_version(const std::string& ns, const std::string& job) const;
  // The chips a bound pod holds and its first rank (-1 for a pod without a job); nullopt when it holds none.
  struct Held {
    std::vector<int> chips;
    int rank_start = -1;
    std::string uid;  // the pod's, once bound ("" for a reservation or a record without it)
  };
  std::optional<Held> held_by(const std::string& ns, const std::string& pod) const;

  // Persistence: everything that is not the cluster file.
  nlohmann::json save() const;
  // Replaces the state with a saved one; fails (EINVAL) naming what does not match the cluster.
  Status load(const nlohmann::json& saved);

 private:
  struct NodeState {
    std::uint64_t busy = 0;       // in use by containers (the plugin's report, or the cluster file's)
    std::uint64_t unhealthy = 0;  //
    std::uint64_t held = 0;       // held by our slots (reserved, bound, allocated)
    bool reported = false;
    bool absent = false;              // not in the API server
    std::uint64_t reported_sick = 0;  // unusable by the last device ConfigMap (what put_health compares with)
    std::uint64_t isolated = 0;       // ManuallySeparateNPU in the last device ConfigMap
    std::uint64_t claimed = 0;        // held by DRA ResourceClaims (put_claimed; not saved)
    // The plugin's last telemetry per chip slot (views only: not saved, not a change of state).
    struct Load {
      int aicore_pct = -1;
      long long hbm_used_mb = -1, hbm_total_mb = -1;
    };
    std::vector<Load> load;
    Clock::time_point reported_at{};
  };
  struct Seen {  // a pod that passed filter and is not bound yet
    PodInfo pod;
    Clock::time_point at{};
  };

  class NodeIndex;  // node name -> index and place in name order (extender.cc)
  Scheduler(std::shared_ptr<const topology::Cluster> cluster, std::shared_ptr<const NodeIndex> index,
            std::chrono::milliseconds ttl);
  void remember(const PodInfo& pod, Clock::time_point now);

  int node_index(std::string_view name) const;  // -1 when not in the cluster
  // node_index of each name. The last list's answer is kept: kube-scheduler sends prioritize the names that
  // passed filter (the last list, some left out, in order: one walk along it), and often the same list pod
  // after pod; comparing it costs a fraction of looking it up.
  const std::vector<int>& indices_of(std::span<const std::string_view> names) const;
  std::uint64_t free_mask(int node) const;
  std::uint64_t mask_of(int node, const std::vector<int>& phys) const;
  std::vector<int> phys_of(int node, std::uint64_t mask) const;
  void hold(const Slot& s);
  void unhold(const Slot& s);
  static bool holds(SlotState s) {
    return s == SlotState::kReserved || s == SlotState::kBound || s == SlotState::kAllocated;
  }

  FilterResult filter_job(const PodInfo& pod, std::span<const std::string_view> nodes, Clock::time_point now);
  FilterResult filter_plain(const PodInfo& pod, std::span<const std::string_view> nodes) const;
  std::string job_mismatch(const JobRecord& j, const PodInfo& pod) const;
  // The chips a pod's DRA claims name on `node` (bind's `claimed`) checked for a pod `key` asking for `want`
  // chips: the chips, ascending. `self`: the pod's own slot, when it has one; `job`: its job, whose
  // reservations (slots not bound) give way (move_pod) instead of being EBUSY.
  Result<std::vector<int>> claimed_chips(int node, const std::string& key, const std::vector<int>& claimed,
                                         std::size_t want, const Slot* self, const JobRecord* job) const;
  // Pod `index` of `j` takes `phys` (on its node, as many as it holds) instead of its chips; a reservation of
  // the job holding some of them takes chips the pod leaves in their place. Held bits, the placement and its
  // cost follow.
  void move_pod(JobRecord& j, std::size_t index, std::vector<int> phys);
  // A pod other than `pod_key` (and not of job `job_key`) bound to `node` for `size` chips and waiting for
  // them (within the TTL): its "ns/name", or empty. For a pod without a job (`job_key` empty) only job pods
  // count.
  std::string waiting_same_size(int node, std::size_t size, const std::string& job_key,
                                const std::string& pod_key, Clock::time_point now) const;
  Result<JobRecord> place_job(const PodInfo& pod, const std::vector<int>& candidates, Clock::time_point now);
  // The node-level choice for a pod without a job, or why not.
  Result<std::vector<int>> choose_on(int node, const std::string& resource, int chips) const;
  // choose() is a pure function of (node type, free chips, size) and most nodes of a large cluster share
  // those: its answers are remembered (bounded; cleared when full), with the score prioritize gives a node
  // for the choice.
  struct Choice {
    Result<std::vector<int>> chips;
    int score = 0;  // when chips.ok()
  };
  const Choice& remembered_choice(int node, int chips, std::uint64_t free) const;
  // The answer for `chips` chips on a node of the pod's resource: the loops over every node of a request
  // (filter and prioritize of a pod without a job) read it from each node's memo, which holds while the
  // node's chips and the remembered choices are as they were.
  struct NodeAnswer {
    std::uint64_t busy = 0, unhealthy = 0, held = 0, claimed = 0;
    bool absent = false;
    int chips = -1;
    std::uint64_t generation = 0;    // of choices_
    const Choice* choice = nullptr;  // enough chips are free: the choice for them
    std::string why;                 // else why not (ENOSPC)
  };
  const NodeAnswer& answer_on(int node, int chips) const {
    // Inline while it holds (5 000 nodes, twice a pair): only a node whose chips moved goes the long way.
    auto n = static_cast<std::size_t>(node);
    if (n < answers_.nodes.size()) {
      const NodeState& s = nodes_[n];
      const NodeAnswer& a = answers_.nodes[n];
      if (a.chips == chips && a.generation == choices_generation_ && a.busy == s.busy &&
          a.unhealthy == s.unhealthy && a.held == s.held && a.claimed == s.claimed && a.absent == s.absent) {
        return a;
      }
    }
    return answer_anew(node, chips);
  }
  const NodeAnswer& answer_anew(int node, int chips) const;
  std::string no_room(int node, std::uint64_t free, int chips) const;
  // Per type of the cluster: whether its chips are `resource`.
  std::vector<char> types_of(const std::string& resource) const;
  const std::string& resource_of(int node) const;
  Grant grant_of(const JobRecord& j, int index) const;
  void forget_if_done(const std::string& job_key);
  nlohmann::ordered_json job_view(const JobRecord& j) const;
  nlohmann::json job_entry(const JobRecord& j) const;
  Result<JobRecord> read_job(const nlohmann::json& entry, const std::string& where) const;
  Observed adopt_job_pod(const ApiPod& p, Clock::time_point now, std::string* why);
  Observed adopt_plain_pod(const ApiPod& p, int node, Clock::time_point now, std::string* why);

  std::shared_ptr<const topology::Cluster> cluster_;  // never changes: shared by snapshots
  std::shared_ptr<const NodeIndex> index_;            // node name -> index (Cluster::node_index is a scan)
  std::chrono::milliseconds ttl_;
  std::vector<NodeState> nodes_;
  struct ChoiceKey {
    int type;
    int chips;
    std::uint64_t free;
    bool operator==(const ChoiceKey&) const = default;
  };
  struct ChoiceHash {
    std::size_t operator()(const ChoiceKey& k) const {
      return std::hash<std::uint64_t>()(k.free * 1000003ULL + static_cast<std::uint64_t>(k.type) * 131ULL +
                                        static_cast<std::uint64_t>(k.chips));
    }
  };
  mutable std::unordered_map<ChoiceKey, Choice, ChoiceHash> choices_;
  mutable std::uint64_t choices_generation_ = 1;  // bumped when choices_ is cleared
  // The nodes' answers (answer_on), sized at first use. They point into choices_: a copy of the scheduler
  // starts without them.
  struct Answers {
    std::vector<NodeAnswer> nodes;
    Answers() = default;
    Answers(const Answers&) {}
    Answers(Answers&&) = default;
    Answers& operator=(const Answers&) {
      nodes.clear();
      return *this;
    }
    Answers& operator=(Answers&&) = default;
    ~Answers() = default;
  };
  mutable Answers answers_;
  mutable std::vector<std::string> last_names_;  // indices_of
  mutable std::vector<int> last_indices_;
  mutable std::vector<int> sub_indices_;   // of a list that is the last one with names left out
  std::map<std::string, JobRecord> jobs_;  // by "ns/name"
  std::map<std::string, PodRecord> pods_;  // pods without a job, by "ns/name"
  // Pods that passed filter, by "ns/name", until bound or the TTL. Capped at the cluster's chip count (at
  // least kMinSeen): every remembered pod asks for at least one chip and binds only onto free chips, so more
  // pods than chips cannot all be waiting for a bind that succeeds; when full, the oldest is forgotten (a pod
  // forgotten too early fails its bind as unknown and kube-scheduler filters it again). With the names
  // bounded (pod.h), one entry is at most a few KiB: 40 000 chips (5 000 nodes of 8) stay under 100 MiB.
  static constexpr std::size_t kMinSeen = 1024;
  std::map<std::string, Seen> seen_;
  std::size_t seen_cap_ = kMinSeen;
  std::uint64_t changes_ = 0;
  std::uint64_t placed_ = 0;
  std::uint64_t refused_ = 0;
  std::vector<double> recoveries_;    // take_recoveries()
  std::vector<Recovered> recovered_;  // take_recovered()
  // After a pod of `j` is bound: Pending or Recovering becomes Running once every pod is bound.
  void settle(JobRecord& j, Clock::time_point now);
};

}  // namespace ascend::scheduler
