// The DevicePlugin gRPC service of one resource: converts protobuf messages to and from the plugin's plain
// values and errors to gRPC status (grpc_status.h). No decisions are made here. Thread-safe.
#pragma once

#include <atomic>

#include "ascend/plugin/inventory.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace ascend::plugin {

class Plugin;
class Metrics;

class DevicePluginService final : public v1beta1::DevicePlugin::Service {
 public:
  // `stopping` ends open ListAndWatch streams when set (the endpoint sets it, then calls Plugin::wake_all).
  DevicePluginService(Plugin& plugin, ResourceSpec res, Metrics* metrics, const std::atomic<bool>& stopping)
      : plugin_(plugin), res_(std::move(res)), metrics_(metrics), stopping_(stopping) {}

  static v1beta1::DevicePluginOptions options();

  grpc::Status GetDevicePluginOptions(grpc::ServerContext* ctx, const v1beta1::Empty* req,
                                      v1beta1::DevicePluginOptions* resp) override;
  grpc::Status ListAndWatch(grpc::ServerContext* ctx, const v1beta1::Empty* req,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override;
  grpc::Status GetPreferredAllocation(grpc::ServerContext* ctx,
                                      const v1beta1::PreferredAllocationRequest* req,
                                      v1beta1::PreferredAllocationResponse* resp) override;
  grpc::Status Allocate(grpc::ServerContext* ctx, const v1beta1::AllocateRequest* req,
                        v1beta1::AllocateResponse* resp) override;
  grpc::Status PreStartContainer(grpc::ServerContext* ctx, const v1beta1::PreStartContainerRequest* req,
                                 v1beta1::PreStartContainerResponse* resp) override;

 private:
  Plugin& plugin_;
  const ResourceSpec res_;
  Metrics* metrics_;
  const std::atomic<bool>& stopping_;
};

}  // namespace ascend::plugin
