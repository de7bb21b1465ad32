#include "service.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "ascend/plugin/grpc_status.h"
#include "ascend/plugin/metrics.h"
#include "ascend/plugin/plugin.h"

namespace ascend::plugin {

namespace {

void to_proto(const std::vector<DeviceEntry>& devices, v1beta1::ListAndWatchResponse* out) {
  for (const auto& d : devices) {
    auto* dev = out->add_devices();
    dev->set_id(d.id);
    dev->set_health(is_healthy(d.health) ? kHealthy : kUnhealthy);
    dev->mutable_topology()->add_nodes()->set_id(d.numa);
  }
}

bool same(const std::vector<DeviceEntry>& a, const std::vector<DeviceEntry>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].id != b[i].id || is_healthy(a[i].health) != is_healthy(b[i].health) || a[i].numa != b[i].numa) {
      return false;
    }
  }
  return true;
}

void to_proto(const ContainerAllocation& a, v1beta1::ContainerAllocateResponse* out) {
  for (const auto& [k, v] : a.envs) (*out->mutable_envs())[k] = v;
  for (const auto& [k, v] : a.annotations) (*out->mutable_annotations())[k] = v;
  for (const auto& m : a.mounts) {
    auto* pm = out->add_mounts();
    pm->set_container_path(m.container_path);
    pm->set_host_path(m.host_path);
    pm->set_read_only(m.read_only);
  }
  for (const auto& d : a.devices) {
    auto* pd = out->add_devices();
    pd->set_container_path(d.container_path);
    pd->set_host_path(d.host_path);
    pd->set_permissions(d.permissions);
  }
  for (const auto& c : a.cdi_devices) out->add_cdi_devices()->set_name(c);
}

}  // namespace

v1beta1::DevicePluginOptions DevicePluginService::options() {
  v1beta1::DevicePluginOptions o;
  o.set_pre_start_required(false);
  o.set_get_preferred_allocation_available(true);
  return o;
}

grpc::Status DevicePluginService::GetDevicePluginOptions(grpc::ServerContext* /*ctx*/,
                                                         const v1beta1::Empty* /*req*/,
                                                         v1beta1::DevicePluginOptions* resp) {
  *resp = options();
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::ListAndWatch(grpc::ServerContext* ctx, const v1beta1::Empty* /*req*/,
                                               grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) {
  spdlog::info("{}: kubelet opened ListAndWatch", res_.name);
  std::vector<DeviceEntry> sent;
  bool first = true;
  while (!stopping_.load() && !ctx->IsCancelled()) {
    Plugin::Listing l = plugin_.list(res_);
    if (first || !same(l.devices, sent)) {
      v1beta1::ListAndWatchResponse resp;
      to_proto(l.devices, &resp);
      if (!writer->Write(resp)) break;
      std::size_t unhealthy = 0;
      for (const auto& d : l.devices) unhealthy += is_healthy(d.health) ? 0 : 1;
      spdlog::info("{}: sent {} devices ({} unhealthy)", res_.name, l.devices.size(), unhealthy);
      sent = std::move(l.devices);
      first = false;
    }
    // A short wait bounds how long a cancelled stream or a stopping server lingers.
    plugin_.wait_change(l.version, std::chrono::milliseconds(100));
  }
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::GetPreferredAllocation(grpc::ServerContext* /*ctx*/,
                                                         const v1beta1::PreferredAllocationRequest* req,
                                                         v1beta1::PreferredAllocationResponse* resp) {
  std::vector<PreferredRequest> requests;
  for (const auto& cr : req->container_requests()) {
    requests.push_back({{cr.available_deviceids().begin(), cr.available_deviceids().end()},
                        {cr.must_include_deviceids().begin(), cr.must_include_deviceids().end()},
                        cr.allocation_size()});
  }
  auto r = plugin_.preferred(res_, requests);
  if (!r) {
    spdlog::warn("{}: {}", res_.name, r.error().message());
    return to_grpc_status(r.error());
  }
  for (const auto& ids : *r) {
    auto* c = resp->add_container_responses();
    for (const auto& id : ids) c->add_deviceids(id);
  }
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::Allocate(grpc::ServerContext* /*ctx*/, const v1beta1::AllocateRequest* req,
                                           v1beta1::AllocateResponse* resp) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<std::string>> requests;
  for (const auto& cr : req->container_requests())
    requests.emplace_back(cr.devices_ids().begin(), cr.devices_ids().end());
  auto r = plugin_.allocate(res_, requests);
  if (metrics_ != nullptr)
    metrics_->observe_allocate(res_.name, std::chrono::steady_clock::now() - t0, r.ok());
  if (!r) {
    spdlog::warn("{}", r.error().message());
    return to_grpc_status(r.error());
  }
  for (const auto& a : *r) to_proto(a, resp->add_container_responses());
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::PreStartContainer(grpc::ServerContext* /*ctx*/,
                                                    const v1beta1::PreStartContainerRequest* /*req*/,
                                                    v1beta1::PreStartContainerResponse* /*resp*/) {
  // Options say pre_start_required = false; a kubelet that calls anyway gets a harmless no-op.
  return grpc::Status::OK;
}

}  // namespace ascend::plugin
