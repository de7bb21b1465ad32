// The DevicePlugin gRPC service of one resource: converts protobuf messages to and from the plugin's plain
// values and errors to gRPC status (grpc_status.h). No decisions are made here. Thread-safe.
//
// Threading: grpc++'s callback API. A unary call (GetDevicePluginOptions, GetPreferredAllocation,
// Allocate, PreStartContainer) is answered on the gRPC thread that read it; there is no pool of
// synchronous workers to hand it to. A ListAndWatch stream is a write reactor: one watcher thread per
// service waits for the plugin's version to change and lets every open stream write a new list when its
// devices differ from the last one it sent.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "ascend/plugin/inventory.h"
#include "ascend/plugin/metrics.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace ascend::plugin {

class Plugin;
class ListAndWatchReactor;

class DevicePluginService final : public v1beta1::DevicePlugin::CallbackService {
 public:
  // Starts the watcher thread that feeds ListAndWatch streams.
  DevicePluginService(Plugin& plugin, ResourceSpec res, Metrics* metrics);
  ~DevicePluginService() override;
  DevicePluginService(const DevicePluginService&) = delete;
  DevicePluginService& operator=(const DevicePluginService&) = delete;

  static v1beta1::DevicePluginOptions options();

  // Finishes every open ListAndWatch stream (and any opened later) and joins the watcher thread.
  void stop_streams();

  grpc::ServerUnaryReactor* GetDevicePluginOptions(grpc::CallbackServerContext* ctx,
                                                   const v1beta1::Empty* req,
                                                   v1beta1::DevicePluginOptions* resp) override;
  grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse>* ListAndWatch(grpc::CallbackServerContext* ctx,
                                                                        const v1beta1::Empty* req) override;
  grpc::ServerUnaryReactor* GetPreferredAllocation(grpc::CallbackServerContext* ctx,
                                                   const v1beta1::PreferredAllocationRequest* req,
                                                   v1beta1::PreferredAllocationResponse* resp) override;
  grpc::ServerUnaryReactor* Allocate(grpc::CallbackServerContext* ctx, const v1beta1::AllocateRequest* req,
                                     v1beta1::AllocateResponse* resp) override;
  grpc::ServerUnaryReactor* PreStartContainer(grpc::CallbackServerContext* ctx,
                                              const v1beta1::PreStartContainerRequest* req,
                                              v1beta1::PreStartContainerResponse* resp) override;

  Plugin& plugin() const { return plugin_; }
  const ResourceSpec& resource() const { return res_; }
  bool stopping() const { return stopping_.load(); }

  // The unary calls' bodies, without a gRPC context (the callbacks above answer with these; the fuzz
  // targets call them directly with parsed messages). An exception escaping the plugin is answered
  // INTERNAL with one line (and logged), never thrown on into gRPC's thread.
  grpc::Status allocate(const v1beta1::AllocateRequest& req, v1beta1::AllocateResponse* resp);
  grpc::Status preferred(const v1beta1::PreferredAllocationRequest& req,
                         v1beta1::PreferredAllocationResponse* resp);

 private:
  // The open streams (expired ones pruned), kept alive while the caller holds them.
  std::vector<std::shared_ptr<ListAndWatchReactor>> live_streams();
  grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse>* open_stream();
  grpc::Status allocate_body(const v1beta1::AllocateRequest& req, v1beta1::AllocateResponse* resp);
  grpc::Status preferred_body(const v1beta1::PreferredAllocationRequest& req,
                              v1beta1::PreferredAllocationResponse* resp);
  void watch_loop();

  Plugin& plugin_;
  const ResourceSpec res_;
  std::optional<AllocateSeries> allocate_series_;  // none without metrics
  std::atomic<bool> stopping_{false};

  std::mutex streams_mu_;
  std::vector<std::weak_ptr<ListAndWatchReactor>> streams_;
  std::thread watcher_;  // last: started once the members above exist
};

}  // namespace ascend::plugin
