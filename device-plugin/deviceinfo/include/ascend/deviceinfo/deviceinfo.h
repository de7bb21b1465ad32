// The per-node device ConfigMap in the format MindCluster's device plugin writes, so that Volcano's Ascend
// plugin and our scheduler read one record: `mindx-dl-deviceinfo-<node>` in `kube-system`, data key
// `DeviceInfoCfg` (JSON: DeviceInfo.DeviceList with the healthy, unhealthy and network-unhealthy chips per
// resource, UpdateTime, and a CheckCode over it), plus the fault codes. The exact keys come from MindCluster's
// public API reference (cited in deviceinfo.cc). Pure: no I/O.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ascend/common/error.h"

namespace ascend::deviceinfo {

inline constexpr const char* kNamespace = "kube-system";
inline constexpr const char* kNamePrefix = "mindx-dl-deviceinfo-";

struct ChipFault {
  int phy_id = 0;
  std::vector<std::string> codes;  // hex fault codes as npu-smi shows them, e.g. "80E01801"
};

// One node's chips as its device plugin sees them.
struct NodeDevices {
  std::string node;
  std::string resource;                  // "huawei.com/Ascend910"
  std::vector<int> healthy;              // physical ids, ascending
  std::vector<int> unhealthy;            //
  std::vector<int> network_unhealthy;    //
  std::vector<ChipFault> faults;         //
  std::int64_t update_time = 0;          // unix seconds
};

std::string configmap_name(const std::string& node);
// The whole ConfigMap object (apiVersion, kind, metadata: name, namespace, labels; data).
nlohmann::json to_configmap(const NodeDevices& d);
// Reads one back; EINVAL naming what is wrong (a ConfigMap of another name, a missing key, a bad CheckCode,
// a chip name that is not "<Kind>-<id>").
Result<NodeDevices> from_configmap(const nlohmann::json& cm);

}  // namespace ascend::deviceinfo
