// The device seam's types: what every component may know about the NPUs of a host, whichever backend
// answers (the emulator's state file, or the driver's DCMI library on a real Atlas host). Nothing here is
// specific to a backend: the emulator's file format (state.h) is built from these types, and a DCMI backend
// would fill them from DCMI calls. DeviceSnapshot is a plain value: copy it freely, share
// it read-only between threads.
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

// The cost-model level of a link inside one node (see docs/scheduler.md, "The cost model").
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
  bool operator==(const VnpuTemplate&) const = default;
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
  bool operator==(const VnpuCapacity&) const = default;
};

struct Process {
  int pid = 0;
  std::string name;
  int memory_mb = 0;
  std::string container_pid = "NA";
  bool operator==(const Process&) const = default;
};

struct Fault {
  std::uint32_t code = 0;
  Health severity = Health::kWarning;
  bool operator==(const Fault&) const = default;
};

// The severity a fault code carries when none is given: bits 27..24 of the code (the second hex digit of
// 0x8XXXXXXX): 0-3 Warning, 4-7 Alarm, 8-F Critical. Documented in `npu-sim fault --help`.
Health severity_of_code(std::uint32_t code);
// A fault code as an operator types it: hexadecimal, "0x" optional, at most 32 bits (npu-sim --code, the
// device plugin's fault-code file).
Result<std::uint32_t> parse_fault_code(std::string_view s);

// One device (a die on A3, a chip elsewhere). Telemetry fields are what npu-smi prints: the profile gives
// the idle values, and the emulator applies the work running on the chip (`npu-sim load-gen`, workload.h)
// whenever it answers a query, so that a snapshot shows the chip as it is now.
struct Chip {
  int phy_id = 0;            // physical id: /dev/davinci<phy_id>
  int logic_id = 0;          // logical id (npu-smi -m "Chip Logic ID")
  int card_id = 0;           // npu-smi "NPU" column (card)
  int chip_index = 0;        // chip on its card (npu-smi "Chip" column)
  std::string name;          // npu-smi Name column, e.g. "910B3"
  std::string chip_version;  // DCMI chip_info's chip_ver, e.g. "V1"; empty in a profile (the family's)
  std::string
      vdie_id;         // the VDIE id, five 32-bit words "XXXXXXXX-XXXXXXXX-..."; empty in a profile (derived)
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
  int aicpu_usage_pct = 0;
  bool link_up = true;  // the chip's RoCE port answers (DCMI network health OK; `npu-sim link` sets it)
  int hugepages_used = 0;
  int hugepages_total = 0;
  std::vector<Process> processes;
  std::vector<Fault> faults;  // run-time state

  Health health() const;  // worst fault severity, OK when none
  bool operator==(const Chip&) const = default;
};

// What a monitor reads of one chip at one moment (DeviceQuery::telemetry): far less than a snapshot, so that
// a scrape does not walk the topology. Units are the driver's: percent, MB, degrees Celsius, watts.
struct ChipTelemetry {
  int phy_id = 0;
  int aicore_pct = 0;  // AICore utilization
  int aicpu_pct = 0;   // AICPU utilization
  // On-chip memory: HBM, or the on-chip DDR of a chip without HBM (310P).
  long long memory_total_mb = 0;
  long long memory_used_mb = 0;
  int temp_c = 0;
  std::optional<double> power_w;  // none: the chip reports no power of its own (die 1 of an A3, 310P)
  Health health = Health::kOk;
  std::vector<std::uint32_t> error_codes;  // in the order the driver lists them
  bool link_up = true;
  bool operator==(const ChipTelemetry&) const = default;
};

// A chip's telemetry as its Chip record shows it (the emulator's, or a DCMI snapshot's).
ChipTelemetry telemetry_of(const Chip& c);

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
  bool operator==(const Vnpu&) const = default;
};

// Whether `v` is held by `want`: every non-empty field of `want` equals the owner's (a holder check before a
// destroy, so that a cleanup never destroys a vNPU that another container got since).
bool held_by(const Vnpu& v, const VnpuOwner& want);

struct DeviceNode {
  std::string path;  // absolute, as seen on the host (and in a container): "/dev/davinci3"
  int major = 0;
  int minor = 0;
  unsigned mode = 0660;
  bool operator==(const DeviceNode&) const = default;
};

// One consistent look at the host's NPUs, as the device seam gives it (DeviceQuery::snapshot).
struct DeviceSnapshot {
  std::string backend;  // "emulator" or "dcmi": who answered
  Family family = Family::k910B;
  std::string chip_type = "Ascend";  // npu-smi -m prefix: "Ascend 910B3"
  std::string driver_version;
  std::string resource_name;  // Kubernetes resource for a whole chip: "huawei.com/Ascend910"
  VnpuCapacity vnpu_capacity;
  std::vector<VnpuTemplate> templates;
  std::vector<Chip> chips;             // sorted by phy_id
  std::vector<DeviceNode> chip_nodes;  // parallel to chips: /dev/davinci<phy>
  std::vector<Vnpu> vnpus;             // sorted by id
  std::vector<DeviceNode> vnpu_nodes;  // parallel to vnpus: /dev/vdavinci<id>
  std::vector<DeviceNode> control;     // davinci_manager, devmm_svm, hisi_hdc
  std::vector<Link> links;             // chips.size() squared, row-major in chips order
  std::string vnpu_mode = "docker";    // "docker" or "vm"
  std::string boot_id;  // changes when the driver is loaded again (the emulated host's load id); empty when
                        // the backend cannot tell (DCMI has no such id: then the kernel's boot_id alone)
  // Every node above was read in this process from the node itself (lstat: a character device, its numbers
  // and mode), when this snapshot was taken: the node scan (node_query.h). Never set by the JSON form, which
  // carries another process's look.
  bool nodes_checked = false;

  const Chip* chip(int phy_id) const;
  const Vnpu* vnpu(int id) const;
  const VnpuTemplate* find_template(std::string_view name) const;
  Link link(int phy_a, int phy_b) const;  // kNa for an unknown chip
  // Cards in order, each with its chips' phy ids in chip-index order.
  std::vector<std::vector<int>> cards() const;
  bool holds_vnpus(int phy_id) const;

  DeviceNode chip_node(int phy_id) const;  // {"/dev/davinci<phy>", 0, 0} when unknown
  DeviceNode vnpu_node(int vnpu_id) const;
  const std::vector<DeviceNode>& control_nodes() const { return control; }

  bool operator==(const DeviceSnapshot&) const = default;
};

// The HCCS domain of each chip as the links show it: chips joined by HCCS or HCCS_SW links (directly or
// through others) share a domain, numbered from 0 in phy order; a chip with no such link has -1.
std::vector<int> hccs_domains(const DeviceSnapshot& s);

// The seam's JSON form (for a process boundary and for dumps; tests/npu-smi-sim/seam_test.cc). from_json
// checks types and reports one line (EINVAL) instead of throwing.
nlohmann::json snapshot_to_json(const DeviceSnapshot& s);
Result<DeviceSnapshot> snapshot_from_json(const nlohmann::json& j);
nlohmann::json vnpu_to_json(const Vnpu& v);
Result<Vnpu> vnpu_from_json(const nlohmann::json& j);
nlohmann::json owner_to_json(const VnpuOwner& o);
Result<VnpuOwner> owner_from_json(const nlohmann::json& j);

}  // namespace ascend::npu
