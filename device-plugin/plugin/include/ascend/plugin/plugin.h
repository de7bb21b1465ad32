// The plugin's state, shared by every resource it serves: the latest device-query snapshot, the ledger
// (dynamic vNPU promises and, when tracked, the whole chips handed out) and a version that changes whenever
// what any resource advertises, or what the scheduler is told, may have changed. The gRPC services
// (service.h) are thin wrappers over it.
//
// With a scheduler (SchedulerApi), GetPreferredAllocation prefers its reservations and Allocate tells it
// which chips were taken; those HTTP calls are made with the plugin's mutex released, so a slow scheduler
// holds up only the call that waits for it, never ListAndWatch. The rank tables Allocate wrote are kept
// current: every Config::ranktable_refresh the scheduler is asked for each job's table, and a changed one
// is written over every copy of that job on this node (refresh_ranktables).
//
// Thread-safe: every method may be called from any thread (gRPC handler threads, the device-query watcher
// thread, the daemon's loop).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/npu/device_query.h"
#include "ascend/plugin/allocate.h"
#include "ascend/plugin/config.h"
#include "ascend/plugin/faults.h"
#include "ascend/plugin/inventory.h"
#include "ascend/plugin/ledger.h"
#include "ascend/plugin/scheduler_client.h"
#include "ascend/plugin/scheduler_plan.h"

namespace ascend {
class LoopClock;
}  // namespace ascend

namespace ascend::plugin {

class Metrics;

// Rank tables are read by the container (through the kubelet's bind mount of their folder) and by root; no
// one else on the node needs a job's addresses. The folder (one per pod) is searchable by the same group.
inline constexpr mode_t kRanktableMode = 0640;
inline constexpr mode_t kRanktableFolderMode = 0750;

struct PreferredRequest {
  std::vector<std::string> available;
  std::vector<std::string> must_include;
  int size = 0;
};

class Plugin {
 public:
  // Takes the first snapshot and plans the resources. `query`, `metrics` (may be null), `scheduler` (may
  // be null: no scheduler) and `clock` (may be null: real time) must outlive the plugin. The driver check and
  // the rank-table refresh wait on `clock` (a test passes one it advances: ascend/common/loop_clock.h).
  static Result<std::unique_ptr<Plugin>> create(npu::DeviceQuery& query, Config cfg, Metrics* metrics,
                                                SchedulerApi* scheduler = nullptr,
                                                LoopClock* clock = nullptr);
  ~Plugin();

  // Subscribes to device-query changes (health, vNPUs) and starts the driver check (check_driver every
  // Config::health_interval) and, with a scheduler, the rank-table refresh (refresh_ranktables every
  // Config::ranktable_refresh). Until then the first snapshot is used.
  Status watch();

  // Asks the device query for a snapshot: a failure marks the driver lost (every device Unhealthy, Allocate
  // refused, one log line); a snapshot of another driver load, or after a loss, replaces the host.
  void check_driver();
  // Why the driver is unavailable; empty while it answers.
  std::string driver_lost() const;

  const Config& config() const { return cfg_; }
  const std::vector<ResourceSpec>& resources() const { return resources_; }
  const npu::DeviceQuery& query() const { return query_; }

  // The advertised devices of `res` (withheld ones left out) and the version they belong to.
  struct Listing {
    std::uint64_t version = 0;
    std::vector<DeviceEntry> devices;
  };
  Listing list(const ResourceSpec& res) const;
  // The current version (changes whenever what any resource advertises may have changed).
  std::uint64_t version() const;
  // Waits until the version differs from `seen`, `timeout` passes or wake_all() is called.
  void wait_change(std::uint64_t seen, std::chrono::milliseconds timeout) const;
  void wake_all() const;

  // Whole chips: the first scheduler reservation that fits each request, else the node-level choice.
  Result<std::vector<std::vector<std::string>>> preferred(
      const ResourceSpec& res, const std::vector<PreferredRequest>& requests) const;
  // Whole chips with a scheduler: each container's chips are reported taken; a 200 adds the pod's env and
  // rank table, a 409 fails the call (FAILED_PRECONDITION) and undoes what it claimed, anything else answers
  // as without a scheduler.
  Result<std::vector<ContainerAllocation>> allocate(const ResourceSpec& res,
                                                    const std::vector<std::vector<std::string>>& requests);

  // What the scheduler is told about the whole chips now.
  InventoryReport inventory() const;

  // Asks the scheduler for the rank table of every job that has a rank table here and writes a table that
  // changed over each of that job's copies (atomically: a temporary file in the pod's folder renamed over
  // the old one, whose mode and group it keeps), except a copy written after the question was asked (its
  // Allocate's grant is at least as new). A job the scheduler no longer has (404), or an error, leaves the
  // copies as they are; each distinct error is logged once. Returns how many copies were rewritten.
  int refresh_ranktables();

  // A new snapshot (the device-query subscription calls this).
  void on_host_change(const npu::DeviceSnapshot& host);
  // Ends promises and whole-chip claims the kubelet no longer lists (resource name -> device ids in use).
  int reconcile(const std::map<std::string, std::set<std::string>>& in_use, std::chrono::milliseconds grace);

  // The host as the rest of the plugin sees it: health follows the fault levels (faults.h FaultGrades::view).
  npu::DeviceSnapshot host() const;
  Ledger ledger() const;

  // Graded faults (faults.h): the chips with faults or isolated, and the isolated ones.
  std::vector<ChipFaults> chip_faults() const;
  std::set<int> isolated() const;
  // An operator isolated a chip / cleared its isolation (the device ConfigMap's ManuallySeparateNPU): the
  // chip turns Unhealthy / follows its faults again. Logged when its level changes.
  void isolate(int phy_id, const std::string& why);
  void clear_isolation(int phy_id);
  // The level changes since the last call (at most kKeptLevelChanges, oldest dropped), for the Events.
  std::vector<LevelChange> take_level_changes();
  static constexpr std::size_t kKeptLevelChanges = 256;

 private:
  Plugin(npu::DeviceQuery& query, Config cfg, Metrics* metrics, SchedulerApi* scheduler, FaultGrades grades,
         std::vector<ResourceSpec> resources);
  // Tells the scheduler which chips each container got and adds what it answers to `out`.
  Status take_reservations(const std::vector<std::vector<int>>& phys, std::vector<ContainerAllocation>& out);
  // take_reservations' loop; `taken` collects the reservations it took.
  Status take_each(const std::vector<std::vector<int>>& phys, std::vector<ContainerAllocation>& out,
                   std::vector<std::vector<int>>& taken);
  void release_chips(const std::vector<std::vector<int>>& phys);
  // Writes a grant's rank table in its pod's folder (kRanktableFolderMode; the file kRanktableMode, both in
  // --ranktable-group) and remembers that it serves `phys` and the grant's job.
  Status write_ranktable(const RanktableHostPaths& paths, const Grant& grant, const std::vector<int>& phys);
  // refresh_ranktables' write: `content` over the copies of job `ns`/`job` written up to write `seen`.
  int rewrite_job_ranktables(const std::string& ns, const std::string& job, const std::string& content,
                             std::uint64_t seen);
  // refresh_ranktables every Config::ranktable_refresh until stopping_ (the thread ranktable_refresh_ runs).
  void refresh_loop();
  // Removes the rank tables whose chips `freed` says are free (mu_ held).
  void remove_ranktables_locked(const std::function<bool(const std::set<int>&)>& freed);
  // Removes the rank tables none of whose chips the ledger claims any more (mu_ held).
  void remove_unclaimed_ranktables_locked();
  void mark_lost(const std::string& why);
  // Applies level changes (mu_ held): the view becomes host_ (unless the driver is lost), the version moves,
  // each change is kept for take_level_changes(); the caller logs them (log_changes) after unlocking.
  void apply_grades_locked(std::vector<LevelChange> changes);
  static void log_changes(const std::vector<LevelChange>& changes);
  // Logs when the kubelet hands a container ids that no GetPreferredAllocation answer of that size named.
  void note_unpreferred(const ResourceSpec& res, const std::vector<std::vector<std::string>>& requests) const;

  npu::DeviceQuery& query_;
  const Config cfg_;
  Metrics* metrics_;
  SchedulerApi* scheduler_;
  const std::vector<ResourceSpec> resources_;

  std::mutex refresh_mu_;  // check_driver: reading the host and applying it are one step
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  npu::DeviceSnapshot host_;  // grades_.view(), or every chip failed while the driver is lost
  FaultGrades grades_;
  std::vector<LevelChange> level_changes_;  // not yet taken (take_level_changes)
  Ledger ledger_;
  std::uint64_t version_ = 1;
  mutable std::uint64_t wakeups_ = 0;
  std::string lost_;  // non-empty: the driver does not answer (why); host_ then shows every chip failed
  // The last GetPreferredAllocation answers per resource (sorted id sets), to notice a kubelet that chose
  // otherwise.
  mutable std::map<std::string, std::vector<std::vector<std::string>>> preferred_;
  // The rank tables this plugin wrote, by their pod's host folder (mounted in the container). A folder goes
  // when none of its chips is claimed any more (the pod-resources reconcile, a failed Allocate) or when one
  // of them is handed out again.
  struct HostRanktable {
    std::string file;           // in the folder
    std::set<int> chips;        // of the grants it was written for
    std::string ns;             // the pod's namespace
    std::string job;            // the grant's job; empty: none, never refreshed
    std::string content;        // what the file holds
    std::uint64_t written = 0;  // ranktable_writes_ when Allocate wrote it
    std::string failed;         // the last rewrite's error, logged once
  };
  std::map<std::string, HostRanktable> ranktables_;
  std::uint64_t ranktable_writes_ = 0;  // Allocate's rank-table writes so far

  // refresh_ranktables: one pass at a time; per job ("ns/job"), the error last logged.
  std::mutex ranktable_refresh_mu_;
  std::map<std::string, std::string> refresh_errors_;  // under ranktable_refresh_mu_

  // The driver check (check_driver every health_interval) and the rank-table refresh; stopped before the
  // subscription.
  std::thread health_;
  std::thread ranktable_refresh_;
  bool stopping_ = false;       // under mu_
  LoopClock* clock_ = nullptr;  // what they wait on (set by create)

  std::unique_ptr<npu::Subscription> subscription_;  // last: stopped first on destruction
};

}  // namespace ascend::plugin
