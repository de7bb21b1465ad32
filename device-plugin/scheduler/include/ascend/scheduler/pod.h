// What the extender learns from a Kubernetes Pod object: who it is, how many whole NPUs of which resource it
// asks for, and, for a pod of a training job, the job's annotations. Pure functions; thread-safe.
//
// Field names of the Pod are matched as Go's encoding/json matches them (exact first, then any letter case);
// annotation keys are exact (they are map keys).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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
// What happens to a running job when a chip under it fails (issue 23): `pod` (only the pods on faulty chips
// go, and come back around the others), `job` (every pod goes; the default), `none`; and how often.
inline constexpr const char* kRecoveryAnnotation = "ascend.huawei.com/recovery";
inline constexpr const char* kMaxRestartsAnnotation = "ascend.huawei.com/max-restarts";
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
  topology::CommBytes comm;  // per rank and step; defaults when the pod does not say (see docs/scheduler.md)
  std::string recovery = "job";  // pod | job | none
  int max_restarts = 3;          // 0..100

  // tp x pp x dp: each is at most 2^20 (parse_parallel), so the product fits 64 bits, never an int.
  std::int64_t npus() const {
    return static_cast<std::int64_t>(tp) * static_cast<std::int64_t>(pp) * static_cast<std::int64_t>(dp);
  }
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
  // The ResourceClaims (DRA) the pod uses, by name in its namespace: spec.resourceClaims[].resourceClaimName,
  // and for an entry made from a template the claim status.resourceClaimStatuses names (an entry whose claim
  // is not made yet, or needs none, is left out). At most kClaimsMax.
  std::vector<std::string> claims;

  std::string key() const { return ns + "/" + name; }
};

// The value of `key` in object `j`, matched exactly, else in any letter case; null when absent or when `j`
// is not an object.
const nlohmann::json* find_field(const nlohmann::json& j, std::string_view key);

// Kubernetes' own limits on the names a request carries (k8s.io/apimachinery/pkg/util/validation), checked
// when a request is parsed so that nothing larger or stranger is ever remembered, persisted, shown, or put
// into a URL: a DNS-1123 label is at most 63 bytes of [a-z0-9-], starting and ending alphanumeric
// (namespaces); a DNS-1123 subdomain is at most 253 bytes of such labels joined by '.' (pod and node
// names). EINVAL names `field` and says which rule failed.
inline constexpr std::size_t kDns1123LabelMax = 63;
inline constexpr std::size_t kDns1123SubdomainMax = 253;
// The API server refuses an object whose annotations (keys and values) total more than 256 KiB
// (TotalAnnotationSizeLimitB).
inline constexpr std::size_t kAnnotationsMax = std::size_t{256} * 1024;
// Our own annotations hold a name or a short list of numbers; nothing real comes near this.
inline constexpr std::size_t kOurAnnotationMax = 256;
// The ResourceClaims of one pod the extender reads. Kubernetes sets no number (a pod is at most the API
// server's 1.5 MiB request); a pod with more is refused as malformed.
inline constexpr std::size_t kClaimsMax = 128;
// A Kubernetes Job's name: a DNS-1123 subdomain, but at most 63 bytes (it becomes a label value of its pods).
inline constexpr std::size_t kJobNameMax = 63;
// The API server's object UIDs are RFC 4122 UUIDs (36 characters).
inline constexpr std::size_t kUidMax = 36;
Status check_dns1123_label(std::string_view v, const std::string& field);
Status check_dns1123_subdomain(std::string_view v, const std::string& field,
                               std::size_t max = kDns1123SubdomainMax);
Status check_uid(std::string_view v, const std::string& field);
// check_dns1123_subdomain(v, ..., max).ok() in one pass over the bytes, with no message made: for the
// 5 000 node names of a /filter body (read_extender_args_fast).
bool is_dns1123_subdomain(std::string_view v, std::size_t max = kDns1123SubdomainMax);

// Reads a Pod object. Fails (EINVAL, naming the field) when it is not an object, has no metadata.name, or a
// field has the wrong type, or a name, the UID or an annotation is outside Kubernetes' limits (above).
// Problems with the meaning of the job annotations are not failures: they land in job_error.
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
