// The pure part of the DRA driver's kubelet plugin (dra_service.h): which of this node's chips a
// ResourceClaim's allocation gives, checked at the parse boundary (the claim is the API server's JSON, the
// checkpoint a file: a wrong type is an error, never an exception), and the checkpoint as text.
// No I/O; thread-safe (pure functions).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ascend/common/error.h"
#include "ascend/npu/seam.h"
#include "ascend/plugin/dra_service.h"

namespace ascend::plugin::dra_kubelet {

// resource.k8s.io/v1 AllocationResultsMaxSize: an allocation with more results is not the API server's.
inline constexpr std::size_t kMaxResults = 32;
// A result's request: a request's name and a subrequest's, each a DNS label (63), joined by '/'.
inline constexpr std::size_t kMaxRequest = 63 + 1 + 63;
inline constexpr const char* kCheckpointFormat = "ascend-dra-checkpoint";
inline constexpr int kCheckpointVersion = 1;
// A full checkpoint (kDraMaxPreparedClaims claims of a few chips with the longest names) is under 8 MiB.
inline constexpr std::size_t kMaxCheckpointBytes = std::size_t{16} << 20;

// EINVAL when `uid` is empty or longer than kDraMaxUid.
Status check_uid(const std::string& uid);
// EINVAL naming the field when the namespace or the name is empty or too long.
Status check_names(const DraClaimRef& ref);

// A result's request without its subrequest ("train/eight" -> "train"): the kubelet matches a container's
// requests by their base name.
std::string base_request(std::string_view request);

// --dra-vnpu: what a vNPU result (a device dra_slices.h names npu-<phy>-<template>-<k>) is checked against.
struct VnpuRules {
  const npu::DeviceSnapshot* host = nullptr;  // its templates and vNPU capacity
  std::vector<int> healthy;                   // the chips a vNPU may be made on (vNPUs on them or not)
};

// The devices a v1 ResourceClaim `claim` gives this driver on `node`, each a chip of `chips` or (with
// `vnpus`) a vNPU template instance on a chip of vnpus->healthy: EINVAL when the claim is another one than
// `ref` names (its uid differs: deleted and made again), is not allocated, has results of this driver in
// another pool, naming a device that is not one of these (a vNPU without `vnpus`) or a request longer than
// kMaxRequest, or none of this driver at all. Results of other drivers are theirs to prepare and are
// skipped. A vNPU's device has no CDI id and no vNPU id yet (dra_service.cc makes the vNPU).
Result<std::vector<DraDevice>> devices_of_claim(const nlohmann::json& claim, const DraClaimRef& ref,
                                                const std::string& node, const std::vector<int>& chips,
                                                const VnpuRules* vnpus = nullptr);

std::string encode_checkpoint(const std::map<std::string, DraPreparedClaim>& claims);
// EINVAL naming what is wrong: not JSON, another format or version, a field of the wrong type, a bound
// exceeded.
Result<std::map<std::string, DraPreparedClaim>> decode_checkpoint(std::string_view text);

}  // namespace ascend::plugin::dra_kubelet
