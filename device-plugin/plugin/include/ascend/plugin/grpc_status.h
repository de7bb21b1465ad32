// The one place where gRPC status meets ascend::Error, one helper each way. Every gRPC handler returns
// to_grpc_status(error); every gRPC client call turns a failed status into an Error with from_grpc_status.
// And the one way a handler's body runs (guarded_call), so that no exception reaches gRPC's thread.
#pragma once

#include <google/protobuf/message.h>
#include <grpcpp/support/status.h>

#include <string>
#include <string_view>

#include "ascend/common/error.h"
#include "ascend/common/guarded.h"

namespace ascend::plugin {

// EINVAL -> INVALID_ARGUMENT, ENOENT -> NOT_FOUND, EBUSY -> FAILED_PRECONDITION, ENOSPC ->
// RESOURCE_EXHAUSTED, EEXIST -> ALREADY_EXISTS, ETIMEDOUT -> DEADLINE_EXCEEDED, ECONNREFUSED/EAGAIN ->
// UNAVAILABLE, ENOSYS -> UNIMPLEMENTED, anything else -> INTERNAL. The message is kept.
grpc::Status to_grpc_status(const Error& e);

// The reverse mapping; `what` names the call ("register with the kubelet").
Error from_grpc_status(const grpc::Status& s, std::string_view what);

// Runs a unary call's body: an exception escaping it (a bug, out of memory) is logged (run_guarded) and
// answered INTERNAL with one line, instead of reaching gRPC's thread (where it would end the process).
// `resp` (may be null) is cleared then: whatever the body had written is not an answer.
template <typename Body>
grpc::Status guarded_call(const std::string& call, google::protobuf::Message* resp, Body&& body) {
  grpc::Status out;
  std::string why;
  if (run_guarded(
          call, [&] { out = body(); }, "answering INTERNAL", &why))
    return out;
  if (resp != nullptr) resp->Clear();
  return {grpc::StatusCode::INTERNAL, call + ": internal error: " + why};
}

}  // namespace ascend::plugin
