// Allocate over gRPC as the kubelet sends it, for the device plugin's tests: the request (one container
// request per list of device ids) and the call on a client of the plugin, with a deadline or without one.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <string>
#include <vector>

#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace ascend::testing {

// No deadline: the call waits as long as the plugin takes.
inline constexpr std::chrono::milliseconds kNoDeadline{0};

// An AllocateRequest with one container request per entry of `containers`, each asking for its ids.
v1beta1::AllocateRequest allocate_request(const std::vector<std::vector<std::string>>& containers);

// Sends `req` as Allocate on `stub` with a deadline `deadline` from now (kNoDeadline: none); the answer to
// *resp.
grpc::Status send_allocate(v1beta1::DevicePlugin::StubInterface& stub, const v1beta1::AllocateRequest& req,
                           v1beta1::AllocateResponse* resp, std::chrono::milliseconds deadline = kNoDeadline);

// allocate_request(containers) sent on `stub`: the answer, and the call's status to *status.
v1beta1::AllocateResponse allocate(v1beta1::DevicePlugin::StubInterface& stub,
                                   const std::vector<std::vector<std::string>>& containers,
                                   grpc::Status* status, std::chrono::milliseconds deadline = kNoDeadline);

// The answer's first container, or an empty one when it has none.
v1beta1::ContainerAllocateResponse first_container(const v1beta1::AllocateResponse& resp);

}  // namespace ascend::testing
