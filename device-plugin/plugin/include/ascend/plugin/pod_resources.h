// The kubelet's pod-resources API (v1 List): which container holds which device ids, with the pod's
// namespace and name and the container's name. Used to label the NPU metrics of a chip with the container
// that holds it (npu_exporter.h). Thread-safe (no shared state).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "ascend/common/error.h"

namespace ascend::plugin {

struct PodDevices {
  std::string pod_namespace;
  std::string pod;
  std::string container;
  std::string resource;  // "huawei.com/Ascend910"
  std::vector<std::string> ids;
  bool operator==(const PodDevices&) const = default;
};

// One List call on the kubelet's pod-resources socket, with a deadline of `timeout`; one entry per
// container and resource that has devices. An unreachable socket is an error naming it.
Result<std::vector<PodDevices>> list_pod_devices(const std::string& socket,
                                                 std::chrono::milliseconds timeout);

}  // namespace ascend::plugin
