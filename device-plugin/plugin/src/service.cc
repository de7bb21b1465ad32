#include "service.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <optional>
#include <thread>
#include <utility>

#include "ascend/common/guarded.h"
#include "ascend/plugin/grpc_status.h"
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

// One ListAndWatch stream. Owned by a shared_ptr that the reactor holds on itself from Start() to OnDone();
// the service's watcher holds it too while it pokes the stream, so neither side outlives the other.
// StartWrite and Finish are called with no lock held; at most one write is in flight and Finish is called
// once, only when no write is.
class ListAndWatchReactor final : public grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse> {
 public:
  explicit ListAndWatchReactor(const DevicePluginService& svc) : svc_(svc) {}

  void start(std::shared_ptr<ListAndWatchReactor> self) {
    self_ = std::move(self);
    poke();
  }

  // Writes the current list if it differs from the last one sent; finishes the stream once it is ending.
  // Called from the service's watcher thread and from gRPC's callbacks: an exception (a bug, out of memory)
  // ends this stream with INTERNAL and the reason, never the process; the kubelet opens a new one.
  void poke() {
    std::string why;
    if (run_guarded(
            svc_.resource().name + ": ListAndWatch", [this] { poke_unguarded(); }, "ending the stream", &why))
      return;
    {
      std::lock_guard lock(mu_);
      if (finished_ || writing_) return;  // a write in flight finishes the stream from OnWriteDone
      finished_ = true;
      ending_ = true;
    }
    Finish(grpc::Status(grpc::StatusCode::INTERNAL, "internal error: " + why));
  }

 private:
  void poke_unguarded() {
    std::unique_lock lock(mu_);
    if (finished_ || writing_) return;
    if (ending_ || svc_.stopping()) {
      finished_ = true;
      lock.unlock();
      Finish(grpc::Status::OK);
      return;
    }
    Plugin::Listing l = svc_.plugin().list(svc_.resource());
    if (!first_ && same(l.devices, sent_)) return;
    resp_.Clear();
    to_proto(l.devices, &resp_);
    std::size_t unhealthy = 0;
    for (const auto& d : l.devices) unhealthy += is_healthy(d.health) ? 0 : 1;
    sent_ = std::move(l.devices);
    first_ = false;
    writing_ = true;
    const std::size_t n = sent_.size();
    lock.unlock();
    spdlog::info("{}: sent {} devices ({} unhealthy)", svc_.resource().name, n, unhealthy);
    StartWrite(&resp_);
  }

 public:
  void OnWriteDone(bool ok) override {
    {
      std::lock_guard lock(mu_);
      writing_ = false;
      if (!ok) ending_ = true;
    }
    poke();  // a change may have come while the write was in flight
  }

  void OnCancel() override {
    {
      std::lock_guard lock(mu_);
      ending_ = true;
    }
    poke();
  }

  void OnDone() override {
    spdlog::info("{}: ListAndWatch stream ended", svc_.resource().name);
    auto last = std::move(self_);  // may destroy this on return
  }

 private:
  const DevicePluginService& svc_;
  std::shared_ptr<ListAndWatchReactor> self_;
  std::mutex mu_;
  bool first_ = true;
  bool writing_ = false;
  bool ending_ = false;
  bool finished_ = false;
  std::vector<DeviceEntry> sent_;
  v1beta1::ListAndWatchResponse resp_;  // untouched while a write is in flight
};

DevicePluginService::DevicePluginService(Plugin& plugin, ResourceSpec res, Metrics* metrics)
    : plugin_(plugin),
      res_(std::move(res)),
      allocate_series_(metrics != nullptr ? std::optional(metrics->allocate_series(res_.name))
                                          : std::nullopt),
      watcher_([this] { watch_loop(); }) {}

DevicePluginService::~DevicePluginService() {
  stop_streams();
}

v1beta1::DevicePluginOptions DevicePluginService::options() {
  v1beta1::DevicePluginOptions o;
  o.set_pre_start_required(false);
  o.set_get_preferred_allocation_available(true);
  return o;
}

std::vector<std::shared_ptr<ListAndWatchReactor>> DevicePluginService::live_streams() {
  std::vector<std::shared_ptr<ListAndWatchReactor>> out;
  std::lock_guard lock(streams_mu_);
  for (auto it = streams_.begin(); it != streams_.end();) {
    if (auto s = it->lock()) {
      out.push_back(std::move(s));
      ++it;
    } else {
      it = streams_.erase(it);
    }
  }
  return out;
}

void DevicePluginService::watch_loop() {
  std::string failed;  // the last exception's text (guarded.h)
  while (!stopping_.load()) {
    std::optional<std::uint64_t> seen;
    run_guarded(
        res_.name + ": stream watcher",
        [&] {
          seen = plugin_.version();
          for (auto& s : live_streams()) s->poke();
        },
        "carrying on", &failed);
    // A short wait bounds how long a stop that raced with this loop goes unnoticed; a pass that threw before
    // it read the version waits as long.
    if (seen) {
      plugin_.wait_change(*seen, std::chrono::milliseconds(100));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

void DevicePluginService::stop_streams() {
  stopping_ = true;
  plugin_.wake_all();
  if (watcher_.joinable()) watcher_.join();
  for (auto& s : live_streams()) s->poke();  // stopping_ is set: each stream finishes
}

grpc::ServerUnaryReactor* DevicePluginService::GetDevicePluginOptions(grpc::CallbackServerContext* ctx,
                                                                      const v1beta1::Empty* /*req*/,
                                                                      v1beta1::DevicePluginOptions* resp) {
  auto* r = ctx->DefaultReactor();
  r->Finish(guarded_call(res_.name + ": GetDevicePluginOptions", resp, [resp] {
    *resp = options();
    return grpc::Status::OK;
  }));
  return r;
}

grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse>* DevicePluginService::ListAndWatch(
    grpc::CallbackServerContext* /*ctx*/, const v1beta1::Empty* /*req*/) {
  grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse>* out = nullptr;
  std::string why;
  if (run_guarded(
          res_.name + ": ListAndWatch", [&] { out = open_stream(); }, "refusing the stream", &why))
    return out;
  // A reactor that only finishes: the kubelet sees INTERNAL and the reason, and opens the stream again.
  class Refused final : public grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse> {
    void OnDone() override { delete this; }
  };
  auto* refused = new Refused();
  refused->Finish({grpc::StatusCode::INTERNAL, res_.name + ": ListAndWatch: internal error: " + why});
  return refused;
}

grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse>* DevicePluginService::open_stream() {
  spdlog::info("{}: kubelet opened ListAndWatch", res_.name);
  auto stream = std::make_shared<ListAndWatchReactor>(*this);
  {
    std::lock_guard lock(streams_mu_);
    streams_.push_back(stream);
  }
  ListAndWatchReactor* raw = stream.get();
  raw->start(std::move(stream));
  return raw;
}

grpc::Status DevicePluginService::preferred(const v1beta1::PreferredAllocationRequest& req,
                                            v1beta1::PreferredAllocationResponse* resp) {
  return guarded_call(res_.name + ": GetPreferredAllocation", resp,
                      [&] { return preferred_body(req, resp); });
}

grpc::Status DevicePluginService::preferred_body(const v1beta1::PreferredAllocationRequest& req,
                                                 v1beta1::PreferredAllocationResponse* resp) {
  std::vector<PreferredRequest> requests;
  for (const auto& cr : req.container_requests()) {
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

grpc::ServerUnaryReactor* DevicePluginService::GetPreferredAllocation(
    grpc::CallbackServerContext* ctx, const v1beta1::PreferredAllocationRequest* req,
    v1beta1::PreferredAllocationResponse* resp) {
  auto* r = ctx->DefaultReactor();
  r->Finish(preferred(*req, resp));
  return r;
}

grpc::Status DevicePluginService::allocate(const v1beta1::AllocateRequest& req,
                                           v1beta1::AllocateResponse* resp) {
  return guarded_call(res_.name + ": Allocate", resp, [&] { return allocate_body(req, resp); });
}

grpc::Status DevicePluginService::allocate_body(const v1beta1::AllocateRequest& req,
                                                v1beta1::AllocateResponse* resp) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<std::string>> requests;
  for (const auto& cr : req.container_requests())
    requests.emplace_back(cr.devices_ids().begin(), cr.devices_ids().end());
  auto r = plugin_.allocate(res_, requests);
  if (allocate_series_) allocate_series_->observe(std::chrono::steady_clock::now() - t0, r.ok());
  if (!r) {
    spdlog::warn("{}", r.error().message());
    return to_grpc_status(r.error());
  }
  for (const auto& a : *r) to_proto(a, resp->add_container_responses());
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* DevicePluginService::Allocate(grpc::CallbackServerContext* ctx,
                                                        const v1beta1::AllocateRequest* req,
                                                        v1beta1::AllocateResponse* resp) {
  auto* r = ctx->DefaultReactor();
  r->Finish(allocate(*req, resp));
  return r;
}

grpc::ServerUnaryReactor* DevicePluginService::PreStartContainer(
    grpc::CallbackServerContext* ctx, const v1beta1::PreStartContainerRequest* /*req*/,
    v1beta1::PreStartContainerResponse* /*resp*/) {
  // Options say pre_start_required = false; a kubelet that calls anyway gets a harmless no-op (guarded as
  // every handler is, should it ever do more).
  auto* r = ctx->DefaultReactor();
  r->Finish(guarded_call(res_.name + ": PreStartContainer", nullptr, [] { return grpc::Status::OK; }));
  return r;
}

}  // namespace ascend::plugin
