// A fake kubelet for the device plugin's tests, written with grpc++ against the same v1beta1 protocol: it
// serves Registration on <dir>/kubelet.sock (and, optionally, the pod-resources List), and, like the real
// kubelet, dials the plugin back from inside Register (GetDevicePluginOptions) before replying. A restart
// closes every stream it has open, deletes every socket in the folder and serves a new kubelet.sock.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace ascend::testing {

struct Registration {
  v1beta1::RegisterRequest request;
  bool options_ok = false;  // GetDevicePluginOptions on the plugin's socket answered during Register
  v1beta1::DevicePluginOptions options;
  std::chrono::steady_clock::time_point at;
};

// One ListAndWatch stream, read on its own thread.
class Watch {
 public:
  Watch(v1beta1::DevicePlugin::Stub& stub);
  ~Watch();
  // Waits until a list received after the one the previous wait_for matched satisfies `pred`, and copies
  // it to `out`. False on timeout or when the stream ended first.
  bool wait_for(const std::function<bool(const v1beta1::ListAndWatchResponse&)>& pred,
                std::chrono::milliseconds timeout, v1beta1::ListAndWatchResponse* out = nullptr);
  std::vector<v1beta1::ListAndWatchResponse> received() const;
  bool ended() const;
  void cancel();

 private:
  grpc::ClientContext ctx_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<v1beta1::ListAndWatchResponse> got_;
  std::size_t cursor_ = 0;  // lists before this one were looked at by an earlier wait_for
  bool ended_ = false;
  std::thread reader_;
};

class FakeKubelet {
 public:
  explicit FakeKubelet(std::string dir, std::string pod_resources_socket = "");
  ~FakeKubelet();

  void start();
  // Stops serving and cancels every stream opened through plugin(); with `delete_sockets`, removes every
  // socket file in the folder as a restarting kubelet does.
  void stop(bool delete_sockets);
  void restart() {
    stop(true);
    start();
  }

  int registration_count() const;
  std::vector<Registration> registrations() const;
  // Waits for the n-th registration (1-based) and returns it.
  bool wait_registrations(int n, std::chrono::milliseconds timeout) const;

  // A client of the plugin behind `endpoint` (a file name in the folder).
  std::unique_ptr<v1beta1::DevicePlugin::Stub> plugin(const std::string& endpoint) const;
  // Opens ListAndWatch on `endpoint`; stop() cancels it.
  std::shared_ptr<Watch> watch(const std::string& endpoint);

  // What the pod-resources List reports: resource name -> device ids in use (one pod "default/pod",
  // container "main"), or, once set_pods was called, exactly those containers.
  void set_in_use(std::map<std::string, std::set<std::string>> in_use);
  struct PodContainer {
    std::string pod_namespace;
    std::string pod;
    std::string container;
    std::string resource;
    std::vector<std::string> ids;
  };
  void set_pods(std::vector<PodContainer> pods);
  // How many pod-resources List calls have been answered (the plugin's reconcile asks once a pass).
  int pod_resources_lists() const;

  const std::string& dir() const { return dir_; }

  class RegistrationService;
  class PodResourcesService;

 private:
  void record(Registration r);

  std::string dir_;
  std::string pod_resources_socket_;
  std::unique_ptr<RegistrationService> reg_service_;
  std::unique_ptr<PodResourcesService> pr_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::Server> pr_server_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<Registration> regs_;
  std::vector<std::weak_ptr<Watch>> watches_;
  std::map<std::string, std::set<std::string>> in_use_;
  std::optional<std::vector<PodContainer>> pods_;
  int pod_resources_lists_ = 0;
};

}  // namespace ascend::testing
