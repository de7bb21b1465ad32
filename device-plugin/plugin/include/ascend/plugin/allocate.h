// Allocate, planned: from the device ids the kubelet hands one container to what the container is given,
// in the configured mode. Pure functions of a snapshot, the configuration and the ledger (which the
// dynamic-vNPU path updates); the device query is used only for host paths and the driver file list.
// Thread-safe as long as the ledger is not shared.
//
//   runtime      envs ASCEND_VISIBLE_DEVICES=<ids> (+ ASCEND_RUNTIME_OPTIONS=VIRTUAL for vNPUs) and a
//                read-only mount of /dev/null at /var/run/ascend-container-devices/<id> per device: a request
//                form that only the orchestrator can make (an image cannot add mounts), for the hook to trust
//   device-spec  a DeviceSpec per device and control node, read-only Mounts of the driver files: no Ascend
//                runtime needed
//   cdi          cdi_devices huawei.com/npu=<phy>
//   dynamic vNPU ASCEND_VISIBLE_DEVICES=<phy> and ASCEND_VNPU_SPECS=<template> (+ the marker mount): the
//                runtime creates the vNPU at container start and destroys it at exit
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/npu/device_query.h"
#include "ascend/npu/seam.h"
#include "ascend/plugin/config.h"
#include "ascend/plugin/inventory.h"
#include "ascend/plugin/ledger.h"

namespace ascend::plugin {

inline constexpr const char* kVisibleDevicesEnv = "ASCEND_VISIBLE_DEVICES";
inline constexpr const char* kRuntimeOptionsEnv = "ASCEND_RUNTIME_OPTIONS";
inline constexpr const char* kVnpuSpecsEnv = "ASCEND_VNPU_SPECS";
inline constexpr const char* kMarkerDir = "/var/run/ascend-container-devices";
inline constexpr const char* kCdiKind = "huawei.com/npu";

struct MountSpec {
  std::string container_path;
  std::string host_path;
  bool read_only = true;
  bool operator==(const MountSpec&) const = default;
};

struct DeviceNodeSpec {
  std::string container_path;
  std::string host_path;
  std::string permissions = "rw";
  bool operator==(const DeviceNodeSpec&) const = default;
};

// What one container gets (ContainerAllocateResponse, as a plain value).
struct ContainerAllocation {
  std::map<std::string, std::string> envs;
  std::vector<MountSpec> mounts;
  std::vector<DeviceNodeSpec> devices;
  std::map<std::string, std::string> annotations;
  std::vector<std::string> cdi_devices;
};

// Finds `ids` in `table`. Fails naming every id that is unknown (EINVAL), unhealthy or withheld (EBUSY,
// when none is unknown); duplicates are an error too.
Result<std::vector<DeviceEntry>> resolve_ids(const std::vector<DeviceEntry>& table, const ResourceSpec& res,
                                             const std::vector<std::string>& ids);

// Dynamic vNPU: the chip and the smallest template that covers `cores` AICores. Prefers the chip that
// holds most of `tokens`, then the tightest fit, then the lowest id. Fails with EINVAL when no template is
// big enough and ENOSPC when no healthy chip has room.
struct CorePlacement {
  int phy = 0;
  std::string template_name;
};
Result<CorePlacement> place_cores(const npu::DeviceSnapshot& host, const Ledger& ledger,
                                  const std::vector<DeviceEntry>& tokens);

// The response for resolved chips or static vNPUs in `mode`.
ContainerAllocation plan_container(const npu::DeviceSnapshot& host, const npu::DeviceQuery& paths,
                                   AllocateMode mode, const std::vector<DeviceEntry>& devices);
// The response for a dynamic vNPU placement.
ContainerAllocation plan_dynamic(const CorePlacement& placement);

// One Allocate call: every container request of it, in order. The ledger records dynamic-vNPU promises and,
// when tracks_whole_chips(cfg), the whole chips handed out; on failure it is left as it was.
Result<std::vector<ContainerAllocation>> allocate(const npu::DeviceSnapshot& host,
                                                  const npu::DeviceQuery& paths, const Config& cfg,
                                                  const ResourceSpec& res, Ledger& ledger,
                                                  const std::vector<std::vector<std::string>>& requests,
                                                  Clock::time_point now);

}  // namespace ascend::plugin
