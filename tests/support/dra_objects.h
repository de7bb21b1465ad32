// resource.k8s.io/v1 objects the DRA tests make (the stand-in's, kube_sync_test, and the real cluster's,
// kube_test): their shape from the API reference (ResourceClaim, DeviceRequest, DeviceConstraint).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace ascend::testing {

// A ResourceClaim `name` in the namespace "default" for `count` chips (ExactCount) of the DeviceClass
// npu.ascend.huawei.com; with `one_hccs_domain`, a constraint that they share one HCCS domain (our driver's
// attribute npu.ascend.huawei.com/hccsDomain, as deploy/kubernetes/dra-training-claim.yaml asks).
inline nlohmann::json npu_claim(const std::string& name, int count, bool one_hccs_domain = false) {
  using nlohmann::json;
  json devices = {{"requests", json::array({{{"name", "npus"},
                                             {"exactly",
                                              {{"deviceClassName", "npu.ascend.huawei.com"},
                                               {"allocationMode", "ExactCount"},
                                               {"count", count}}}}})}};
  if (one_hccs_domain) {
    devices["constraints"] = json::array(
        {{{"requests", json::array({"npus"})}, {"matchAttribute", "npu.ascend.huawei.com/hccsDomain"}}});
  }
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"name", name}, {"namespace", "default"}}},
          {"spec", {{"devices", devices}}}};
}

}  // namespace ascend::testing
