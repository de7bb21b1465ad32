// Dynamic Resource Allocation (resource.k8s.io/v1, GA in Kubernetes 1.34): the ResourceSlices that tell the
// cluster which NPUs this node has, so that kube-scheduler's own allocator can hand them to ResourceClaims
// selected by attribute (CEL), e.g. "8 chips with the same hccsDomain".
//
// One pool per node, named after the node, driver `npu.ascend.huawei.com`; one device per whole chip, named
// `npu-<phy>` (its /dev/davinci<phy>), with the attributes a training job selects on (docs/dra.md lists
// them with their sources): model, HBM and AICore count (as capacity too), driver version, HCCS domain, PCIe
// bus, NUMA node, the node's leaf and spine switch (from its topology labels) and health. A chip that is not
// usable (a fault at SeparateNPU level, isolated) stays published with `healthy: false`, so that the
// DeviceClass (which selects healthy chips) stops offering it without the slice losing track of it.
//
// vNPUs are not published yet: a chip and the vNPUs carved from it share its AICores and HBM, which the API
// expresses only with shared counters (partitionable devices, alpha in 1.34 behind DRAPartitionableDevices).
//
// Pure functions of their inputs; the API server publisher (kube_publisher.h, --dra) writes what they return.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ascend/common/error.h"
#include "ascend/npu/seam.h"

namespace ascend::plugin::dra {

inline constexpr const char* kDriver = "npu.ascend.huawei.com";
inline constexpr const char* kApiVersion = "resource.k8s.io/v1";
inline constexpr const char* kSlicesPath = "/apis/resource.k8s.io/v1/resourceslices";
// resource.k8s.io/v1 ResourceSliceMaxDevices: a pool with more devices is split over several slices.
inline constexpr std::size_t kMaxDevicesPerSlice = 128;
// The Node labels that name the switches above the node (set by the operator, or by the tool that wrote the
// scheduler's cluster file); a node without them publishes no leaf/spine attribute.
inline constexpr const char* kLeafLabel = "topology.ascend.huawei.com/leaf";
inline constexpr const char* kSpineLabel = "topology.ascend.huawei.com/spine";

// The Node the slices belong to (their owner: they go when the Node goes).
struct SliceNode {
  std::string name;
  std::string uid;    // empty: no ownerReference
  std::string leaf;   // kLeafLabel's value, "" when unlabelled
  std::string spine;  // kSpineLabel's value
  bool operator==(const SliceNode&) const = default;
};
// The leaf and spine of a v1 Node (its labels); name and uid from its metadata.
SliceNode slice_node(const nlohmann::json& node);

std::string device_name(int phy);                                    // "npu-3"
Result<int> phy_of_device(std::string_view device);                  // "npu-3" -> 3; anything else: EINVAL
std::string slice_name(const std::string& node, std::size_t index);  // "<node>-npu.ascend.huawei.com-<i>"

// The device entry of chip `c` of `host` (a v1 Device: name, attributes, capacity).
nlohmann::json chip_device(const npu::DeviceSnapshot& host, const npu::Chip& c, bool healthy,
                           const SliceNode& node);

// The slices of this node's pool: every chip of `host`, in phy order, at most kMaxDevicesPerSlice a slice;
// chips in `unusable` are published unhealthy. `generation`: the pool's (a consumer takes the slices of the
// highest generation and ignores the rest). A host with no chips has one slice with no devices (the pool
// exists and is empty).
std::vector<nlohmann::json> resource_slices(const npu::DeviceSnapshot& host, const std::set<int>& unusable,
                                            const SliceNode& node, std::int64_t generation);

// Whether the slices `have` (as the API server lists them) already say what `want` says: the same names,
// and in each the same devices, node, driver and pool name (generation and resourceSliceCount aside).
bool slices_match(const std::vector<nlohmann::json>& have, const std::vector<nlohmann::json>& want);

}  // namespace ascend::plugin::dra
