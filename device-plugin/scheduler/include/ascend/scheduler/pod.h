// What the extender learns from a Kubernetes Pod object: who it is, how many whole NPUs of which resource it
// asks for, and, for a pod of a training job, the job's annotations. Pure functions; thread-safe.
//
// Field names of the Pod are matched as Go's encoding/json matches them (exact first, then any letter case);
// annotation keys are exact (they are map keys).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "ascend/common/error.h"
#include "ascend/topology/job.h"

namespace ascend::scheduler {

inline constexpr const char* kJobAnnotation = "ascend.huawei.com/job";
inline constexpr const char* kJobPodsAnnotation = "ascend.huawei.com/job-pods";
inline constexpr const char* kParallelAnnotation = "ascend.huawei.com/parallel";
inline constexpr const char* kOrderAnnotation = "ascend.huawei.com/order";
inline constexpr const char* kPodIndexAnnotation = "ascend.huawei.com/pod-index";
inline constexpr const char* kCommAnnotation = "ascend.huawei.com/comm-bytes";
// Kubernetes' own index of a pod of an Indexed Job.
inline constexpr const char* kCompletionIndexAnnotation = "batch.kubernetes.io/job-completion-index";

// The whole-chip resources the extender places.
inline constexpr const char* kResource910 = "huawei.com/Ascend910";
inline constexpr const char* kResource310P = "huawei.com/Ascend310P";

// The job a pod belongs to, from its annotations.
struct JobRequest {
  std::string name;
  int pods = 0;
  int tp = 1;
  int pp = 1;
  int dp = 1;
  topology::RankOrder order = topology::RankOrder::kTpDpPp;
  topology::CommBytes comm;  // per rank and step; defaults when the pod does not say (see README)
};

struct PodInfo {
  std::string ns;  // "default" when absent
  std::string name;
  std::string uid;
  std::string resource;  // whole-chip resource asked for; empty: none
  int chips = 0;         // whole chips asked for (effective request: max(sum of containers, any init))
  std::string
      vnpu_resource;  // a vNPU resource asked for (huawei.com/Ascend910-*, huawei.com/npu-core), if any
  std::optional<JobRequest> job;
  int index = -1;  // the pod's index in its job (-1: none could be found)
  // A problem with the pod's job annotations: the pod cannot be placed, for this reason (every node fails).
  std::string job_error;

  std::string key() const { return ns + "/" + name; }
};

// The value of `key` in object `j`, matched exactly, else in any letter case; null when absent or when `j`
// is not an object.
const nlohmann::json* find_field(const nlohmann::json& j, std::string_view key);

// Reads a Pod object. Fails (EINVAL, naming the field) when it is not an object, has no metadata.name, or a
// field has the wrong type. Problems with the job annotations are not failures: they land in job_error.
Result<PodInfo> read_pod(const nlohmann::json& pod);

// "tp=8,pp=4,dp=2" (any order; missing ones are 1).
Result<JobRequest> parse_parallel(std::string_view s);
// The pod's index from its name's "-N" suffix; -1 when it has none.
int ordinal_of(std::string_view pod_name);

// The traffic a job is placed by when its pods do not give `ascend.huawei.com/comm-bytes`: the ratios of a
// typical dense transformer (TP >> DP >> PP per rank and step), so that topo keeps TP groups on the fastest
// links first. Values: tp 8 GB, dp 2 GB, pp 0.25 GB.
topology::CommBytes default_comm();

}  // namespace ascend::scheduler
