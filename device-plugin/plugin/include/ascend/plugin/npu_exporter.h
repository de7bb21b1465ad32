// The node's NPUs as Prometheus metrics under MindCluster NPU Exporter's names, labels, units and HELP
// texts, so that the dashboards and alerts written for NPU Exporter work on this plugin's /metrics:
//
//   machine_npu_nums                   chips on the node
//   npu_chip_info_utilization          AICore utilization, %
//   npu_chip_info_hbm_used_memory      HBM in use, MB            (chips with HBM)
//   npu_chip_info_hbm_total_memory     HBM size, MB              (chips with HBM)
//   npu_chip_info_temperature          degrees Celsius
//   npu_chip_info_power                W                         (chips that report their own)
//   npu_chip_info_health_status        1 healthy, 0 not (the driver's health: any alarm, Warning too)
//   npu_chip_info_error_code           the first error code (0: none); _1, _2, ... the following ones
//   npu_chip_info_network_status       1 the RoCE network is healthy, 0 not
//   npu_chip_info_link_status          1 the RoCE link is UP, 0 DOWN
//   npu_container_info                 1 per chip a container holds (labels npuID .. containerName)
//   container_npu_utilization          AICore utilization of a chip a container holds, %
//   container_npu_total_memory / container_npu_used_memory   its on-chip memory, MB
//
// Chip labels: id (physical id), model_name ("<chip name>-<chip type>-<version>", e.g. 910B3-Ascend-V1),
// vdie_id, pcie_bus_info, and namespace, pod_name, container_name of the container that holds the whole
// chip (empty when none). Samples carry no timestamp (the scrape's time is theirs).
//
// Sources (read 2026-12): MindCluster NPU Exporter, github.com/Ascend/mind-cluster
// component/npu-exporter/collector/metrics/collector_for_npu.go, collector_for_hbm.go,
// collector_for_network.go, common_utils.go and collector/common/metrics_collector.go (names, HELP texts,
// labels, health and link codes); its API reference "Prometheus Metrics接口"
// (hiascend.com/document/detail/zh/mindcluster/600/clustersched/reference/api/dlug_api_004.html: units,
// label values). Where this differs from it, and why: docs/device-plugin.md "Metrics: NPU Exporter's names".
//
// The values come from the device seam only (DeviceQuery::telemetry, and the snapshot for the labels), so
// that the DCMI backend serves a real host; the pod labels from the kubelet's pod-resources API
// (pod_resources.h). Thread-safe: Collect() may run on several scrape threads at once.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/npu/device_query.h"
#include "ascend/npu/seam.h"
#include "ascend/plugin/pod_resources.h"

namespace ascend::plugin {

// The container that holds a whole chip.
struct PodRef {
  std::string pod_namespace;
  std::string pod;
  std::string container;
  bool operator==(const PodRef&) const = default;
};
using Attribution = std::map<int, PodRef>;  // phy id -> its container

// Which container holds which chip: the pod-resources list, its device ids looked up in `phy_of_id` (the
// plugin's whole-chip ids, "Ascend910-3" -> 3). Ids of other resources (vNPUs, AICore units) are not
// chips of a container's own, as NPU Exporter does not report them either.
Attribution attribute(const std::vector<PodDevices>& pods, const std::map<std::string, int>& phy_of_id);

// What labels a chip, from a snapshot.
struct ChipIdentity {
  int phy_id = 0;
  std::string model_name;
  std::string vdie_id;
  std::string pcie_bus_info;
  bool has_hbm = false;
  bool operator==(const ChipIdentity&) const = default;
};
std::vector<ChipIdentity> identities(const npu::DeviceSnapshot& s);

// The metric families for `telemetry` (sorted by name, as NPU Exporter's Go registry gathers them; a
// family with no sample is left out). Pure.
std::vector<prometheus::MetricFamily> npu_families(const std::vector<ChipIdentity>& chips,
                                                   const std::vector<npu::ChipTelemetry>& telemetry,
                                                   const Attribution& holders);

class NpuExporter final : public prometheus::Collectable {
 public:
  struct Sources {
    std::function<Result<std::vector<npu::ChipTelemetry>>()> telemetry;  // required
    std::function<npu::DeviceSnapshot()> host;                           // required: the labels
    std::function<Attribution()> holders;                                // empty: no pod labels
  };
  explicit NpuExporter(Sources sources);

  // One telemetry read and one holders read per call. When the telemetry cannot be read (the driver is
  // gone), only machine_npu_nums is answered.
  // A scrape that throws (a source's bug) is logged and answered empty (guarded.h).
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::vector<prometheus::MetricFamily> collect() const;
  Sources sources_;
};

// The same telemetry for Telegraf, as NPU Exporter's `-platform=Telegraf` gives it to Telegraf's execd input
// (InfluxDB line protocol, one line per chip, fields in byte order of their names, the gather's time in
// nanoseconds; Telegraf adds the host tag):
//
//   Ascend910-3 npu_chip_info_error_code_0=2160989186i,npu_chip_info_hbm_used_memory=3221225472i,...
//   1700000000000000000
//
// The measurement is the chip's device name (`device_prefix`-<phy id>, e.g. Ascend910-3). Fields:
// npu_chip_info_health_status, _network_status, _link_status (1/0 as in /metrics; integers),
// npu_chip_info_utilization (AICore %), npu_chip_info_temperature (C), npu_chip_info_power (W; chips that
// report their own), npu_chip_info_hbm_utilization (memory in use, % of its size) and
// npu_chip_info_hbm_used_memory (bytes: NPU Exporter's Telegraf input multiplies DCMI's MB by 1024 * 1024)
// for chips with HBM, npu_chip_info_error_code_<i> (integers, from _0) for each of the driver's error codes.
// Sources: MindCluster NPU Exporter's Telegraf input (github.com/Ascend/ascend-npu-exporter
// plugins/inputs/npu/npu.go: field names, types and units) and its "Telegraf data description" page
// (hiascend.com/document/detail/zh/mindcluster/70rc1/clustersched/dlug/dlug_api_005.html: the measurement
// and a captured line). Left out, as this plugin has no source for them: the RoCE MAC/packet counters,
// optical module readings, link speed and up count, bandwidth and process count. Pure.
std::string telegraf_lines(const std::vector<ChipIdentity>& chips,
                           const std::vector<npu::ChipTelemetry>& telemetry, std::string_view device_prefix,
                           std::int64_t unix_nanos);

// Telegraf's execd input (`signal = "none"` or `"STDIN"`): writes one gather of `sources` to `out_fd` at
// once and every `interval`, and at once whenever a line arrives on `in_fd` (Telegraf's STDIN signal);
// returns when `in_fd` reaches its end (Telegraf stopped the plugin) or `stop_fd` becomes readable (ok), or
// when `out_fd` cannot be written (an error naming it). A gather that fails (the driver is gone) writes
// nothing and is logged once until one succeeds again.
Status run_telegraf(const NpuExporter::Sources& sources, std::string device_prefix,
                    std::chrono::milliseconds interval, int in_fd, int out_fd, int stop_fd);

class Plugin;

// The sources of a running plugin: `query`'s telemetry, the plugin's host for the labels, and the kubelet's
// pod-resources socket (none, or not there: no pod labels) matched against the plugin's whole-chip ids.
// `query` and `plugin` must outlive the exporter.
NpuExporter::Sources plugin_sources(const npu::DeviceQuery& query, const Plugin& plugin,
                                    std::string pod_resources_socket);

}  // namespace ascend::plugin
