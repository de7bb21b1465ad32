#include "ascend/plugin/endpoint.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "ascend/plugin/grpc_status.h"
#include "ascend/plugin/plugin.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "service.h"

namespace ascend::plugin {

Endpoint::Endpoint(Plugin& plugin, ResourceSpec res, std::string socket_dir, Metrics* metrics)
    : plugin_(plugin), res_(std::move(res)), socket_dir_(std::move(socket_dir)), metrics_(metrics) {}

Endpoint::~Endpoint() {
  stop();
}

std::string Endpoint::socket_path() const {
  return socket_dir_ + (socket_dir_.ends_with('/') ? "" : "/") + res_.socket_name();
}

bool Endpoint::socket_intact() const {
  struct stat st {};
  if (::lstat(socket_path().c_str(), &st) != 0) return false;
  return S_ISSOCK(st.st_mode) && st.st_dev == dev_ && st.st_ino == ino_;
}

Status Endpoint::start() {
  if (server_) return {};
  const std::string path = socket_path();
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return Error::from_errno(errno, "remove stale socket " + path);
  // gRPC's unix listener binds the socket with the process umask's mode (srwxrwxrwx under umask 0), and
  // anyone who connects before a chmod keeps the connection. So it binds in a fresh 0700 folder beside the
  // final path, where only root can reach it, is made 0600 there and then renamed into place: the socket
  // is never reachable with a wider mode. (Setting the umask around the bind would not do: the umask is the
  // whole process's, and gRPC's and the device watcher's threads create files too.)
  std::string dir_template = socket_dir_ + (socket_dir_.ends_with('/') ? "" : "/") + ".ascend-XXXXXX";
  if (::mkdtemp(dir_template.data()) == nullptr)
    return Error::from_errno(errno, "serve " + res_.name + ": create a private folder in " + socket_dir_);
  const std::string private_dir = dir_template;
  const std::string bound = private_dir + "/s";  // short: sun_path holds 107 bytes
  auto cleanup = [&] {
    ::unlink(bound.c_str());
    ::rmdir(private_dir.c_str());
  };
  service_ = std::make_unique<DevicePluginService>(plugin_, res_, metrics_);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + bound, grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (!server_) {
    service_.reset();
    cleanup();
    return Error(EADDRNOTAVAIL, "serve " + res_.name + " on " + path + " (see the log for gRPC's reason)");
  }
  auto fail = [&](const std::string& what) {
    const int err = errno;
    stop();
    cleanup();
    return Error::from_errno(err, "serve " + res_.name + ": " + what);
  };
  if (::chmod(bound.c_str(), kSocketMode) != 0) return fail("chmod " + bound);
  if (::rename(bound.c_str(), path.c_str()) != 0) return fail("rename " + bound + " to " + path);
  ::rmdir(private_dir.c_str());
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return fail("stat " + path);
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  spdlog::info("{}: serving on {}", res_.name, path);
  return {};
}

void Endpoint::stop() {
  if (!server_) return;
  const bool ours = socket_intact();
  service_->stop_streams();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_->Wait();
  server_.reset();
  service_.reset();
  // Only remove the file this endpoint created: a kubelet restart may already have removed it.
  if (ours) ::unlink(socket_path().c_str());
  dev_ = 0;
  ino_ = 0;
  spdlog::info("{}: stopped serving", res_.name);
}

Status Endpoint::register_with(const std::string& kubelet_socket, std::chrono::milliseconds timeout) const {
  auto channel = grpc::CreateChannel("unix://" + kubelet_socket, grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  v1beta1::RegisterRequest req;
  req.set_version(kApiVersion);
  req.set_endpoint(res_.socket_name());
  req.set_resource_name(res_.name);
  *req.mutable_options() = DevicePluginService::options();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  v1beta1::Empty resp;
  grpc::Status s = stub->Register(&ctx, req, &resp);
  if (!s.ok()) return from_grpc_status(s, "register " + res_.name + " with the kubelet at " + kubelet_socket);
  return {};
}

}  // namespace ascend::plugin
