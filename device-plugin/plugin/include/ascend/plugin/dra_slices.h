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
// vNPUs (--dra-vnpu): a chip and the vNPUs carved from it share its AICores, memory and the other resources
// the vNPU capacity rule counts (vnpu_load.h), which the API says only with shared counters (partitionable
// devices, alpha in 1.34 behind the feature gate DRAPartitionableDevices, off by default). Each chip gets a
// counter set `npu-<phy>` holding what the chip offers to vNPUs; the whole-chip device consumes all of it,
// and each vNPU the chip can hold is a device `npu-<phy>-<template>-<k>` (k = 0 .. the template's most
// instances on the chip - 1; the template's '_' become '-') consuming the template's share. So the
// scheduler's allocator hands out a chip or vNPUs of it that fit together, never more. Kubernetes 1.34's
// validation (pkg/apis/resource/validation): a device may consume only counter sets of its own slice, at
// most 32 counters summed over a slice's counter sets, 128 devices and 1024 device counters a slice; so the
// pool is split by chip, each chip whole (counter set and devices) in one slice.
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
#include "ascend/deviceinfo/dra_names.h"
#include "ascend/npu/seam.h"

namespace ascend::plugin::dra {

inline constexpr const char* kDriver = deviceinfo::kDraDriver;
inline constexpr const char* kApiVersion = "resource.k8s.io/v1";
inline constexpr const char* kSlicesPath = "/apis/resource.k8s.io/v1/resourceslices";
// resource.k8s.io/v1 ResourceSliceMaxDevices: a pool with more devices is split over several slices.
inline constexpr std::size_t kMaxDevicesPerSlice = 128;
// The Node labels that name the switches above the node (set by the operator, or by the tool that wrote the
// scheduler's cluster file); a node without them publishes no leaf/spine attribute.
inline constexpr const char* kLeafLabel = "topology.ascend.huawei.com/leaf";
inline constexpr const char* kSpineLabel = "topology.ascend.huawei.com/spine";

// resource.k8s.io/v1 (1.34) ResourceSliceMaxSharedCounters: counters summed over a slice's counter sets.
inline constexpr std::size_t kMaxSharedCountersPerSlice = 32;
// resource.k8s.io/v1 (1.34) ResourceSliceMaxDeviceCountersPerSlice: counters consumed, summed over devices.
inline constexpr std::size_t kMaxDeviceCountersPerSlice = 1024;
// The attribute only vNPU devices have (the template's name): DeviceClasses tell chips and vNPUs apart by it.
inline constexpr const char* kVnpuTemplateAttribute = "vnpuTemplate";

// What the slices carry besides the whole chips.
enum class SliceVnpus {
  kNone,          // whole chips only, no counters (as without --dra-vnpu)
  kCountersOnly,  // whole chips, each consuming its counter set: no vNPU devices (the safe probe of whether
                  // the API server keeps counters, kube_publisher.h)
  kTemplates,     // whole chips and every vNPU template instance, all consuming counters
};

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

// The device names, shared with the scheduler that reads them back (ascend/deviceinfo/dra_names.h).
using deviceinfo::device_name;
using deviceinfo::is_vnpu_device_name;
using deviceinfo::phy_of_device;
using deviceinfo::vnpu_device_name;
std::string slice_name(const std::string& node, std::size_t index);  // "<node>-npu.ascend.huawei.com-<i>"

// A vNPU device name of `host` taken apart; EINVAL for anything else (a chip's name included).
struct VnpuDeviceRef {
  int phy = 0;
  std::string template_name;  // as the host names it ("vir05_1c_16g")
  int index = 0;
  bool operator==(const VnpuDeviceRef&) const = default;
};
Result<VnpuDeviceRef> vnpu_of_device(const npu::DeviceSnapshot& host, std::string_view device);

// How many vNPUs of template `t` one chip holds at most: the vNPU capacity rule (vnpu_shortfall) applied
// to `t` alone; 0 when one does not fit.
int max_instances(const npu::VnpuTemplate& t, const npu::VnpuCapacity& cap);

// One counter of a chip's counter set: its name (a DNS label) and the chip's amount, as a quantity.
struct Counter {
  std::string name;
  std::string value;
  bool operator==(const Counter&) const = default;
};
// The counters of every chip of `host`: "aicore" and "memory" (the vNPU capacity's, in bytes as a binary
// quantity: "64Gi"), then each other resource the capacity rule counts (aicpu, vpc, venc, vdec, jpegd,
// jpege, pngd) that some publishable template takes a larger share of than of the chip's AICores and than
// of its memory (the others can never run out first, so a counter for them would only cost slice room).
std::vector<Counter> chip_counters(const npu::DeviceSnapshot& host);

// The device entry of chip `c` of `host` (a v1 Device: name, attributes, capacity).
nlohmann::json chip_device(const npu::DeviceSnapshot& host, const npu::Chip& c, bool healthy,
                           const SliceNode& node);

// The slices of this node's pool: every chip of `host`, in phy order, at most kMaxDevicesPerSlice a slice;
// chips in `unusable` are published unhealthy (their vNPU devices too). `generation`: the pool's (a consumer
// takes the slices of the highest generation and ignores the rest). A host with no chips has one slice with
// no devices (the pool exists and is empty). With counters (`vnpus` not kNone) a slice holds whole chips
// (counter set and devices) within the 1.34 limits above.
std::vector<nlohmann::json> resource_slices(const npu::DeviceSnapshot& host, const std::set<int>& unusable,
                                            const SliceNode& node, std::int64_t generation,
                                            SliceVnpus vnpus = SliceVnpus::kNone);

// Whether a ResourceSlice as the API server answered it kept what partitionable devices need: false when
// `sent` had counter sets (or devices consuming counters) and `stored` lacks them (the API server drops
// them silently while its DRAPartitionableDevices gate is off).
bool counters_kept(const nlohmann::json& sent, const nlohmann::json& stored);
// Whether a slice as listed has counter sets (so the API server that stored it keeps them).
bool has_counters(const nlohmann::json& slice);

// Whether the slices `have` (as the API server lists them) already say what `want` says: the same names,
// and in each the same devices (their counters too), counter sets, node, driver and pool name (generation and
// resourceSliceCount aside).
bool slices_match(const std::vector<nlohmann::json>& have, const std::vector<nlohmann::json>& want);

}  // namespace ascend::plugin::dra
