// Publishes this node's chips to the Kubernetes API server, as MindCluster's device plugin does, so that
// Volcano's Ascend plugin and our scheduler read them: the ConfigMap kube-system/mindx-dl-deviceinfo-<node>
// (deviceinfo.h) and the Node labels schedulers select on (accelerator, chip name, count, driver version,
// server type).
//
// The decisions are pure functions (what the ConfigMap says for a snapshot, when it is due, which labels
// differ); KubePublisher runs them on a thread of its own and makes the requests through kube::Client. It
// writes the ConfigMap when what it says changes (the plugin's version wakes it) and at least every
// `refresh_every` (MindCluster refreshes UpdateTime every minute): create, and on AlreadyExists a
// merge-patch of DeviceInfoCfg and its label (so that keys others write, ManuallySeparateNPU, stay). The
// labels are merge-patched only when a value differs from the Node's (read first). Failures are logged once
// per distinct message and retried with a doubling backoff; an exception is logged and the thread carries on.
//
// RAII: the constructor starts the thread, the destructor stops and joins it (at most one request's timeout
// later). Thread-safe: stats() may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "ascend/common/error.h"
#include "ascend/deviceinfo/deviceinfo.h"
#include "ascend/npu/seam.h"
#include "ascend/plugin/faults.h"

namespace ascend::kube {
class Client;
}

namespace ascend::plugin {

class Plugin;

// ---- pure -------------------------------------------------------------------------------------------

// Graded faults (faults.h): what the ConfigMap says about the chips of `host` (the plugin's view, whose
// health follows the levels): the -Unhealthy list from that health; a fault entry per chip with codes, whose
// level is the table's (fault_level, large_model_fault_level and fault_handling: "RestartRequest",
// "SeparateNPU", "ManuallySeparateNPU"...); ManuallySeparateNPU names the chips of `isolated`.
deviceinfo::NodeDevices node_devices(const npu::DeviceSnapshot& host, const std::vector<ChipFaults>& faults,
                                     const std::set<int>& isolated, const std::string& resource,
                                     const std::string& node, std::int64_t now);
// The isolation an operator asked for by editing ManuallySeparateNPU: `listed` is what the ConfigMap names
// now, `written` what this plugin last wrote there (nullopt: nothing yet, so every listed chip is adopted).
struct IsolationEdits {
  std::set<int> isolate;  // listed, not written: the operator added them (or a restart adopts them)
  std::set<int> clear;    // written, no longer listed: the operator removed them
  bool operator==(const IsolationEdits&) const = default;
};
IsolationEdits isolation_edits(const std::vector<int>& listed,
                               const std::optional<std::vector<int>>& written);

// What the ConfigMap says about the whole chips of `host` (resource `resource`) at `now` (unix seconds):
// OK and Warning chips are healthy (inventory.h's rule), Alarm and Critical unhealthy; every chip with faults
// gets a fault entry, its codes as npu-smi prints them, SeparateNPU when the faults make it unhealthy, else
// NotHandleFault. The seam knows no network health: nothing is network-unhealthy.
deviceinfo::NodeDevices node_devices(const npu::DeviceSnapshot& host, const std::string& resource,
                                     const std::string& node, std::int64_t now);
// MindCluster's servertype, "<card type>-<AI cores of a chip>" ("Ascend910B-20", "Ascend910A3-24",
// "Ascend310P-8"); empty when the host has no chips.
std::string server_type(const npu::DeviceSnapshot& host);
deviceinfo::NodeFacts node_facts(const npu::DeviceSnapshot& host, const std::string& resource);
// Whether the ConfigMap must be written: never written, what it says (all but UpdateTime) changed, or the
// last write is `refresh` old.
bool configmap_due(const std::optional<deviceinfo::NodeDevices>& written, const deviceinfo::NodeDevices& now,
                   std::chrono::milliseconds since_written, std::chrono::milliseconds refresh);
// The merge patch that updates an existing device ConfigMap to `cm` (to_configmap's): its label,
// DeviceInfoCfg and ManuallySeparateNPU (read first: isolation_edits).
nlohmann::json configmap_patch(const nlohmann::json& cm);
// The merge patch giving the v1 Node `node` the labels `want`, naming only those whose value differs (or
// that are missing); nullopt when the Node has them all.
std::optional<nlohmann::json> label_patch(const std::map<std::string, std::string>& want,
                                          const nlohmann::json& node);

// ---- the thread -------------------------------------------------------------------------------------

struct KubePublisherOptions {
  std::chrono::milliseconds refresh_every{60000};
  // Dynamic Resource Allocation (--dra): the node's chips as ResourceSlices too (dra_slices.h), written
  // whenever what they say changes (a fault, an isolation, the Node's leaf/spine labels at the refresh).
  bool dra_slices = false;
  // --dra-vnpu: the chips' vNPU templates too, as partitionable devices (dra_slices.h). The API server keeps
  // shared counters only while its DRAPartitionableDevices gate is on, and drops them silently otherwise, so
  // the publisher learns which it is before it publishes a vNPU: it first writes the chips with their
  // counters and no vNPU devices (safe either way), and reads the answer. Counters kept: the vNPUs follow at
  // once. Dropped: the chips alone stay published (what the server kept is that), with one warning, and
  // nothing is written again until something changes (no flapping). Slices listed with counters already
  // mean the gate is on (a restart writes nothing). A later write whose counters are dropped (the gate
  // turned off since) takes the vNPUs out again at once. A gate turned on later is seen after a restart.
  bool dra_vnpu = false;
  std::chrono::milliseconds backoff_first{500};
  std::chrono::milliseconds backoff_max{30000};
};

class KubePublisher {
 public:
  // `plugin` and `client` must outlive the publisher. `node` is this node's name in the API server. The
  // plugin is told of the isolation an operator asks for in ManuallySeparateNPU (read before each write, so
  // noticed within refresh_every), and its level changes become Events on the Node.
  KubePublisher(Plugin& plugin, kube::Client& client, std::string node, KubePublisherOptions opts);
  ~KubePublisher();
  KubePublisher(const KubePublisher&) = delete;
  KubePublisher& operator=(const KubePublisher&) = delete;

  struct Stats {
    int passes = 0;            // publications tried (something was due)
    int configmap_writes = 0;  // ConfigMap creates and patches that succeeded
    int label_patches = 0;     // Node label patches that succeeded
    int failures = 0;          // passes that failed (retried)
    int slice_writes = 0;      // ResourceSlice creates, replaces and deletes that succeeded (--dra)
  };
  Stats stats() const;

 private:
  void loop();
  // One publication of the plugin's state now: the ConfigMap when due, then the labels when the ConfigMap was
  // due or the facts changed. Fails with the first failure.
  Status publish();
  std::chrono::milliseconds since_written() const;
  Status write_configmap(const deviceinfo::NodeDevices& d);
  // Creates the ConfigMap; true when it was there already.
  Result<bool> create_configmap(const nlohmann::json& cm);
  Status reconcile_labels(const deviceinfo::NodeFacts& facts);
  // --dra: lists this node's ResourceSlices and makes them say what `host` says (a new pool generation when
  // they do not). The Node is read for its uid and leaf/spine labels.
  Status publish_slices(const npu::DeviceSnapshot& host);
  // Writes `want` over the slices `have` (listed): replaced, created, the rest deleted. True when every
  // answer kept the counters `want` carried (dra::counters_kept).
  Result<bool> write_slices(const std::vector<nlohmann::json>& have, const std::vector<nlohmann::json>& want);
  // Reads ManuallySeparateNPU and applies the operator's edits to the plugin (isolation_edits).
  Status sync_isolation();
  // One Event on the Node per level change the plugin reports; failures are logged, not retried.
  void post_events();
  void count(int Stats::*field);
  bool sleep(std::chrono::milliseconds d);
  bool stopping() const;

  Plugin& plugin_;
  kube::Client& client_;
  const std::string node_;
  const std::string resource_;  // the whole-chip resource
  const KubePublisherOptions opts_;
  // The loop's own state (its thread only).
  std::optional<deviceinfo::NodeDevices> written_;
  std::chrono::steady_clock::time_point written_at_{};
  std::optional<deviceinfo::NodeFacts> labelled_;  // the facts whose labels the Node was last found to have
  bool exists_ = false;                            // the ConfigMap is there: patch it, do not create it
  std::optional<std::vector<int>> separated_;      // the ManuallySeparateNPU last written
  std::string read_version_;                       // the ConfigMap's resourceVersion sync_isolation read
  std::string node_uid_;                           // from the last GET of the Node (Events name it)
  std::string last_list_error_;                    // a bad ManuallySeparateNPU is said once
  std::int64_t slice_generation_ = 0;              // the pool generation last written (--dra)
  std::optional<bool> partitionable_;  // --dra-vnpu: whether the API server keeps counters (unknown yet)
  bool said_gate_off_ = false;         // its warning is given once
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  Stats stats_;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace ascend::plugin
