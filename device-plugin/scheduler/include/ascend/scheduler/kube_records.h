// The records the scheduler keeps in the API server, and how it reads them back (pure; kube_sync.h does the
// I/O). Names (docs/scheduler.md "Records in the API server"):
// - pod annotations, written at bind BEFORE the Binding: `ascend.huawei.com/chips` (the physical chip ids on
//   the node, "0,1,2,3") and, for a pod of a job, `ascend.huawei.com/rank-start` (its first rank);
// - a ConfigMap `ascend-job-<job>` in the job's namespace, labelled `ascend.huawei.com/job=<job>`, with
//   `placement.json` (the job's record: spec, version, ranks as [node, chip], and a slot per pod: node,
//   chips, state, pod) and `hccl.json` (the job's HCCL rank table, status "initializing" until every pod is
//   bound, then "completed").
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ascend/common/error.h"
#include "ascend/scheduler/extender.h"

namespace ascend::scheduler {

inline constexpr const char* kChipsAnnotation = "ascend.huawei.com/chips";
inline constexpr const char* kRankStartAnnotation = "ascend.huawei.com/rank-start";
inline constexpr const char* kJobLabel = "ascend.huawei.com/job";
inline constexpr const char* kJobConfigMapPrefix = "ascend-job-";
inline constexpr const char* kPlacementKey = "placement.json";
inline constexpr const char* kRankTableKey = "hccl.json";
// The component name in Events (reportingController) and in logs.
inline constexpr const char* kController = "ascend.huawei.com/scheduler";

// "0,1,2,3" -> {0,1,2,3}: ascending, distinct, each 0..1023, at most 64; EINVAL otherwise.
Result<std::vector<int>> parse_chips(const std::string& s);
std::string format_chips(const std::vector<int>& chips);

// Reads a Pod object as the API server has it (read_pod, spec.nodeName, status.phase, our annotation).
Result<ApiPod> read_api_pod(const nlohmann::json& pod);
// Whether the scheduler follows this pod: it asks for a whole-chip resource or carries our annotations.
bool followed(const ApiPod& p);
// What the pod informer keeps of a Pod (the fields read_api_pod and read_pod read; no managed fields, no
// environment, no volumes): 20 000 pods stay small.
nlohmann::json slim_pod(nlohmann::json pod);

// The merge patch of a pod's annotations at bind, with the pod's UID as precondition.
nlohmann::json bind_annotations(const std::vector<int>& chips, int rank_start, const std::string& uid);

std::string job_configmap_name(const std::string& job);
// The job's ConfigMap: its record and rank table (`ranktable` as topology::rank_table gives it; its status is
// set here from the record's slots).
nlohmann::json job_configmap(const nlohmann::json& record, nlohmann::ordered_json ranktable);
// The record in a job's ConfigMap; EINVAL naming what is missing or malformed.
Result<nlohmann::json> record_of(const nlohmann::json& configmap);
// The version a ConfigMap's record carries (0 when unreadable).
std::uint64_t record_version(const nlohmann::json& configmap);

}  // namespace ascend::scheduler
