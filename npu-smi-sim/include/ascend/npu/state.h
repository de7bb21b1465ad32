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

namespace ascend::npu {

// Chip health as npu-smi prints it. Ordered by severity.
enum class Health { kOk = 0, kWarning = 1, kAlarm = 2, kCritical = 3 };
std::string_view to_string(Health h);             // "OK", "Warning", "Alarm", "Critical"
Result<Health> parse_health(std::string_view s);  // case-insensitive; accepts "ok", "warning", ...

// The link between two chips as `npu-smi info -t topo` names it.
enum class Link { kSelf, kSio, kHccs, kHccsSw, kPix, kPxb, kPhb, kSys, kNa };
std::string_view to_string(Link l);  // "X", "SIO", "HCCS", "HCCS_SW", "PIX", "PXB", "PHB", "SYS", "NA"

// The cost-model level of a link inside one node (see README, "The cost model").
enum class LinkLevel { kSio, kHccs, kPcie };
LinkLevel level_of(Link l);

// Chip families: which npu-smi layout, which vNPU templates, which topology rules apply.
enum class Family {
  k910,     // Ascend 910 A1 (Atlas 800 9000): HCCS rings of 4
  k910B,    // Ascend 910B (Atlas 800T A2): full HCCS mesh of 8
  k910_93,  // Ascend 910C / 910_93 (Atlas 800T A3): 2 dies per card joined by SIO, HCCS switch between cards
  k310P,    // Ascend 310P (Atlas 300I Duo): inference cards, PCIe only
};
std::string_view to_string(Family f);  // "910", "910B", "910_93", "310P"
Result<Family> parse_family(std::string_view s);

// A vNPU template (`npu-smi info -t template-info`). memory_mb is the nominal size (shown as GB).
struct VnpuTemplate {
  std::string name;
  int aicore = 0;
  int memory_mb = 0;
  double aicpu = 0;
  int vpc = 0;
  int venc = 0;
  int vdec = 0;
  int jpegd = 0;
  int jpege = 0;
  double pngd = 0;
};

// What one chip offers to vNPUs (`npu-smi info -t info-vnpu` totals). A negative value prints as NA.
struct VnpuCapacity {
  int aicore = 0;
  int memory_gb = 0;
  int aicpu = 0;
  int vpc = 0;
  int venc = 0;
  int vdec = 0;
  int jpegd = 0;
  int jpege = 0;
  int pngd = -1;
};

struct Process {
  int pid = 0;
  std::string name;
  int memory_mb = 0;
  std::string container_pid = "NA";
};

struct Fault {
  std::uint32_t code = 0;
  Health severity = Health::kWarning;
};

// The severity a fault code carries when none is given: bits 27..24 of the code (the second hex digit of
// 0x8XXXXXXX): 0-3 Warning, 4-7 Alarm, 8-F Critical. Documented in `npu-sim fault --help`.
Health severity_of_code(std::uint32_t code);

// One device (a die on A3, a chip elsewhere). Telemetry fields are what npu-smi prints; they are fixed by
// the profile so that output is reproducible.
struct Chip {
  int phy_id = 0;      // physical id: /dev/davinci<phy_id>
  int logic_id = 0;    // logical id (npu-smi -m "Chip Logic ID")
  int card_id = 0;     // npu-smi "NPU" column (card)
  int chip_index = 0;  // chip on its card (npu-smi "Chip" column)
  std::string name;    // npu-smi Name column, e.g. "910B3"
  std::string bus_id;  // "0000:C1:00.0"
  int numa_node = 0;
  std::string cpu_affinity;  // "144-167"; empty: no CPU Affinity column
  int hccs_domain = -1;      // chips with the same domain share HCCS; -1: none
  std::string device_ip;     // hccn.conf address_<phy_id>
  int aicore_count = 0;
  int hbm_total_mb = 0;
  int hbm_used_mb = 0;
  int mem_total_mb = 0;  // on-chip DDR (A1, 310P); 0 elsewhere
  int mem_used_mb = 0;
  double power_w = 0;     // negative: printed as "-" (2nd die of an A3 card); NaN-free
  bool power_na = false;  // printed as "NA" (310P)
  int temp_c = 0;
  int aicore_usage_pct = 0;
  int hugepages_used = 0;
  int hugepages_total = 0;
  std::vector<Process> processes;
  std::vector<Fault> faults;  // run-time state

  Health health() const;  // worst fault severity, OK when none
};

// Who holds a dynamic vNPU, as the runtime recorded it when it created the vNPU for a container (in the same
// committed change, so that no crash can leave a dynamic vNPU untagged). A static vNPU (made by an
// administrator with npu-smi) has none. `vnpu gc` (vnpu_gc.h) reads it to find vNPUs whose container is gone.
struct VnpuOwner {
  std::string container_id;     // the engine's container id (runc's); empty: no owner
  std::string state_root;       // runc's state folder for that container (its --root: /run/runc,
                                // /run/docker/runtime-runc/moby, /run/containerd/runc/k8s.io, ...)
  int pid = 0;                  // the runtime process that created it (the shim, then runc by exec): while it
                                // lives the container is still being created
  std::uint64_t pid_start = 0;  // that process's start time (/proc/<pid>/stat field 22): a reused pid differs
  std::string pid_ns;           // its pid namespace ("pid:[4026531836]"): where `pid` means something
  std::string boot;             // the kernel's boot_id and the host's load id then: a reboot since (of the
                                // machine or the emulated host) means the container is gone
  bool operator==(const VnpuOwner&) const = default;
};

struct Vnpu {
  int id = 0;  // 100 + 16*phy + k
  int phy_id = 0;
  std::string template_name;
  int vgroup = 0;
  VnpuOwner owner;  // empty container_id: static, or not in use
  int status = 0;   // 0 idle, 1 in use (a container holds it)

  bool dynamic() const { return !owner.container_id.empty(); }
};

// Character device majors of the emulated driver. Chosen at load time among majors the running kernel
// has not registered (see /proc/devices) and recorded here.
struct DeviceMajors {
  int davinci = 0;
  int manager = 0;
  int svm = 0;
  int hdc = 0;
  int vdavinci = 0;
};

struct DeviceNode {
  std::string path;  // absolute, as seen on the host (and in a container): "/dev/davinci3"
  int major = 0;
  int minor = 0;
  unsigned mode = 0660;
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
  std::vector<Chip> chips;  // sorted by phy_id
  std::vector<Vnpu> vnpus;  // sorted by id
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
};

// JSON (the state file, custom profiles). from_json validates: unique phy ids, known family, sane values.
void to_json(nlohmann::json& j, const HostState& s);
Result<HostState> state_from_json(const nlohmann::json& j);
std::string serialize(const HostState& s);  // pretty JSON text with a trailing newline
Result<HostState> parse_state(std::string_view text);

}  // namespace ascend::npu
