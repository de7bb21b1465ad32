// The emulated host: every fact about its chips (the profile) and what changes at run time (faults,
// vNPUs, vnpu-mode). One `HostState` is one consistent snapshot, as read from the state file; it is a
// plain value (copy it freely, share it read-only between threads).
//
// The JSON form (to_json/from_json) is the state file's format and also the format of custom profiles
// (YAML with the same field names). Unknown fields are rejected so that a typo does not go unnoticed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ascend/common/error.h"
#include "ascend/npu/seam.h"

namespace ascend::npu {

// Character device majors of the emulated driver. Chosen at load time among majors the running kernel
// has not registered (see /proc/devices) and recorded here.
struct DeviceMajors {
  int davinci = 0;
  int manager = 0;
  int svm = 0;
  int hdc = 0;
  int vdavinci = 0;
};

// "a,b,c,d,e": the five majors in the order above (npu-sim --majors).
Result<DeviceMajors> parse_majors(std::string_view s);

// Work running on one chip, as `npu-sim load-gen` records it (workload.h says how it moves the chip's
// telemetry). Kept in the state file so that every process that reads the host sees it.
struct Workload {
  int phy_id = 0;
  int aicore_pct = 0;         // AICore utilization it causes, 0-100
  int aicpu_pct = 0;          // AICPU utilization, 0-100
  long long hbm_mb = 0;       // on-chip memory it holds, MB
  std::int64_t until_ms = 0;  // Unix time in ms when it ends; 0: until stopped
  bool operator==(const Workload&) const = default;
};

struct HostState {
  int schema = 1;
  std::string profile;      // "atlas800t-a2", or a custom profile's name
  std::string description;  // one line for humans
  Family family = Family::k910B;
  std::string chip_type = "Ascend";  // npu-smi -m prefix: "Ascend 910B3"
  std::string smi_version = "24.1.rc1";
  std::string driver_version = "24.1.rc1";
  std::string firmware_version = "7.5.0.1.129";
  std::string resource_name;  // Kubernetes resource for a whole chip: "huawei.com/Ascend910"
  VnpuCapacity vnpu_capacity;
  std::vector<VnpuTemplate> templates;
  std::vector<Chip> chips;          // sorted by phy_id
  std::vector<Vnpu> vnpus;          // sorted by id
  std::vector<Workload> workloads;  // at most one per chip, sorted by phy_id (ended ones may linger)
  DeviceMajors majors;
  std::string vnpu_mode = "docker";  // "docker" or "vm"
  bool device_nodes = true;          // the host has real device nodes (false: loaded by a non-root test)
  std::uint64_t generation = 0;      // bumped by every committed change
  std::string boot_id;               // new at every load (a driver load, i.e. a boot of the emulated host)

  const Chip* chip(int phy_id) const;
  Chip* chip(int phy_id);
  const Vnpu* vnpu(int id) const;
  const VnpuTemplate* find_template(std::string_view name) const;
  Link link(int phy_a, int phy_b) const;
  // Cards in order, each with its chips' phy ids in chip-index order.
  std::vector<std::vector<int>> cards() const;
  bool holds_vnpus(int phy_id) const;

  DeviceNode chip_node(int phy_id) const;
  DeviceNode vnpu_node(int vnpu_id) const;
  std::vector<DeviceNode> control_nodes() const;  // davinci_manager, devmm_svm, hisi_hdc

  // The seam's view of this host (to_snapshot): lets an emulated host stand wherever a DeviceSnapshot is
  // read (tests, profile-based planning). A copy: never keep a reference to the result past the call.
  operator DeviceSnapshot() const;  // NOLINT(google-explicit-constructor)
};

// JSON (the state file, custom profiles). from_json validates: unique phy ids, known family, sane values.
void to_json(nlohmann::json& j, const HostState& s);
Result<HostState> state_from_json(const nlohmann::json& j);
std::string serialize(const HostState& s);
// The seam's view of an emulated host (what Emulator::snapshot answers): its chips, vNPUs, templates, the
// device nodes its majors give, and the link between every two chips.
DeviceSnapshot to_snapshot(const HostState& s);  // pretty JSON text with a trailing newline
Result<HostState> parse_state(std::string_view text);

}  // namespace ascend::npu
