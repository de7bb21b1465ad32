// The device query seam: the one interface through which the runtime hook, the device plugin and the
// scheduler tools learn about NPUs and change them, in the seam's own types (seam.h). Its backends (the
// emulator; DCMI, through dlopen or the helper of the static binaries) sit below it, in libraries the
// components do not see: a component gets a DeviceQuery from the one factory, open_device_query (backend.h).
// Implementations are thread-safe: every call may come from any thread.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/npu/seam.h"

namespace ascend::npu {

// Keeps a subscription alive; destroying it stops the callbacks (and joins the watcher thread).
class Subscription {
 public:
  virtual ~Subscription() = default;
};

class DeviceQuery {
 public:
  virtual ~DeviceQuery() = default;

  // One consistent snapshot of the host: chips (ids, model, health, HBM, AICore, bus id, NUMA node, HCCS
  // domain; DeviceSnapshot::link gives the link type between any two), device nodes, vNPUs, templates.
  virtual Result<DeviceSnapshot> snapshot() const = 0;

  // The live telemetry of every chip, sorted by phy id (utilization, on-chip memory, temperature, power,
  // health and error codes, link): what a metrics exporter reads at every scrape. Backends answer it with
  // only the calls it needs (the emulator: one state read; DCMI: dcmi_get_device_utilization_rate,
  // _hbm_info, _temperature, _power_info, _health, _errorcode_v2, _network_health per chip). The default
  // takes a snapshot.
  virtual Result<std::vector<ChipTelemetry>> telemetry() const;

  // The host path of an absolute path as the host sees it ("/dev/davinci0" -> "<root>/dev/davinci0").
  virtual std::string host_path(const std::string& abs_path) const = 0;

  // The driver files every NPU container receives, absolute as the host sees them (before host_path). The
  // default is the seam's list (driver_files.h), which both backends share today.
  virtual std::vector<std::string> driver_files() const;

  // Creates a vNPU of `template_name` on chip `phy_id`; `id` picks the vNPU id (else the lowest free in
  // 100+16*phy .. +15). Refuses over-commit of AICore, memory and AICPU. Creates /dev/vdavinci<id>. A
  // non-empty `owner` (the runtime, for a container) is recorded with the vNPU in the same step: it makes the
  // vNPU dynamic, in use, and a candidate for `vnpu gc` once that container is gone.
  virtual Result<Vnpu> create_vnpu(int phy_id, const std::string& template_name, std::optional<int> id,
                                   const VnpuOwner& owner) = 0;
  // Destroys vNPU `vnpu_id` (on chip `phy_id` when given, which must match) and removes its node. With
  // `holder`, only while the vNPU still has that owner (its non-empty fields compared; ESTALE otherwise), so
  // that a cleanup never destroys a vNPU that another container got since.
  virtual Status destroy_vnpu(int vnpu_id, std::optional<int> phy_id,
                              const std::optional<VnpuOwner>& holder) = 0;

  // Calls `on_change` with the new snapshot after every change (health, vNPUs, mode), from a watcher thread:
  // within 100 ms for the emulator (it watches the state file), within the poll interval for DCMI (which has
  // no notification; default 200 ms). Telemetry alone (utilization, memory in use, temperature, power) is
  // not a change for DCMI, whose values move at every poll on a busy host; the emulator reports the change
  // of its state file that starts or stops work. The callback must not block for long.
  using ChangeCallback = std::function<void(const DeviceSnapshot&)>;
  virtual Result<std::unique_ptr<Subscription>> subscribe(ChangeCallback on_change) const = 0;
};

}  // namespace ascend::npu
