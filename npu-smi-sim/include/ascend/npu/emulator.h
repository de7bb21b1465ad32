// The emulated Ascend host: everything a real host has, laid out under a root directory (device nodes,
// the driver file tree, npu-smi, hccn.conf) plus the state file that stands in for the driver's memory.
//
// The state file lives inside the driver tree (kStateDir), so that a container that receives the driver
// mounts read-only lets its npu-smi read it too. Every change takes an exclusive lock on a file beside it,
// re-reads the state, applies the change and replaces the file atomically: concurrent npu-sim, npu-smi,
// hook and plugin processes never lose an update, and readers never need the lock.
//
// Thread-safe: every method may be called from any thread and any process.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/npu/backend.h"  // resolve_root
#include "ascend/npu/device_query.h"
#include "ascend/npu/state.h"

namespace ascend::npu {

// Relative to the root.
inline constexpr const char* kStateDir = "usr/local/Ascend/driver/lib64/npu-sim";
inline constexpr const char* kStateFile = "usr/local/Ascend/driver/lib64/npu-sim/state.json";

struct LoadOptions {
  std::optional<DeviceMajors> majors;  // default: free majors of the running kernel
  std::string npu_smi_binary;  // static npu-smi to copy into usr/local/bin; empty: next to npu-sim. The
                               // driver stub library (libascend_driver_stub.so) is taken from its folder.
  int node_index = 0;          // hccn.conf addressing (see device_ip)
  bool force = false;          // replace an already loaded host
  bool make_nodes = true;      // false: skip mknod (for tests that are not root)
  bool keep_vnpus = false;     // reload a state as it was: its vNPUs (nodes made again) and device IPs; a
                               // reboot with the driver's vnpu-cfg-recover, which restores vNPUs at boot
};

// Picks free character majors: candidates 234..254 and 384..511 not listed in `proc_devices_text`.
Result<DeviceMajors> pick_free_majors(const std::string& proc_devices_text);

class Emulator final : public DeviceQuery {
 public:
  explicit Emulator(std::string root);

  const std::string& root() const { return root_; }
  std::string state_path() const;
  bool loaded() const;

  // Lays the host out under the root. Fails when a host is already loaded (unless opts.force).
  Status load(const HostState& profile, const LoadOptions& opts);
  // Removes exactly what load created (and vNPU nodes); other files under the root are untouched.
  Status unload();
  // A reboot of the emulated host: unload, then load the same host again with its vNPUs (as the driver's
  // vnpu-cfg-recover restores them at boot; their containers are gone) and faults cleared. opts.majors may
  // give the reloaded driver other majors; opts.keep_vnpus and opts.force are implied.
  Status reboot(LoadOptions opts);

  // Applies `change` to the state under the lock and commits it (generation + 1). When `change` fails,
  // nothing is written.
  Status update(const std::function<Status(HostState&)>& change);

  Status set_fault(int phy_id, std::uint32_t code, std::optional<Health> severity);
  Status clear_faults(int phy_id);
  Status set_vnpu_mode(const std::string& mode);  // "docker" | "vm"; refused while vNPUs exist

  // Runs `w` on its chip in place of what ran there (workload.h); a workload of all zeros stops it.
  // Workloads that have ended are dropped on the way. A load or reboot stops every workload.
  Status set_workload(const Workload& w);
  // Takes a chip's RoCE port up or down (what DCMI's network health and the exporter's link status show);
  // a load or reboot brings every port up.
  Status set_link(int phy_id, bool up);

  // The state file as it is now (the emulator's own view, with what the seam does not carry).
  Result<HostState> read_state() const;
  // The host as a query sees it at this moment: read_state() with the running workloads applied
  // (workload.h). Never write it back: update() works on the state file's idle values.
  Result<HostState> live_state() const;

  // DeviceQuery
  Result<DeviceSnapshot> snapshot() const override;
  Result<std::vector<ChipTelemetry>> telemetry() const override;
  std::string host_path(const std::string& abs_path) const override;
  Result<Vnpu> create_vnpu(int phy_id, const std::string& template_name, std::optional<int> id,
                           const VnpuOwner& owner) override;
  Status destroy_vnpu(int vnpu_id, std::optional<int> phy_id,
                      const std::optional<VnpuOwner>& holder) override;
  Result<std::unique_ptr<Subscription>> subscribe(ChangeCallback on_change) const override;

 private:
  std::string root_;
};

// The vNPU planning rules, pure: which id a new vNPU gets and whether the chip has room for it.
Result<Vnpu> plan_vnpu(const HostState& s, int phy_id, const std::string& template_name,
                       std::optional<int> id);

}  // namespace ascend::npu
