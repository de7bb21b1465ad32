#include "ascend/plugin/pod_resources.h"

#include <grpcpp/grpcpp.h>

#include "ascend/plugin/grpc_status.h"
#include "podresources/v1/podresources.grpc.pb.h"

namespace ascend::plugin {

Result<std::vector<PodDevices>> list_pod_devices(const std::string& socket,
                                                 std::chrono::milliseconds timeout) {
  auto channel = grpc::CreateChannel("unix://" + socket, grpc::InsecureChannelCredentials());
  auto stub = v1::PodResourcesLister::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  v1::ListPodResourcesRequest req;
  v1::ListPodResourcesResponse resp;
  grpc::Status s = stub->List(&ctx, req, &resp);
  if (!s.ok()) return from_grpc_status(s, "list pod resources at " + socket);
  std::vector<PodDevices> out;
  for (const auto& pod : resp.pod_resources()) {
    for (const auto& c : pod.containers()) {
      for (const auto& d : c.devices()) {
        if (d.device_ids().empty()) continue;
        out.push_back(PodDevices{pod.namespace_(),
                                 pod.name(),
                                 c.name(),
                                 d.resource_name(),
                                 {d.device_ids().begin(), d.device_ids().end()}});
      }
    }
  }
  return out;
}

}  // namespace ascend::plugin
