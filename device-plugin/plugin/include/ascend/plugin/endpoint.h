// One served resource: the plugin's gRPC DevicePlugin server on <socket dir>/ascend-<resource>.sock, and
// its registration with the kubelet. start() serves first; register_with() then tells the kubelet the
// socket's file name, so the kubelet's immediate calls back (GetDevicePluginOptions, ListAndWatch) find a
// server already running.
//
// start/stop/register_with are called from one thread (the daemon's loop); the gRPC handlers run on
// gRPC's threads.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>

#include "ascend/common/error.h"
#include "ascend/plugin/inventory.h"

namespace grpc {
class Server;
}

namespace ascend::plugin {

class Plugin;
class Metrics;
class DevicePluginService;

inline constexpr const char* kApiVersion = "v1beta1";
inline constexpr const char* kKubeletSocketName = "kubelet.sock";
// The plugin's sockets: the kubelet (root) is their only client, and whoever can connect can Allocate.
inline constexpr mode_t kSocketMode = 0600;

class Endpoint {
 public:
  Endpoint(Plugin& plugin, ResourceSpec res, std::string socket_dir, Metrics* metrics);
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  const ResourceSpec& resource() const { return res_; }
  std::string socket_path() const;
  bool serving() const { return server_ != nullptr; }
  // True while the socket file is the one this endpoint created (the kubelet deletes it when it restarts).
  bool socket_intact() const;

  // Removes a stale socket file of the same name and serves on a new one, mode kSocketMode whatever the
  // umask.
  Status start();
  // Ends open ListAndWatch streams, stops the server and removes its socket file.
  void stop();

  // Calls Registration.Register on the kubelet's socket.
  Status register_with(const std::string& kubelet_socket, std::chrono::milliseconds timeout) const;

 private:
  Plugin& plugin_;
  const ResourceSpec res_;
  const std::string socket_dir_;
  Metrics* metrics_;
  std::unique_ptr<DevicePluginService> service_;
  std::unique_ptr<grpc::Server> server_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

}  // namespace ascend::plugin
