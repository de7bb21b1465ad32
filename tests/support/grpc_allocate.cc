#include "grpc_allocate.h"

namespace ascend::testing {

v1beta1::AllocateRequest allocate_request(const std::vector<std::vector<std::string>>& containers) {
  v1beta1::AllocateRequest req;
  for (const auto& c : containers) {
    auto* cr = req.add_container_requests();
    for (const auto& id : c) cr->add_devices_ids(id);
  }
  return req;
}

grpc::Status send_allocate(v1beta1::DevicePlugin::StubInterface& stub, const v1beta1::AllocateRequest& req,
                           v1beta1::AllocateResponse* resp, std::chrono::milliseconds deadline) {
  grpc::ClientContext ctx;
  if (deadline.count() > 0) ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  return stub.Allocate(&ctx, req, resp);
}

v1beta1::AllocateResponse allocate(v1beta1::DevicePlugin::StubInterface& stub,
                                   const std::vector<std::vector<std::string>>& containers,
                                   grpc::Status* status, std::chrono::milliseconds deadline) {
  v1beta1::AllocateResponse resp;
  *status = send_allocate(stub, allocate_request(containers), &resp, deadline);
  return resp;
}

v1beta1::ContainerAllocateResponse first_container(const v1beta1::AllocateResponse& resp) {
  return resp.container_responses_size() > 0 ? resp.container_responses(0)
                                             : v1beta1::ContainerAllocateResponse{};
}

}  // namespace ascend::testing
