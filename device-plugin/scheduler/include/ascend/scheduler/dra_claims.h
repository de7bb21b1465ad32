// What the extender reads of DRA ResourceClaims (resource.k8s.io/v1), so that a training job whose pods get
// their chips through claims is placed as a whole like one that asks the device plugin's resource
// (docs/dra.md "Scheduling"). Pure functions; thread-safe.
//
// The split: kube-scheduler's DRA allocator picks each claim's devices; the extender picks each pod's node.
// At filter, a job pod without a whole-chip resource asks for the chips its claims request of the DeviceClass
// npu.ascend.huawei.com (ExactCount requests), so the job is planned over the chips no claim holds yet and
// each pod is filtered to its planned node. At bind (after kube-scheduler's PreBind wrote the allocation),
// the pod holds the chips its claims were given on that node, which may differ from the planned ones.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ascend/common/error.h"
#include "ascend/deviceinfo/dra_names.h"
#include "ascend/scheduler/pod.h"

namespace ascend::scheduler {

// The DRA driver's name (its device names: ascend/deviceinfo/dra_names.h) and the DeviceClass of its whole
// chips (deploy/kubernetes/dra-deviceclass.yaml).
using deviceinfo::kDraDriver;
inline constexpr const char* kDraChipClass = "npu.ascend.huawei.com";
// Kubernetes' limits: a claim has at most 32 requests (DeviceRequestsMaxSize) and an allocation at most 32
// results (AllocationResultsMaxSize); a device name is a DNS label.
inline constexpr std::size_t kClaimRequestsMax = 32;
inline constexpr std::size_t kAllocationResultsMax = 32;
// ... and a request at most 8 alternatives (FirstAvailableDeviceRequestMaxSize).
inline constexpr std::size_t kFirstAvailableMax = 8;

struct ClaimInfo {
  std::string ns, name, uid;
  // Whole chips it asks of kDraChipClass.
  int chips = 0;
  // Why a job cannot be planned with this claim ("" : it can): it asks for chips in a way the extender does
  // not plan (allocationMode All, firstAvailable), or for vNPUs.
  std::string unplannable;
  // Its allocation (status.allocation) of kDraDriver's devices: the node (our driver's pool is the node's
  // name) and the chips, ascending (a vNPU device `npu-<phy>-<template>-<k>` counts as its chip: a chip with
  // a vNPU taken is not whole).
  bool allocated = false;
  std::string node;
  std::vector<int> phys;

  std::string key() const { return ns + "/" + name; }
};

// Reads a ResourceClaim. EINVAL (naming the field) when it is not one: no metadata.name, a field of the
// wrong type, a name, list or chip number outside Kubernetes' limits.
Result<ClaimInfo> read_claim(const nlohmann::json& claim);
// What the claim informer keeps of a ResourceClaim: the fields read_claim reads.
nlohmann::json slim_claim(nlohmann::json claim);

// Whether a pod takes its whole chips from its claims: a pod of a job that uses claims and asks for no
// whole-chip resource (a pod without a job that uses claims is kube-scheduler's alone).
inline bool chips_from_claims(const PodInfo& pod) {
  return pod.job.has_value() && pod.resource.empty() && !pod.claims.empty();
}

// Such a pod (chips_from_claims) takes its chips from them: `resource` becomes kResource910 (a training
// job's chips), `chips` the sum of its claims' chips (at most 4096, as read_pod allows a resource). `claims`
// are the pod's claims in its order, a null for one that is not known (not in the cache yet). A claim that
// is unknown or not plannable, or too many chips, put the reason into job_error (the pod is refused on every
// node, with it); claims that ask for no chip leave the pod as it is. Other pods are left as they are.
void apply_claims(PodInfo& pod, const std::vector<const ClaimInfo*>& claims);

}  // namespace ascend::scheduler
