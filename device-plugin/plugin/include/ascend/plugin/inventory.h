// What the plugin advertises: the Kubernetes resources it serves (one socket and one registration each) and
// the devices of each, derived from one device-query snapshot, the configuration and the dynamic-vNPU
// ledger. Pure functions of their inputs; thread-safe.
//
// Device ids: whole chips "<short resource>-<phy>" (Ascend910-3); static vNPUs
// "<short vNPU resource>-<vNPU id>-<phy>" (Ascend910-10c.3cpu.32g-100-0); AICore units "npu-core-<phy>-<k>".
// Health: OK and Warning are Healthy (a Warning is sub-health, as MindCluster treats it); Alarm and Critical
// are Unhealthy; a cleared fault makes the device Healthy again.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ascend/npu/seam.h"
#include "ascend/plugin/config.h"
#include "ascend/plugin/ledger.h"

namespace ascend::plugin {

inline constexpr const char* kCoreResource = "huawei.com/npu-core";
inline constexpr const char* kHealthy = "Healthy";
inline constexpr const char* kUnhealthy = "Unhealthy";

bool is_healthy(npu::Health h);

enum class DeviceKind { kChip, kVnpu, kCore };

// One Kubernetes extended resource.
struct ResourceSpec {
  std::string name;  // "huawei.com/Ascend910-10c.3cpu.32g"
  DeviceKind kind = DeviceKind::kChip;
  std::string template_name;  // kVnpu: the template whose vNPUs this resource offers

  std::string short_name() const;   // the part after the '/': "Ascend910-10c.3cpu.32g"
  std::string socket_name() const;  // "ascend-<short name>.sock"
};

// The template part of a vNPU resource name, as Ascend names them: vir10_3c_32g -> "10c.3cpu.32g",
// vir02 -> "2c", vir04_3c_ndvpp -> "4c.3cpu.ndvpp". Fails on a name that does not start with "vir<digits>".
Result<std::string> vnpu_resource_suffix(std::string_view template_name);

// The resources to serve, in a fixed order: the whole-chip resource; with --vnpu=static one per vNPU
// template of the chip; with --vnpu=dynamic huawei.com/npu-core.
Result<std::vector<ResourceSpec>> plan_resources(const npu::DeviceSnapshot& host, const Config& cfg);

// One device id of a resource and what it stands for.
struct DeviceEntry {
  std::string id;
  DeviceKind kind = DeviceKind::kChip;
  int phy = 0;
  int vnpu_id = -1;  // kVnpu
  int core = -1;     // kCore
  int numa = 0;
  npu::Health health = npu::Health::kOk;
  std::string withheld;  // non-empty: not advertised now, and why ("holds vNPUs")
};

// Every device id the resource knows about now (advertised or withheld), sorted by phy, then id.
std::vector<DeviceEntry> device_table(const npu::DeviceSnapshot& host, const ResourceSpec& res,
                                      const Ledger& ledger);

// Ids from a request, named in an error message: "<what> A, B" when there are at most 8, else "<n> <what>
// A, ..., H and <n-8> more"; an id longer than 64 bytes is cut ("..."), bytes outside printable ASCII become
// '?'. A hostile kubelet's 100 000 ids (or one id of 3 MiB) make a line, not a status of megabytes.
std::string name_ids(std::string_view what, const std::vector<std::string>& ids);

}  // namespace ascend::plugin
