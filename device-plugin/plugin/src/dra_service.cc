#include "ascend/plugin/dra_service.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <optional>
#include <thread>

#include "ascend/common/fs.h"
#include "ascend/common/guarded.h"
#include "ascend/common/kube_client.h"
#include "ascend/common/unique_fd.h"
#include "ascend/npu/device_query.h"
#include "ascend/npu/vnpu_gc.h"
#include "ascend/plugin/allocate.h"
#include "ascend/plugin/grpc_status.h"
#include "ascend/plugin/inventory.h"
#include "ascend/plugin/plugin.h"
#include "dra/dra_v1.grpc.pb.h"
#include "dra/dra_v1beta1.grpc.pb.h"
#include "dra_claims.h"
#include "pluginregistration/v1/pluginregistration_v1.grpc.pb.h"

namespace ascend::plugin {

namespace {

namespace drav1 = k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = k8s::io::kubelet::pkg::apis::dra::v1beta1;

constexpr const char* kRegistrationType = "DRAPlugin";  // pluginregistration/v1 DRAPlugin
constexpr const char* kDraSocketName = "dra.sock";
constexpr const char* kCheckpointName = "checkpoint.json";
constexpr mode_t kDraSocketMode = 0600;  // root's kubelet is the only client
constexpr mode_t kDraFolderMode = 0750;
constexpr mode_t kCheckpointMode = 0600;
// 128 claims of the longest names are about 60 KiB; nothing the kubelet sends comes near this.
constexpr int kMaxMessageBytes = 1 << 20;
// gRPC's synchronous handlers each hold a thread (while the API server answers); the kubelet makes a few
// calls at a time.
constexpr int kMaxServerThreads = 16;
// What is kept of a text the kubelet sends us to log (NotifyRegistrationStatus' error).
constexpr std::size_t kMaxLoggedText = 512;

std::string join_path(const std::string& dir, const std::string& name) {
  return dir + (dir.ends_with('/') ? "" : "/") + name;
}

// A unix socket listener whose connections gRPC serves only when the peer is root or this process's user:
// the peer's credentials (SO_PEERCRED) are read when the connection is accepted, before gRPC reads a byte of
// it, and a connection from anyone else is closed. The socket is bound in a fresh 0700 folder beside its
// path, made 0600 there and renamed into place, so it is never reachable with a wider mode (endpoint.cc says
// why a chmod after the bind, or the umask, would not do). The folder's name starts with '.': the kubelet's
// plugin watcher skips such names in plugins_registry, so it meets the registration socket only once the
// rename has put it in place.
class PeerCheckedListener {
 public:
  static Result<std::unique_ptr<PeerCheckedListener>> open(const std::string& path, std::string name) {
    auto l = std::unique_ptr<PeerCheckedListener>(new PeerCheckedListener(path, std::move(name)));
    ASCEND_CHECK(l->bind(), "serve " + l->name_ + " on " + path);
    return l;
  }
  ~PeerCheckedListener() { stop(); }
  PeerCheckedListener(const PeerCheckedListener&) = delete;
  PeerCheckedListener& operator=(const PeerCheckedListener&) = delete;

  // Hands each allowed connection to `server` (which must outlive stop()), on a thread of its own.
  void serve(grpc::Server* server) {
    server_ = server;
    thread_ = std::thread([this] { accept_loop(); });
  }

  // Ends the accept loop and removes the socket file when it is still the one bound here.
  void stop() {
    if (thread_.joinable()) {
      const char byte = 0;
      if (::write(wake_w_.get(), &byte, 1) < 0)
        spdlog::warn("{}: wake the accept loop: {}", name_, std::strerror(errno));
      thread_.join();
    }
    if (!fd_.valid()) return;
    struct stat st {};
    if (::lstat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_) ::unlink(path_.c_str());
    fd_.reset();
  }

 private:
  PeerCheckedListener(std::string path, std::string name) : path_(std::move(path)), name_(std::move(name)) {}

  Status bind() {
    sockaddr_un addr{};
    if (path_.size() >= sizeof(addr.sun_path))
      return Error(ENAMETOOLONG,
                   fmt::format("a unix socket path is at most {} bytes", sizeof(addr.sun_path) - 1));
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) return Error::from_errno(errno, "pipe2");
    wake_r_.reset(pipe_fds[0]);
    wake_w_.reset(pipe_fds[1]);
    const std::string dir = path_.substr(0, path_.rfind('/') + 1);
    std::string private_dir = dir + ".ascend-XXXXXX";
    if (::mkdtemp(private_dir.data()) == nullptr)
      return Error::from_errno(errno, "create a private folder in " + dir);
    const std::string bound = private_dir + "/s";
    auto cleanup = [&] {
      ::unlink(bound.c_str());
      ::rmdir(private_dir.c_str());
    };
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) {
      cleanup();
      return Error::from_errno(errno, "socket");
    }
    addr.sun_family = AF_UNIX;
    bound.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
    auto fail = [&](const std::string& what) {
      const int err = errno;
      cleanup();
      return Error::from_errno(err, what);
    };
    if (bound.size() >= sizeof(addr.sun_path)) return fail("bind " + bound + ": path too long");
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0)
      return fail("bind " + bound);
    if (::chmod(bound.c_str(), kDraSocketMode) != 0) return fail("chmod " + bound);
    if (::listen(fd.get(), SOMAXCONN) != 0) return fail("listen on " + bound);
    if (::rename(bound.c_str(), path_.c_str()) != 0) return fail("rename " + bound + " to " + path_);
    ::rmdir(private_dir.c_str());
    struct stat st {};
    if (::lstat(path_.c_str(), &st) != 0) return Error::from_errno(errno, "stat " + path_);
    dev_ = st.st_dev;
    ino_ = st.st_ino;
    fd_ = std::move(fd);
    return {};
  }

  void accept_loop() {
    std::string failed;  // the last exception's text (guarded.h)
    for (;;) {
      pollfd fds[2] = {{fd_.get(), POLLIN, 0}, {wake_r_.get(), POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno != EINTR) pause_after(fmt::format("poll: {}", std::strerror(errno)));
        continue;
      }
      if (fds[1].revents != 0) return;
      if ((fds[0].revents & POLLIN) == 0) {
        if (fds[0].revents != 0)
          pause_after(fmt::format("the listening socket reports {:#x}", fds[0].revents));
        continue;
      }
      run_guarded(
          name_ + ": accept", [this] { accept_one(); }, "carrying on", &failed);
    }
  }

  void accept_one() {
    UniqueFd conn(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!conn.valid()) {
      // Out of descriptors or memory: wait rather than spin on a connection that stays queued.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        pause_after(fmt::format("accept: {}", std::strerror(errno)));
      return;  // EAGAIN, ECONNABORTED, EINTR: the next poll tells
    }
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (::getsockopt(conn.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      spdlog::warn("{}: closed a connection whose peer is unknown (SO_PEERCRED: {})", name_,
                   std::strerror(errno));
      return;
    }
    if (cred.uid != 0 && cred.uid != ::geteuid()) {
      spdlog::warn("{}: refused a connection from uid {} (pid {}): only root (the kubelet) may call", name_,
                   cred.uid, cred.pid);
      return;
    }
    grpc::AddInsecureChannelFromFd(server_, conn.release());
  }

  void pause_after(const std::string& why) const {
    spdlog::warn("{}: {}; accepting again in 100 ms", name_, why);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }

  const std::string path_;
  const std::string name_;
  UniqueFd fd_;
  UniqueFd wake_r_, wake_w_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  grpc::Server* server_ = nullptr;
  std::thread thread_;
};

// Renames `from` to `to` unless `to` exists (EEXIST then). renameat2's RENAME_NOREPLACE; on a file system
// without it, a hard link (which never replaces either) and the old name removed.
Status rename_no_replace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return {};
  if (errno != EINVAL && errno != ENOSYS) return Error::from_errno(errno, "rename " + from + " to " + to);
  if (::link(from.c_str(), to.c_str()) != 0) return Error::from_errno(errno, "link " + from + " to " + to);
  if (::unlink(from.c_str()) != 0) return Error::from_errno(errno, "remove " + from);
  return {};
}

// Moves an unusable checkpoint to <path>.corrupt-<unix seconds>, or, when a checkpoint set aside in the same
// second has that name, to <path>.corrupt-<unix seconds>-<n>: one set aside is never overwritten by the
// next. The name it got.
Result<std::string> set_aside(const std::string& path) {
  constexpr int kMaxTries = 1000;  // more unusable checkpoints in one second than a restart loop makes
  const std::string base = fmt::format("{}.corrupt-{}", path, std::time(nullptr));
  for (int n = 0; n < kMaxTries; ++n) {
    std::string aside = n == 0 ? base : fmt::format("{}-{}", base, n);
    auto st = rename_no_replace(path, aside);
    if (st.ok()) return aside;
    if (st.error().code() != EEXIST) return st.error();
  }
  return Error(EEXIST, fmt::format("{} to {}-{}: every name is taken", base, base, kMaxTries - 1));
}

std::vector<DraClaimRef> refs_of(const google::protobuf::RepeatedPtrField<drav1::Claim>& claims) {
  std::vector<DraClaimRef> out;
  out.reserve(claims.size());
  for (const auto& c : claims) out.push_back({c.namespace_(), c.uid(), c.name()});
  return out;
}

// One version of the DRAPlugin service (`Base`: v1's or v1beta1's, which take the same messages) over
// DraService's bodies. Synchronous handlers: a prepare waits for the API server, and gRPC's pool gives it a
// thread of its own for that.
template <typename Base>
class DraPluginService final : public Base {
 public:
  DraPluginService(DraService& svc, const char* version) : svc_(svc), version_(version) {}

  grpc::Status NodePrepareResources(grpc::ServerContext* /*ctx*/,
                                    const drav1::NodePrepareResourcesRequest* req,
                                    drav1::NodePrepareResourcesResponse* resp) override {
    return guarded_call(fmt::format("DRA {} NodePrepareResources", version_), resp, [&] {
      auto answers = svc_.prepare(refs_of(req->claims()));
      if (!answers.ok()) return to_grpc_status(answers.error().context("NodePrepareResources"));
      for (const auto& [uid, a] : *answers) {
        auto& out = (*resp->mutable_claims())[uid];
        out.set_error(a.error);
        for (const auto& d : a.devices) {
          auto* pd = out.add_devices();
          for (const auto& r : d.request_names) pd->add_request_names(r);
          pd->set_pool_name(d.pool_name);
          pd->set_device_name(d.device_name);
          for (const auto& id : d.cdi_device_ids) pd->add_cdi_device_ids(id);
        }
      }
      return grpc::Status::OK;
    });
  }

  grpc::Status NodeUnprepareResources(grpc::ServerContext* /*ctx*/,
                                      const drav1::NodeUnprepareResourcesRequest* req,
                                      drav1::NodeUnprepareResourcesResponse* resp) override {
    return guarded_call(fmt::format("DRA {} NodeUnprepareResources", version_), resp, [&] {
      auto answers = svc_.unprepare(refs_of(req->claims()));
      if (!answers.ok()) return to_grpc_status(answers.error().context("NodeUnprepareResources"));
      for (const auto& [uid, error] : *answers) (*resp->mutable_claims())[uid].set_error(error);
      return grpc::Status::OK;
    });
  }

 private:
  DraService& svc_;
  const char* version_;
};

class RegistrationService final : public pluginregistration::Registration::Service {
 public:
  explicit RegistrationService(DraService& svc) : svc_(svc) {}

  grpc::Status GetInfo(grpc::ServerContext* /*ctx*/, const pluginregistration::InfoRequest* /*req*/,
                       pluginregistration::PluginInfo* resp) override {
    return guarded_call("DRA registration GetInfo", resp, [&] {
      resp->set_type(kRegistrationType);
      resp->set_name(dra::kDriver);
      resp->set_endpoint(svc_.dra_socket());
      resp->add_supported_versions(kDraServiceV1);
      resp->add_supported_versions(kDraServiceV1beta1);
      return grpc::Status::OK;
    });
  }

  grpc::Status NotifyRegistrationStatus(grpc::ServerContext* /*ctx*/,
                                        const pluginregistration::RegistrationStatus* req,
                                        pluginregistration::RegistrationStatusResponse* resp) override {
    return guarded_call("DRA registration NotifyRegistrationStatus", resp, [&] {
      svc_.note_registration(req->plugin_registered(), req->error());
      return grpc::Status::OK;
    });
  }

 private:
  DraService& svc_;
};

std::unique_ptr<grpc::Server> build_server(const std::vector<grpc::Service*>& services) {
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  grpc::ResourceQuota quota("ascend-dra");
  quota.SetMaxThreads(kMaxServerThreads);
  builder.SetResourceQuota(quota);
  for (auto* s : services) builder.RegisterService(s);
  return builder.BuildAndStart();  // no listening port: PeerCheckedListener hands it the connections
}

std::string device_summary(const std::vector<DraDevice>& devices) {
  std::vector<std::string> parts;
  parts.reserve(devices.size());
  for (const auto& d : devices) {
    parts.push_back(fmt::format("{} ({}) -> {}", d.device_name, fmt::join(d.request_names, ","),
                                fmt::join(d.cdi_device_ids, ",")));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

// The two servers, and their listeners; stopped registration first.
struct DraService::Servers {
  explicit Servers(DraService& svc) : v1(svc, "v1"), v1beta1(svc, "v1beta1"), registration(svc) {}
  ~Servers() {
    stop_one(reg_listener, reg_server);
    stop_one(dra_listener, dra_server);
  }
  Servers(const Servers&) = delete;
  Servers& operator=(const Servers&) = delete;

  static void stop_one(std::unique_ptr<PeerCheckedListener>& l, std::unique_ptr<grpc::Server>& s) {
    if (l) l->stop();  // no connection is handed to the server after this
    if (s) {
      s->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
      s->Wait();
    }
    l.reset();
    s.reset();
  }

  // Serves `services` on `path`.
  static Status serve(const std::string& path, const std::string& name,
                      const std::vector<grpc::Service*>& services, std::unique_ptr<PeerCheckedListener>& l,
                      std::unique_ptr<grpc::Server>& s) {
    ASCEND_ASSIGN(l, PeerCheckedListener::open(path, name), "DRA");
    s = build_server(services);
    if (!s) {
      l.reset();
      return Error(EADDRNOTAVAIL,
                   "DRA: start the gRPC server of " + name + " (see the log for gRPC's reason)");
    }
    l->serve(s.get());
    return {};
  }

  DraPluginService<drav1::DRAPlugin::Service> v1;
  DraPluginService<drav1beta1::DRAPlugin::Service> v1beta1;
  RegistrationService registration;
  std::unique_ptr<grpc::Server> dra_server, reg_server;
  std::unique_ptr<PeerCheckedListener> dra_listener, reg_listener;
};

DraNodeChips dra_usable_chips(const Plugin& plugin) {
  return [&plugin]() -> Result<std::vector<int>> {
    if (auto why = plugin.driver_lost(); !why.empty())
      return Error(EAGAIN, "the NPU driver is unavailable: " + why);
    const npu::DeviceSnapshot host = plugin.host();
    std::vector<int> out;
    for (const auto& c : host.chips) {
      if (is_healthy(c.health()) && !host.holds_vnpus(c.phy_id)) out.push_back(c.phy_id);
    }
    return out;
  };
}

DraNodeChips dra_healthy_chips(const Plugin& plugin) {
  return [&plugin]() -> Result<std::vector<int>> {
    if (auto why = plugin.driver_lost(); !why.empty())
      return Error(EAGAIN, "the NPU driver is unavailable: " + why);
    std::vector<int> out;
    for (const auto& c : plugin.host().chips) {
      if (is_healthy(c.health())) out.push_back(c.phy_id);
    }
    return out;
  };
}

std::string dra_vnpu_owner(const std::string& claim_uid, const std::string& device) {
  return std::string(npu::kDraClaimOwnerPrefix) + claim_uid + "/" + device;
}

namespace {

bool has_vnpus(const std::vector<DraDevice>& devices) {
  return std::any_of(devices.begin(), devices.end(),
                     [](const DraDevice& d) { return dra::is_vnpu_device_name(d.device_name); });
}

// A claim uid that may name a file and a CDI device (a UUID is): letters, digits and '-'.
Status check_cdi_uid(const std::string& uid) {
  const bool ok = !uid.empty() && std::all_of(uid.begin(), uid.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
  });
  if (!ok) return Error::invalid("a claim uid of letters, digits and '-' only can have vNPUs (its CDI spec)");
  return {};
}

std::string cdi_device_of(const std::string& uid, const DraDevice& d) {
  return uid + "-" + d.device_name;
}

// The CDI spec of a claim's vNPUs: per vNPU its node (/dev/vdavinci<id> on the host, /dev/davinci<id> in the
// container), and the control nodes and driver files every NPU container gets, as Allocate's device-spec
// mode plans them (allocate.h).
nlohmann::json claim_cdi_spec(const npu::DeviceSnapshot& host, const npu::DeviceQuery& q,
                              const std::string& uid, const std::vector<DraDevice>& devices) {
  nlohmann::json out = nlohmann::json::array();
  nlohmann::json shared = nlohmann::json::object();
  for (const auto& d : devices) {
    if (d.vnpu_id < 0) continue;
    DeviceEntry e;
    e.kind = DeviceKind::kVnpu;
    e.vnpu_id = d.vnpu_id;
    const ContainerAllocation a = plan_container(host, q, AllocateMode::kDeviceSpec, {e});
    auto node = [](const DeviceNodeSpec& n) {
      return nlohmann::json{{"path", n.container_path},
                            {"hostPath", n.host_path},
                            {"type", "c"},
                            {"permissions", n.permissions}};
    };
    out.push_back({{"name", cdi_device_of(uid, d)},
                   {"containerEdits", {{"deviceNodes", nlohmann::json::array({node(a.devices.front())})}}}});
    nlohmann::json control = nlohmann::json::array();
    for (std::size_t i = 1; i < a.devices.size(); ++i) control.push_back(node(a.devices[i]));
    nlohmann::json mounts = nlohmann::json::array();
    for (const auto& m : a.mounts) {
      mounts.push_back({{"hostPath", m.host_path},
                        {"containerPath", m.container_path},
                        {"options", {"ro", "nosuid", "nodev", "bind"}}});
    }
    shared = {{"deviceNodes", std::move(control)}};
    if (!mounts.empty()) shared["mounts"] = std::move(mounts);
  }
  return {{"cdiVersion", "0.5.0"},
          {"kind", kDraClaimCdiKind},
          {"devices", std::move(out)},
          {"containerEdits", shared}};
}

}  // namespace

DraService::DraService(DraOptions opts, kube::Client& api, DraNodeChips chips, DraVnpus vnpus)
    : opts_(std::move(opts)), api_(api), chips_(std::move(chips)), vnpus_(std::move(vnpus)) {}

DraService::~DraService() {
  stop();
}

std::string DraService::registration_socket() const {
  return join_path(opts_.registry_dir, std::string(dra::kDriver) + "-reg.sock");
}

std::string DraService::dra_socket() const {
  return join_path(opts_.plugin_dir, kDraSocketName);
}

std::string DraService::checkpoint_path() const {
  return join_path(opts_.plugin_dir, kCheckpointName);
}

std::string DraService::cdi_spec_path(const std::string& claim_uid) const {
  return join_path(vnpus_.cdi_dir, std::string(dra::kDriver) + "-claim_" + claim_uid + ".json");
}

bool DraService::serving() const {
  return servers_ != nullptr;
}

bool DraService::registered() const {
  std::lock_guard lock(mu_);
  return registered_;
}

Status DraService::start() {
  if (servers_) return {};
  if (opts_.node_name.empty()) return Error::invalid("DRA: no node name (the pool this node's chips are in)");
  ASCEND_CHECK(make_dirs(opts_.plugin_dir, kDraFolderMode), "DRA: create " + opts_.plugin_dir);
  ASCEND_CHECK(make_dirs(opts_.registry_dir, kDraFolderMode), "DRA: create " + opts_.registry_dir);
  ASCEND_CHECK(load_checkpoint(), "DRA");
  auto s = std::make_unique<Servers>(*this);
  // The DRA server first: the kubelet calls it as soon as it has read GetInfo.
  ASCEND_CHECK(
      Servers::serve(dra_socket(), "DRA plugin", {&s->v1, &s->v1beta1}, s->dra_listener, s->dra_server), "");
  ASCEND_CHECK(Servers::serve(registration_socket(), "DRA registration", {&s->registration}, s->reg_listener,
                              s->reg_server),
               "");
  servers_ = std::move(s);
  std::size_t prepared = 0;
  {
    std::lock_guard lock(mu_);
    prepared = prepared_.size();
  }
  spdlog::info("DRA driver {}: serving {} (registration {}); {} claims prepared before", dra::kDriver,
               dra_socket(), registration_socket(), prepared);
  return {};
}

void DraService::stop() {
  if (!servers_) return;
  servers_.reset();
  {
    std::lock_guard lock(mu_);
    registered_ = false;
  }
  spdlog::info("DRA driver {}: stopped serving", dra::kDriver);
}

void DraService::note_registration(bool registered, const std::string& error) {
  {
    std::lock_guard lock(mu_);
    registered_ = registered;
  }
  if (registered) {
    spdlog::info("DRA driver {}: the kubelet registered it", dra::kDriver);
  } else {
    spdlog::warn("DRA driver {}: the kubelet did not register it: {}", dra::kDriver,
                 error.substr(0, kMaxLoggedText));
  }
}

Status DraService::load_checkpoint() {
  const std::string path = checkpoint_path();
  auto text = read_file(path, dra_kubelet::kMaxCheckpointBytes);
  if (!text.ok() && text.error().code() == ENOENT) return {};
  std::optional<Error> bad;
  if (!text.ok()) {
    if (text.error().code() != EFBIG) return text.error().context("read the checkpoint");
    bad = text.error();
  } else {
    auto claims = dra_kubelet::decode_checkpoint(*text);
    if (claims.ok()) {
      std::lock_guard lock(mu_);
      prepared_ = std::move(*claims);
      return {};
    }
    bad = claims.error();
  }
  // The claims it held are prepared again from the API server when the kubelet asks (preparing changes
  // nothing on the node), so a file that cannot be read is no reason not to serve; kept for a person to read.
  auto aside = set_aside(path);
  if (!aside.ok()) {
    spdlog::warn(
        "DRA: the checkpoint {} is unusable ({}) and could not be moved aside ({}); starting with no "
        "prepared claims",
        path, bad->message(), aside.error().message());
  } else {
    spdlog::warn("DRA: the checkpoint {} is unusable ({}); moved to {}, starting with no prepared claims",
                 path, bad->message(), *aside);
  }
  return {};
}

Status DraService::write_checkpoint_locked() const {
  return atomic_replace(checkpoint_path(), dra_kubelet::encode_checkpoint(prepared_), kCheckpointMode);
}

Result<std::vector<DraDevice>> DraService::read_claim(const DraClaimRef& ref, const std::vector<int>& chips,
                                                      const dra_kubelet::VnpuRules* vnpus) {
  ASCEND_ASSIGN(const auto claim,
                api_.get(kube::path_of(dra::kApiVersion, "resourceclaims", ref.ns, ref.name)),
                "read ResourceClaim " + ref.ns + "/" + ref.name);
  return dra_kubelet::devices_of_claim(claim, ref, opts_.node_name, chips, vnpus);
}

Result<std::vector<DraDevice>> DraService::prepare_vnpus(const DraClaimRef& ref,
                                                         std::vector<DraDevice> devices) {
  std::lock_guard vlock(vnpu_mu_);
  {
    std::lock_guard lock(mu_);
    if (auto it = prepared_.find(ref.uid); it != prepared_.end())
      return it->second.devices;  // a concurrent call
    if (prepared_.size() >= kDraMaxPreparedClaims)
      return Error(ENOSPC, fmt::format("this node has {} claims prepared already, the most it keeps",
                                       prepared_.size()));
  }
  ASCEND_CHECK(check_cdi_uid(ref.uid), "");
  npu::DeviceQuery& q = *vnpus_.query;
  ASCEND_ASSIGN(npu::DeviceSnapshot host, q.snapshot(), "read the NPU host");
  std::vector<std::pair<int, std::string>> ours;  // vNPU id, owner tag: undone when a later step fails
  const auto undo = [&] {
    for (const auto& [id, tag] : ours) {
      npu::VnpuOwner holder;
      holder.container_id = tag;
      if (auto st = q.destroy_vnpu(id, std::nullopt, holder); !st.ok())
        spdlog::warn("DRA: claim {}: undo vNPU {}: {}", ref.uid, id, st.error().message());
    }
    ::unlink(cdi_spec_path(ref.uid).c_str());
  };
  for (auto& d : devices) {
    if (!dra::is_vnpu_device_name(d.device_name)) continue;
    auto v = dra::vnpu_of_device(host, d.device_name);
    if (!v.ok()) {
      undo();
      return v.error();
    }
    npu::VnpuOwner owner;
    owner.container_id = dra_vnpu_owner(ref.uid, d.device_name);
    const auto found = std::find_if(host.vnpus.begin(), host.vnpus.end(), [&](const npu::Vnpu& x) {
      return x.owner.container_id == owner.container_id;
    });
    if (found != host.vnpus.end()) {  // made before a crash took the plugin down ahead of the checkpoint
      d.vnpu_id = found->id;
      spdlog::info("DRA: claim {}: took over vNPU {} ({} on chip {}) made for it before", ref.uid, found->id,
                   found->template_name, found->phy_id);
    } else {
      auto made = q.create_vnpu(v->phy, v->template_name, std::nullopt, owner);
      if (!made.ok()) {
        undo();
        return made.error().context(
            fmt::format("device {}: create a {} vNPU on chip {}", d.device_name, v->template_name, v->phy));
      }
      d.vnpu_id = made->id;
    }
    ours.emplace_back(d.vnpu_id, owner.container_id);
    d.cdi_device_ids = {std::string(kDraClaimCdiKind) + "=" + cdi_device_of(ref.uid, d)};
  }
  auto written = [&]() -> Status {
    ASCEND_ASSIGN(host, q.snapshot(), "read the NPU host");
    const auto spec = claim_cdi_spec(host, q, ref.uid, devices);
    ASCEND_CHECK(make_dirs(vnpus_.cdi_dir, 0755), "create " + vnpus_.cdi_dir);
    return atomic_replace(cdi_spec_path(ref.uid), spec.dump(2) + "\n", 0644);
  }();
  if (!written.ok()) {
    undo();
    return written.error().context("write the claim's CDI spec " + cdi_spec_path(ref.uid));
  }
  {
    std::lock_guard lock(mu_);
    prepared_.emplace(ref.uid, DraPreparedClaim{ref.ns, ref.name, devices});
    if (auto st = write_checkpoint_locked(); !st.ok()) {
      prepared_.erase(ref.uid);
      undo();
      return st.error().context("record the claim in the checkpoint");
    }
  }
  spdlog::info("DRA: prepared claim {}/{} ({}): {}", ref.ns, ref.name, ref.uid, device_summary(devices));
  return devices;
}

Status DraService::check_vnpus(const std::string& uid, const DraPreparedClaim& c) const {
  if (!has_vnpus(c.devices)) return {};
  if (vnpus_.query == nullptr)
    return Error::invalid("the claim has vNPUs, and this plugin does not publish vNPUs now (--dra-vnpu)");
  ASCEND_ASSIGN(const npu::DeviceSnapshot host, vnpus_.query->snapshot(), "read the NPU host");
  for (const auto& d : c.devices) {
    if (d.vnpu_id < 0) continue;
    const npu::Vnpu* v = host.vnpu(d.vnpu_id);
    if (v == nullptr || v->owner.container_id != dra_vnpu_owner(uid, d.device_name))
      return Error(ENODEV,
                   fmt::format("device {}: its vNPU {} no longer exists (destroyed outside the plugin, "
                               "or the host restarted); the claim cannot be prepared again: delete its "
                               "pod so that it is unprepared and allocated anew",
                               d.device_name, d.vnpu_id));
  }
  return {};
}

Status DraService::release_orphans(const std::string& uid, const npu::DeviceSnapshot& host) {
  const std::string prefix = dra_vnpu_owner(uid, "");
  bool any = false;
  for (const auto& v : host.vnpus) {
    if (!v.owner.container_id.starts_with(prefix)) continue;
    any = true;
    npu::VnpuOwner holder;
    holder.container_id = v.owner.container_id;
    auto st = vnpus_.query->destroy_vnpu(v.id, v.phy_id, holder);
    if (!st.ok() && st.error().code() != ENOENT && st.error().code() != ESTALE)
      return st.error().context("vNPU " + std::to_string(v.id));
    spdlog::info("DRA: claim {} was not prepared: destroyed vNPU {} ({} on chip {}) made for it before", uid,
                 v.id, v.template_name, v.phy_id);
  }
  if (any && ::unlink(cdi_spec_path(uid).c_str()) != 0 && errno != ENOENT)
    return Error::from_errno(errno, "remove " + cdi_spec_path(uid));
  return {};
}

Status DraService::release_vnpus(const std::string& uid, const DraPreparedClaim& c) {
  if (!has_vnpus(c.devices)) return {};
  if (vnpus_.query == nullptr)
    return Error::invalid("the claim has vNPUs, and this plugin does not publish vNPUs now (--dra-vnpu)");
  for (const auto& d : c.devices) {
    if (d.vnpu_id < 0) continue;
    npu::VnpuOwner holder;
    holder.container_id = dra_vnpu_owner(uid, d.device_name);
    auto st = vnpus_.query->destroy_vnpu(d.vnpu_id, std::nullopt, holder);
    if (!st.ok() && st.error().code() != ENOENT && st.error().code() != ESTALE)
      return st.error().context("device " + d.device_name);
    if (!st.ok()) {
      spdlog::info("DRA: claim {}: vNPU {} of device {} was gone already ({})", uid, d.vnpu_id, d.device_name,
                   st.error().message());
    }
  }
  if (::unlink(cdi_spec_path(uid).c_str()) != 0 && errno != ENOENT)
    return Error::from_errno(errno, "remove " + cdi_spec_path(uid));
  return {};
}

namespace {

Status check_call(const std::vector<DraClaimRef>& claims) {
  if (claims.size() > kDraMaxClaimsPerCall)
    return Error::invalid(
        fmt::format("{} claims in one call; at most {}", claims.size(), kDraMaxClaimsPerCall));
  for (const auto& c : claims) ASCEND_CHECK(dra_kubelet::check_uid(c.uid), "claim " + c.ns + "/" + c.name);
  return {};
}

}  // namespace

Result<std::map<std::string, DraPrepared>> DraService::prepare(const std::vector<DraClaimRef>& claims) {
  ASCEND_CHECK(check_call(claims), "");
  std::map<std::string, DraPrepared> out;
  std::map<std::string, DraPreparedClaim> fresh;  // read from the API server in this call
  std::optional<Result<std::vector<int>>> chips;  // asked once, when a claim needs it
  // --dra-vnpu: the host and the healthy chips, read once, when a claim needs them.
  std::optional<npu::DeviceSnapshot> vnpu_host;
  std::optional<Result<dra_kubelet::VnpuRules>> rules;
  const auto vnpu_rules = [&]() -> Result<dra_kubelet::VnpuRules> {
    if (!vnpus_.healthy) return Error::invalid("DRA: vNPUs without the plugin's healthy chips (DraVnpus)");
    ASCEND_ASSIGN(vnpu_host, vnpus_.query->snapshot(), "read the NPU host");
    ASCEND_ASSIGN(auto healthy, vnpus_.healthy(), "");
    return dra_kubelet::VnpuRules{&*vnpu_host, std::move(healthy)};
  };
  for (const auto& ref : claims) {
    if (out.contains(ref.uid) || fresh.contains(ref.uid)) continue;  // named twice in one call
    if (auto st = dra_kubelet::check_names(ref); !st.ok()) {
      out[ref.uid].error = st.error().message();
      continue;
    }
    std::optional<DraPreparedClaim> before;
    {
      std::lock_guard lock(mu_);
      if (auto it = prepared_.find(ref.uid); it != prepared_.end()) before = it->second;
    }
    if (before) {  // prepared before: the same answer, nothing done again (while its vNPUs are there)
      if (auto st = check_vnpus(ref.uid, *before); !st.ok()) {
        out[ref.uid].error = fmt::format("claim {}/{}: {}", ref.ns, ref.name, st.error().message());
      } else {
        out[ref.uid].devices = before->devices;
      }
      continue;
    }
    if (!chips) chips = chips_();
    if (!chips->ok()) {
      out[ref.uid].error = chips->error().message();
      continue;
    }
    const dra_kubelet::VnpuRules* with_vnpus = nullptr;
    if (vnpus_.query != nullptr) {
      if (!rules) rules = vnpu_rules();
      if (!rules->ok()) {
        out[ref.uid].error = rules->error().message();
        continue;
      }
      with_vnpus = &rules->value();
    }
    auto devices = read_claim(ref, chips->value(), with_vnpus);
    if (!devices.ok()) {
      out[ref.uid].error = devices.error().message();
      continue;
    }
    if (has_vnpus(*devices)) {  // made, written and checkpointed now, one claim at a time
      auto made = prepare_vnpus(ref, std::move(*devices));
      if (!made.ok()) {
        out[ref.uid].error = made.error().context("claim " + ref.ns + "/" + ref.name).message();
      } else {
        out[ref.uid].devices = std::move(*made);
      }
      continue;
    }
    fresh[ref.uid] = {ref.ns, ref.name, std::move(*devices)};
  }

  std::vector<std::string> added;
  {
    std::lock_guard lock(mu_);
    for (auto& [uid, c] : fresh) {
      if (auto it = prepared_.find(uid); it != prepared_.end()) {  // a concurrent call prepared it
        out[uid].devices = it->second.devices;
      } else if (prepared_.size() >= kDraMaxPreparedClaims) {
        out[uid].error =
            fmt::format("this node has {} claims prepared already, the most it keeps", prepared_.size());
      } else {
        prepared_.emplace(uid, c);
        added.push_back(uid);
      }
    }
    if (!added.empty()) {
      if (auto st = write_checkpoint_locked(); !st.ok()) {
        for (const auto& uid : added) {
          prepared_.erase(uid);
          out[uid].error = "record the claim in the checkpoint: " + st.error().message();
        }
        added.clear();
      }
    }
  }
  for (const auto& uid : added) {
    const auto& c = fresh[uid];
    out[uid].devices = c.devices;
    spdlog::info("DRA: prepared claim {}/{} ({}): {}", c.ns, c.name, uid, device_summary(c.devices));
  }
  for (const auto& [uid, a] : out) {
    if (!a.error.empty()) spdlog::warn("DRA: did not prepare claim {}: {}", uid, a.error);
  }
  return out;
}

Result<std::map<std::string, std::string>> DraService::unprepare(const std::vector<DraClaimRef>& claims) {
  ASCEND_CHECK(check_call(claims), "");
  std::map<std::string, std::string> out;
  std::map<std::string, DraPreparedClaim> removed;
  // A claim's vNPUs go first (and its CDI spec), the claim is forgotten after: a crash in between leaves it
  // for the unprepare the kubelet repeats, which finds the vNPUs gone.
  std::lock_guard vlock(vnpu_mu_);
  std::optional<npu::DeviceSnapshot> host;  // read once, when a claim not prepared may have left vNPUs
  for (const auto& ref : claims) {
    std::optional<DraPreparedClaim> c;
    {
      std::lock_guard lock(mu_);
      if (auto it = prepared_.find(ref.uid); it != prepared_.end()) c = it->second;
    }
    if (!c && vnpus_.query != nullptr) {  // a crash between making its vNPUs and the checkpoint
      if (!host) {
        auto s = vnpus_.query->snapshot();
        if (!s.ok()) {  // cannot tell whether it left vNPUs: not a success, the kubelet asks again
          out[ref.uid] = "read the NPU host for the claim's vNPUs: " + s.error().message();
          spdlog::warn("DRA: did not unprepare claim {}: {}", ref.uid, out[ref.uid]);
          continue;
        }
        host = std::move(*s);
      }
      if (auto st = release_orphans(ref.uid, *host); !st.ok()) {
        out[ref.uid] = "destroy the claim's vNPUs: " + st.error().message();
        spdlog::warn("DRA: did not unprepare claim {}: {}", ref.uid, out[ref.uid]);
      }
      continue;
    }
    if (!c || !has_vnpus(c->devices)) continue;
    if (auto st = release_vnpus(ref.uid, *c); !st.ok()) {
      out[ref.uid] = "destroy the claim's vNPUs: " + st.error().message();
      spdlog::warn("DRA: did not unprepare claim {}: {}", ref.uid, out[ref.uid]);
    }
  }
  {
    std::lock_guard lock(mu_);
    for (const auto& ref : claims) {
      if (!out[ref.uid].empty()) continue;  // every claim asked has an answer, also one never prepared
      if (auto it = prepared_.find(ref.uid); it != prepared_.end()) {
        removed.insert(prepared_.extract(it));
      }
    }
    if (!removed.empty()) {
      if (auto st = write_checkpoint_locked(); !st.ok()) {
        for (auto& [uid, c] : removed) {
          out[uid] = "remove the claim from the checkpoint: " + st.error().message();
          prepared_.emplace(uid, std::move(c));
        }
        for (const auto& [uid, why] : out) {
          if (!why.empty()) spdlog::warn("DRA: did not unprepare claim {}: {}", uid, why);
        }
        return out;
      }
    }
  }
  for (const auto& ref : claims) {
    if (auto it = removed.find(ref.uid); it != removed.end()) {
      spdlog::info("DRA: unprepared claim {}/{} ({}): {}", it->second.ns, it->second.name, ref.uid,
                   device_summary(it->second.devices));
      removed.erase(it);
    }
  }
  return out;
}

}  // namespace ascend::plugin
