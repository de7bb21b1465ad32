// The per-node device ConfigMap in the format MindCluster's device plugin writes, so that Volcano's Ascend
// plugin and our scheduler read one record: `mindx-dl-deviceinfo-<node>` in `kube-system`, data key
// `DeviceInfoCfg` (JSON: DeviceInfo.DeviceList with the healthy, unhealthy and network-unhealthy chips per
// resource, UpdateTime, and a CheckCode over it), plus the fault codes. The exact keys come from
// MindCluster's public API reference (cited in deviceinfo.cc). Also the Node labels that schedulers select
// on. Pure: no I/O; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ascend/common/error.h"

namespace ascend::deviceinfo {

inline constexpr const char* kNamespace = "kube-system";
inline constexpr const char* kNamePrefix = "mindx-dl-deviceinfo-";
inline constexpr const char* kDataKey = "DeviceInfoCfg";
// The chips an operator or the fault escalation took out of service: "Ascend910-1,Ascend910-3" (empty when
// none, as MindCluster writes it). An operator clears a chip by removing its name.
inline constexpr const char* kManuallySeparateKey = "ManuallySeparateNPU";
// The label MindCluster's device plugin puts on its ConfigMaps (ClusterD watches ConfigMaps with it).
inline constexpr const char* kConsumerLabel = "mx-consumer-cim";
// MindCluster writes -2 when the chip cannot tell its super-pod (everything but an A3 super-pod).
inline constexpr int kNoSuperPod = -2;
// A DeviceInfoCfg larger than a ConfigMap may hold (1 MiB) is refused before it is parsed.
inline constexpr std::size_t kMaxDataBytes = std::size_t{1024} * 1024;
// Physical ids above this are refused (MindCluster's MaxVirtualDeviceNum; a node has at most 16 chips).
inline constexpr int kMaxPhyId = 1023;

// Fault handling levels (MindCluster's fault_handling values) that we write.
inline constexpr const char* kNotHandleFault = "NotHandleFault";  // the chip stays schedulable
inline constexpr const char* kSeparateNPU = "SeparateNPU";        // the chip is taken out of scheduling

// MindCluster's fault_handling levels, least severe first (its getMostSeriousFaultType order: NotHandleFault,
// RestartRequest, RestartBusiness, FreeRestartNPU, RestartNPU, PreSeparateNPU, SeparateNPU,
// ManuallySeparateNPU): the rank of `level` there, -1 for a name not in it.
int level_rank(std::string_view level);
// RestartNPU and above: the chip is reset now or taken out of service, so the work on it stops (the
// scheduler recovers the job); an unknown level counts as SeparateNPU (MindCluster's default).
bool stops_work(std::string_view level);

struct ChipFault {
  int phy_id = 0;
  std::vector<std::string> codes;    // hex fault codes as npu-smi shows them, e.g. "80E01801"
  std::string level = kSeparateNPU;  // fault_handling: kSeparateNPU, kNotHandleFault, or MindCluster's others
  bool network = false;              // fault_type CardNetworkUnhealthy (else CardUnhealthy)
  bool operator==(const ChipFault&) const = default;
};

// One node's chips as its device plugin sees them.
struct NodeDevices {
  std::string node;
  std::string resource;                // "huawei.com/Ascend910"
  std::vector<int> healthy;            // physical ids, ascending
  std::vector<int> unhealthy;          //
  std::vector<int> network_unhealthy;  //
  std::vector<ChipFault> faults;       // ascending phy id
  std::int64_t update_time = 0;        // unix seconds
  int super_pod_id = kNoSuperPod;
  int server_index = kNoSuperPod;
  std::vector<int> manually_separated;  // ManuallySeparateNPU: physical ids, ascending
  bool operator==(const NodeDevices&) const = default;
};

std::string configmap_name(const std::string& node);
// "Ascend910-3" for resource "huawei.com/Ascend910" and phy 3.
std::string chip_name(std::string_view resource, int phy_id);
// The whole ConfigMap object (apiVersion, kind, metadata: name, namespace, labels; data).
nlohmann::json to_configmap(const NodeDevices& d);
// Reads one back; EINVAL naming what is wrong (a ConfigMap of another name, a missing key, a bad CheckCode,
// a chip name that is not "<Kind>-<id>").
Result<NodeDevices> from_configmap(const nlohmann::json& cm);

// The chips a device ConfigMap names in ManuallySeparateNPU (none when the key is absent or empty), by the
// chip names of `resource`; EINVAL naming a name that is not "<Kind>-<id>" of that resource.
Result<std::vector<int>> manually_separated(const nlohmann::json& cm, std::string_view resource);

// The ManuallySeparateNPU value naming `phys` (ascending) of `resource`: "Ascend910-1,Ascend910-3".
std::string manually_separated_value(std::string_view resource, const std::vector<int>& phys);

// CheckCode: the lower-case hex SHA-256 of DeviceInfo ({"DeviceList": {...}, "UpdateTime": n}) as Go's
// encoding/json writes it (keys sorted, no spaces, <>& escaped as \u003c \u003e \u0026).
std::string check_code(const std::map<std::string, std::string>& device_list, std::int64_t update_time);

// ---- Node labels --------------------------------------------------------------------------------------

// What the device plugin knows about its node that schedulers select on.
struct NodeFacts {
  std::string resource;        // "huawei.com/Ascend910": accelerator=huawei-Ascend910
  std::string chip_name;       // npu-smi's Name: "910B3"
  int count = 0;               // whole chips on the node
  std::string driver_version;  // "24.1.rc2"
  std::string server_type;     // MindCluster's servertype: "<card type>-<AI cores>", "Ascend910B-20"
  bool operator==(const NodeFacts&) const = default;
};

// The labels for `f`, every value a valid label value (see label_value); a fact that is empty (or becomes
// empty) gives no label. Keys are MindCluster's (both its current huawei.com/npu.* keys and the older ones it
// still writes), plus huawei.com/npu.count, which MindCluster has no label for.
std::map<std::string, std::string> node_labels(const NodeFacts& f);
// `s` as a Kubernetes label value: characters outside [A-Za-z0-9._-] become '-', at most 63 characters,
// starting and ending with an alphanumeric (others trimmed); may be empty.
std::string label_value(std::string_view s);

}  // namespace ascend::deviceinfo
