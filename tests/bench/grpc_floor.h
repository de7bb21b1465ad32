// The floor of a gRPC call: one empty unary method (the Device Plugin API's GetDevicePluginOptions,
// answering an empty message) on grpc++'s callback API, nothing else. A bench serves it on a unix socket
// of its own and compares a call of the component under test with a call of this.
#pragma once

#include <grpcpp/grpcpp.h>

#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace ascend::bench {

class FloorService final : public v1beta1::DevicePlugin::CallbackService {
  grpc::ServerUnaryReactor* GetDevicePluginOptions(grpc::CallbackServerContext* ctx,
                                                   const v1beta1::Empty* /*req*/,
                                                   v1beta1::DevicePluginOptions* /*resp*/) override {
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }
};

}  // namespace ascend::bench
