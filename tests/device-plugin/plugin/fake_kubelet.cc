#include "fake_kubelet.h"

#include <unistd.h>

#include <filesystem>

#include "podresources/v1/podresources.grpc.pb.h"

namespace ascend::testing {

// ---- Watch ----------------------------------------------------------------------------------------------

Watch::Watch(v1beta1::DevicePlugin::Stub& stub) {
  reader_ = std::thread([this, &stub] {
    v1beta1::Empty req;
    auto reader = stub.ListAndWatch(&ctx_, req);
    v1beta1::ListAndWatchResponse resp;
    while (reader->Read(&resp)) {
      std::lock_guard lock(mu_);
      got_.push_back(resp);
      cv_.notify_all();
    }
    reader->Finish();
    std::lock_guard lock(mu_);
    ended_ = true;
    cv_.notify_all();
  });
}

Watch::~Watch() {
  cancel();
  reader_.join();
}

void Watch::cancel() {
  ctx_.TryCancel();
}

bool Watch::wait_for(const std::function<bool(const v1beta1::ListAndWatchResponse&)>& pred,
                     std::chrono::milliseconds timeout, v1beta1::ListAndWatchResponse* out) {
  std::unique_lock lock(mu_);
  std::size_t& checked = cursor_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    for (; checked < got_.size(); ++checked) {
      if (pred(got_[checked])) {
        if (out != nullptr) *out = got_[checked];
        ++checked;
        return true;
      }
    }
    if (ended_) return false;
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && checked == got_.size()) return false;
  }
}

std::vector<v1beta1::ListAndWatchResponse> Watch::received() const {
  std::lock_guard lock(mu_);
  return got_;
}

bool Watch::ended() const {
  std::lock_guard lock(mu_);
  return ended_;
}

// ---- services -------------------------------------------------------------------------------------------

class FakeKubelet::RegistrationService final : public v1beta1::Registration::Service {
 public:
  explicit RegistrationService(FakeKubelet& k) : k_(k) {}

  grpc::Status Register(grpc::ServerContext* /*ctx*/, const v1beta1::RegisterRequest* req,
                        v1beta1::Empty* /*resp*/) override {
    if (req->version() != "v1beta1") {
      return {grpc::StatusCode::INVALID_ARGUMENT, "unsupported version " + req->version()};
    }
    // As the real kubelet: dial the plugin's socket and ask for its options before answering.
    Registration r;
    r.request = *req;
    auto stub = k_.plugin(req->endpoint());
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1beta1::Empty empty;
    r.options_ok = stub->GetDevicePluginOptions(&ctx, empty, &r.options).ok();
    r.at = std::chrono::steady_clock::now();
    k_.record(std::move(r));
    return grpc::Status::OK;
  }

 private:
  FakeKubelet& k_;
};

class FakeKubelet::PodResourcesService final : public v1::PodResourcesLister::Service {
 public:
  explicit PodResourcesService(FakeKubelet& k) : k_(k) {}
  grpc::Status List(grpc::ServerContext* /*ctx*/, const v1::ListPodResourcesRequest* /*req*/,
                    v1::ListPodResourcesResponse* resp) override {
    std::lock_guard lock(k_.mu_);
    ++k_.pod_resources_lists_;
    if (k_.pods_) {
      for (const auto& p : *k_.pods_) {
        auto* pod = resp->add_pod_resources();
        pod->set_name(p.pod);
        pod->set_namespace_(p.pod_namespace);
        auto* c = pod->add_containers();
        c->set_name(p.container);
        auto* d = c->add_devices();
        d->set_resource_name(p.resource);
        for (const auto& id : p.ids) d->add_device_ids(id);
      }
      return grpc::Status::OK;
    }
    auto* pod = resp->add_pod_resources();
    pod->set_name("pod");
    pod->set_namespace_("default");
    auto* c = pod->add_containers();
    c->set_name("main");
    for (const auto& [res, ids] : k_.in_use_) {
      auto* d = c->add_devices();
      d->set_resource_name(res);
      for (const auto& id : ids) d->add_device_ids(id);
    }
    return grpc::Status::OK;
  }

 private:
  FakeKubelet& k_;
};

// ---- FakeKubelet ----------------------------------------------------------------------------------------

FakeKubelet::FakeKubelet(std::string dir, std::string pod_resources_socket)
    : dir_(std::move(dir)), pod_resources_socket_(std::move(pod_resources_socket)) {
  std::filesystem::create_directories(dir_);
}

FakeKubelet::~FakeKubelet() {
  stop(false);
}

void FakeKubelet::start() {
  if (server_) return;
  reg_service_ = std::make_unique<RegistrationService>(*this);
  grpc::ServerBuilder b;
  b.AddListeningPort("unix://" + dir_ + "/kubelet.sock", grpc::InsecureServerCredentials());
  b.RegisterService(reg_service_.get());
  server_ = b.BuildAndStart();
  if (!pod_resources_socket_.empty()) {
    pr_service_ = std::make_unique<PodResourcesService>(*this);
    grpc::ServerBuilder pb;
    pb.AddListeningPort("unix://" + pod_resources_socket_, grpc::InsecureServerCredentials());
    pb.RegisterService(pr_service_.get());
    pr_server_ = pb.BuildAndStart();
  }
}

void FakeKubelet::stop(bool delete_sockets) {
  std::vector<std::shared_ptr<Watch>> open;
  {
    std::lock_guard lock(mu_);
    for (auto& w : watches_) {
      if (auto p = w.lock()) open.push_back(p);
    }
    watches_.clear();
  }
  for (auto& w : open) w->cancel();
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
    server_.reset();
  }
  if (pr_server_) {
    pr_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    pr_server_->Wait();
    pr_server_.reset();
  }
  if (delete_sockets) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
      if (e.is_socket(ec)) std::filesystem::remove(e.path(), ec);
    }
  }
}

void FakeKubelet::record(Registration r) {
  std::lock_guard lock(mu_);
  regs_.push_back(std::move(r));
  cv_.notify_all();
}

int FakeKubelet::registration_count() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(regs_.size());
}

std::vector<Registration> FakeKubelet::registrations() const {
  std::lock_guard lock(mu_);
  return regs_;
}

bool FakeKubelet::wait_registrations(int n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return static_cast<int>(regs_.size()) >= n; });
}

std::unique_ptr<v1beta1::DevicePlugin::Stub> FakeKubelet::plugin(const std::string& endpoint) const {
  return v1beta1::DevicePlugin::NewStub(
      grpc::CreateChannel("unix://" + dir_ + "/" + endpoint, grpc::InsecureChannelCredentials()));
}

std::shared_ptr<Watch> FakeKubelet::watch(const std::string& endpoint) {
  // The stub must outlive the stream: keep it alive with the watch.
  struct Owned {
    std::unique_ptr<v1beta1::DevicePlugin::Stub> stub;
    std::shared_ptr<Watch> watch;
  };
  auto owned = std::make_shared<Owned>();
  owned->stub = plugin(endpoint);
  owned->watch = std::make_shared<Watch>(*owned->stub);
  std::shared_ptr<Watch> w(owned, owned->watch.get());
  std::lock_guard lock(mu_);
  watches_.push_back(w);
  return w;
}

void FakeKubelet::set_in_use(std::map<std::string, std::set<std::string>> in_use) {
  std::lock_guard lock(mu_);
  in_use_ = std::move(in_use);
}

void FakeKubelet::set_pods(std::vector<PodContainer> pods) {
  std::lock_guard lock(mu_);
  pods_ = std::move(pods);
}

int FakeKubelet::pod_resources_lists() const {
  std::lock_guard lock(mu_);
  return pod_resources_lists_;
}

}  // namespace ascend::testing
