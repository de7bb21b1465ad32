#include "ascend/plugin/grpc_status.h"

#include <utility>

namespace ascend::plugin {

namespace {

constexpr std::pair<int, grpc::StatusCode> kMap[] = {
    {EINVAL, grpc::StatusCode::INVALID_ARGUMENT},   {ENOENT, grpc::StatusCode::NOT_FOUND},
    {EBUSY, grpc::StatusCode::FAILED_PRECONDITION}, {ENOSPC, grpc::StatusCode::RESOURCE_EXHAUSTED},
    {EEXIST, grpc::StatusCode::ALREADY_EXISTS},     {ETIMEDOUT, grpc::StatusCode::DEADLINE_EXCEEDED},
    {ECONNREFUSED, grpc::StatusCode::UNAVAILABLE},  {EAGAIN, grpc::StatusCode::UNAVAILABLE},
    {ENOSYS, grpc::StatusCode::UNIMPLEMENTED},      {ECANCELED, grpc::StatusCode::CANCELLED},
    {EPERM, grpc::StatusCode::PERMISSION_DENIED},
};

}  // namespace

grpc::Status to_grpc_status(const Error& e) {
  for (const auto& [code, status] : kMap) {
    if (code == e.code()) return {status, e.message()};
  }
  return {grpc::StatusCode::INTERNAL, e.message()};
}

Error from_grpc_status(const grpc::Status& s, std::string_view what) {
  int code = EIO;
  for (const auto& [errno_code, status] : kMap) {
    if (status == s.error_code()) {
      code = errno_code;
      break;
    }
  }
  std::string msg(what);
  msg += ": ";
  msg += s.error_message().empty() ? "gRPC status " + std::to_string(static_cast<int>(s.error_code()))
                                   : s.error_message();
  return {code, msg};
}

}  // namespace ascend::plugin
