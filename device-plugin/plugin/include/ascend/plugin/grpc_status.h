// The one place where gRPC status meets ascend::Error, one helper each way. Every gRPC handler returns
// to_grpc_status(error); every gRPC client call turns a failed status into an Error with from_grpc_status.
#pragma once

#include <grpcpp/support/status.h>

#include <string_view>

#include "ascend/common/error.h"

namespace ascend::plugin {

// EINVAL -> INVALID_ARGUMENT, ENOENT -> NOT_FOUND, EBUSY -> FAILED_PRECONDITION, ENOSPC ->
// RESOURCE_EXHAUSTED, EEXIST -> ALREADY_EXISTS, ETIMEDOUT -> DEADLINE_EXCEEDED, ECONNREFUSED/EAGAIN ->
// UNAVAILABLE, ENOSYS -> UNIMPLEMENTED, anything else -> INTERNAL. The message is kept.
grpc::Status to_grpc_status(const Error& e);

// The reverse mapping; `what` names the call ("register with the kubelet").
Error from_grpc_status(const grpc::Status& s, std::string_view what);

}  // namespace ascend::plugin
