// The DRA driver's kubelet side (issue 30) against the device plugin's Allocate for the same chips, as the
// kubelet calls each: a grpc++ client on one channel per unix socket, one call at a time. In this process,
// on an emulated Atlas 800T A2 host (node worker-1) in a temporary folder, logging at info to a file as
// installed:
//   - the API server stand-in (tests/support/fake_apiserver.h) holding N ResourceClaims (200 by default),
//     claim i allocated to chip i % 8 (even i) or to chips i % 8 and (i + 1) % 8 (odd i), its
//     status.allocation.devices.results as kube-scheduler writes them (request, driver, pool, device);
//   - the device plugin's daemon (plugin::Daemon, runtime mode, no kubelet, no API server) serving its
//     Allocate on <tmp>/dp/ascend-Ascend910.sock;
//   - a DraService over the stand-in (kube::Client) whose usable chips are that plugin's
//     (dra_usable_chips, as ascend-device-plugin --dra wires them), serving dra.sock in <tmp>/plugins.
//
// For each claim, in an order shuffled per claim (so that load from the machine falls on every row alike):
//   NodePrepareResources   the claim, never prepared before: the service reads it from the stand-in, checks
//                          its results against the node, writes its checkpoint (fsynced) and answers the
//                          chips' CDI devices (checked here);
//   NodeUnprepareResources the same claim: the checkpoint written again without it;
//   Allocate               the device plugin's, for the claim's chips (Ascend910-<phy>), one container;
//   floor: empty gRPC      an empty unary method (GetDevicePluginOptions) of a minimal grpc++ callback
//                          server on its own unix socket in this process: the round trip gRPC allows;
//   floor: GET             the same claim's GET from the stand-in alone, through the same kube::Client;
//   floor: checkpoint      atomic_replace (synced) of a file as large as the checkpoint, in the plugin's
//                          folder: what a write of the checkpoint costs on this disk.
// Each row prints p50/p99/max (ms) over the N claims and its ratio to its floor measured in the same run:
// NodePrepareResources to empty gRPC + GET (per claim: the sum of that claim's two) and to empty gRPC + GET
// + checkpoint; NodeUnprepareResources to empty gRPC + checkpoint; Allocate to empty gRPC.
//
// Then the vNPU phase (--dra-vnpu): the device plugin above and its DraService are stopped (one plugin
// watches the host, as on a node) and the device plugin is started again with dynamic vNPUs (--vnpu dynamic:
// it serves huawei.com/npu-core on <tmp>/dp2/ascend-npu-core.sock), with a DraService whose vNPUs go through
// the same device query (DraVnpus: dra_healthy_chips of that plugin, CDI specs in <tmp>/cdi), serving
// <tmp>/vplugins/dra.sock. The stand-in holds N more claims, claim i of one vNPU device
// npu-<i % 8>-vir05-1c-16g-0. For each, in a shuffled order again:
//   vNPU NodePrepareResources + NodeUnprepareResources  the claim prepared (read, its vNPU created through
//                          the device query with the claim's owner tag, its CDI spec written, the checkpoint
//                          written; its CDI device checked) and unprepared (the vNPU destroyed, the spec
//                          removed, the checkpoint written);
//   Allocate (dynamic)     the device plugin's, for 4 AICore units of chip i % 8 (npu-core-<phy>-0..3): it
//                          places a vir05_1c_16g (the smallest template of 4 AICores or more) on the chip and
//                          answers ASCEND_VNPU_SPECS; it makes no vNPU (the runtime hook creates it when the
//                          container starts and destroys it after), so it is not the same work: the rows
//                          print it alone and with the seam's create + destroy added;
//   floor: create + destroy create_vnpu then destroy_vnpu of a vir05_1c_16g on chip i % 8 through the device
//                          query (owner-tagged as a claim's), the vNPU work any path pays;
//   floor: the rest        two empty gRPC calls, the vNPU claim's GET, a synced write of a file as large as
//                          the claim's CDI spec and two of one as large as its checkpoint;
//   a snapshot             one DeviceQuery::snapshot() of the host (no floor: printed alone, a prepare takes
//                          three).
// The vNPU rows print p50/p99/max of prepare, unprepare and their sum per claim, the sum's ratio to create +
// destroy and to create + destroy + the rest (per claim, sums of that claim's samples), Allocate (dynamic)
// against empty gRPC, and the sum against Allocate + create + destroy.
//
//   dra_bench [--claims N]
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "ascend/common/fs.h"
#include "ascend/common/kube_client.h"
#include "ascend/common/log.h"
#include "ascend/common/main_guard.h"
#include "ascend/npu/backend.h"
#include "ascend/npu/emulator.h"
#include "ascend/plugin/daemon.h"
#include "ascend/plugin/dra_service.h"
#include "bench_host.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "dra/dra_v1.grpc.pb.h"
#include "fake_apiserver.h"
#include "grpc_allocate.h"
#include "grpc_floor.h"
#include "latency.h"

namespace {

using ascend::bench::ms_since;
using ascend::bench::Stats;
using ascend::bench::stats;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
namespace drav1 = k8s::io::kubelet::pkg::apis::dra::v1;

constexpr const char* kNode = "worker-1";
constexpr const char* kNamespace = "bench";
constexpr int kChips = 8;
constexpr int kWarmup = 20;  // claims prepared, unprepared and allocated before the measured ones
// The vNPU phase: a claim's device, and the template the device plugin's dynamic mode places for 4 AICores.
constexpr const char* kVnpuTemplate = "vir05_1c_16g";
constexpr int kVnpuCores = 4;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "dra_bench: %s\n", what.c_str());
  std::exit(1);
}

// Claim i's chips: one for an even i, two for an odd one.
std::vector<int> chips_of(int i) {
  if (i % 2 == 0) return {i % kChips};
  return {i % kChips, (i + 1) % kChips};
}

std::string claim_name(int i) {
  return i < 0 ? "warm-" + std::to_string(-i) : "claim-" + std::to_string(i);
}

// The vNPU phase's claim i (negative: a warm-up one) and its one device.
std::string vnpu_claim_name(int i) {
  return i < 0 ? "vnpu-warm-" + std::to_string(-i) : "vnpu-" + std::to_string(i);
}
int vnpu_chip(int i) {
  return (i < 0 ? -i : i) % kChips;
}
std::string vnpu_device(int i) {
  return ascend::plugin::dra::vnpu_device_name(vnpu_chip(i), kVnpuTemplate, 0);
}

std::vector<std::string> chip_devices(const std::vector<int>& chips) {
  std::vector<std::string> out;
  out.reserve(chips.size());
  for (int c : chips) out.push_back("npu-" + std::to_string(c));
  return out;
}

// A ResourceClaim for `devices` as the API server holds it once kube-scheduler allocated it on this node.
json claim_object(const std::string& name, const std::vector<std::string>& devices) {
  json results = json::array();
  for (const auto& d : devices) {
    results.push_back(
        {{"request", "npus"}, {"driver", ascend::plugin::dra::kDriver}, {"pool", kNode}, {"device", d}});
  }
  const json node_selector = {
      {"nodeSelectorTerms",
       json::array(
           {{{"matchFields",
              json::array({{{"key", "metadata.name"}, {"operator", "In"}, {"values", {kNode}}}})}}})}};
  return {{"apiVersion", ascend::plugin::dra::kApiVersion},
          {"kind", "ResourceClaim"},
          {"metadata", {{"name", name}, {"namespace", kNamespace}}},
          {"spec",
           {{"devices",
             {{"requests", json::array({{{"name", "npus"},
                                         {"exactly",
                                          {{"deviceClassName", ascend::plugin::dra::kDriver},
                                           {"allocationMode", "ExactCount"},
                                           {"count", devices.size()}}}}})}}}}},
          {"status",
           {{"allocation",
             {{"devices", {{"results", results}, {"config", json::array()}}},
              {"nodeSelector", node_selector},
              {"allocationTimestamp", "2026-12-03T06:00:00Z"}}},
            {"reservedFor",
             json::array({{{"resource", "pods"}, {"name", name + "-pod"}, {"uid", "pod-uid"}}})}}}};
}

void wait_for_socket(const std::string& sock, const std::string& who) {
  for (int i = 0; i < 1000 && !std::filesystem::exists(sock); ++i) std::this_thread::sleep_for(10ms);
  if (!std::filesystem::exists(sock)) die(who + " did not serve on " + sock);
}

// Everything the calls go to, for one run.
class Bench {
 public:
  explicit Bench(int claims) : claims_(claims) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "dra-bench-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) die("mkdtemp " + tmpl);
    dir_ = tmpl;
    ascend::LogOptions lo;
    lo.file = dir_ + "/plugin.log";
    if (auto st = ascend::setup_logging(lo); !st.ok()) die(st.error().message());
    load_host();
    start_plugin();
    make_claims();
    start_dra();
    floor_server_ = start_floor();
  }
  ~Bench() {
    vdra_.reset();
    dra_.reset();
    stop_daemon(daemon_, runner_);
    stop_daemon(daemon2_, runner2_);
    if (floor_server_) floor_server_->Shutdown();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  Bench(const Bench&) = delete;
  Bench& operator=(const Bench&) = delete;

  // Claim i (negative: a warm-up one), prepared over the DRA socket; its answer checked.
  double prepare(int i) {
    drav1::NodePrepareResourcesRequest req;
    add_claim(req.add_claims(), i);
    drav1::NodePrepareResourcesResponse resp;
    grpc::ClientContext ctx;
    const auto t0 = Clock::now();
    const grpc::Status s = dra_stub_->NodePrepareResources(&ctx, req, &resp);
    const double ms = ms_since(t0);
    if (!s.ok()) die("NodePrepareResources " + claim_name(i) + ": " + s.error_message());
    const auto& uid = uids_[index(i)];
    if (!resp.claims().contains(uid)) die("NodePrepareResources " + claim_name(i) + ": no answer for it");
    const auto& a = resp.claims().at(uid);
    if (!a.error().empty()) die("NodePrepareResources " + claim_name(i) + ": " + a.error());
    const auto chips = chips_of(i < 0 ? -i : i);
    if (a.devices_size() != static_cast<int>(chips.size())) die("NodePrepareResources: the wrong devices");
    for (int d = 0; d < a.devices_size(); ++d) {
      if (a.devices(d).cdi_device_ids(0) !=
          "huawei.com/npu=" + std::to_string(chips[static_cast<std::size_t>(d)]))
        die("NodePrepareResources: the wrong CDI device " + a.devices(d).cdi_device_ids(0));
    }
    return ms;
  }

  double unprepare(int i) {
    drav1::NodeUnprepareResourcesRequest req;
    add_claim(req.add_claims(), i);
    drav1::NodeUnprepareResourcesResponse resp;
    grpc::ClientContext ctx;
    const auto t0 = Clock::now();
    const grpc::Status s = dra_stub_->NodeUnprepareResources(&ctx, req, &resp);
    const double ms = ms_since(t0);
    const auto& uid = uids_[index(i)];
    if (!s.ok() || !resp.claims().contains(uid) || !resp.claims().at(uid).error().empty())
      die("NodeUnprepareResources " + claim_name(i) + ": " + s.error_message());
    return ms;
  }

  double allocate(int i) {
    std::vector<std::string> ids;
    for (int c : chips_of(i < 0 ? -i : i)) ids.push_back("Ascend910-" + std::to_string(c));
    const auto req = ascend::testing::allocate_request({ids});
    v1beta1::AllocateResponse resp;
    const auto t0 = Clock::now();
    const grpc::Status s = ascend::testing::send_allocate(*plugin_stub_, req, &resp);
    const double ms = ms_since(t0);
    if (!s.ok() || resp.container_responses_size() != 1) die("Allocate: " + s.error_message());
    return ms;
  }

  double empty_call() {
    v1beta1::Empty req;
    v1beta1::DevicePluginOptions resp;
    grpc::ClientContext ctx;
    const auto t0 = Clock::now();
    const grpc::Status s = floor_stub_->GetDevicePluginOptions(&ctx, req, &resp);
    const double ms = ms_since(t0);
    if (!s.ok()) die("the floor server: " + s.error_message());
    return ms;
  }

  double get_claim(int i) { return get_named(claim_name(i)); }

  double get_named(const std::string& name) {
    const std::string path =
        ascend::kube::path_of(ascend::plugin::dra::kApiVersion, "resourceclaims", kNamespace, name);
    const auto t0 = Clock::now();
    auto c = client_->get(path);
    const double ms = ms_since(t0);
    if (!c.ok()) die("GET " + path + ": " + c.error().message());
    return ms;
  }

  // A file as large as the checkpoint with one claim of two chips, replaced as the service replaces it.
  double checkpoint_write() {
    const auto t0 = Clock::now();
    if (auto st = ascend::atomic_replace(dir_ + "/plugins/floor.json", checkpoint_text_, 0600); !st.ok())
      die(st.error().message());
    return ms_since(t0);
  }

  // The vNPU phase: the chips' plugin and service stopped, the dynamic-vNPU plugin and the vNPU service
  // started; the vNPU checkpoint and CDI spec of warm-up claim -1 kept for the floors' writes.
  void start_vnpu_phase() {
    dra_.reset();
    stop_daemon(daemon_, runner_);
    ascend::plugin::Config cfg = plugin_config("dp2");
    cfg.vnpu = ascend::plugin::VnpuMode::kDynamic;
    cfg.vnpu_gc_interval = std::chrono::seconds(0);
    start_daemon(cfg, daemon2_, runner2_);
    const std::string core_sock = cfg.kubelet_socket_dir + "/ascend-npu-core.sock";
    wait_for_socket(core_sock, "the device plugin (--vnpu dynamic)");
    core_stub_ = v1beta1::DevicePlugin::NewStub(
        grpc::CreateChannel("unix://" + core_sock, grpc::InsecureChannelCredentials()));
    ascend::plugin::DraOptions o;
    o.node_name = kNode;
    o.registry_dir = dir_ + "/vplugins_registry";
    o.plugin_dir = dir_ + "/vplugins";
    ascend::plugin::DraVnpus v;
    v.query = query_.get();
    v.healthy = ascend::plugin::dra_healthy_chips(daemon2_->plugin());
    v.cdi_dir = dir_ + "/cdi";
    vdra_ = std::make_unique<ascend::plugin::DraService>(
        o, *client_, ascend::plugin::dra_usable_chips(daemon2_->plugin()), std::move(v));
    if (auto st = vdra_->start(); !st.ok()) die(st.error().message());
    vdra_stub_ = drav1::DRAPlugin::NewStub(
        grpc::CreateChannel("unix://" + vdra_->dra_socket(), grpc::InsecureChannelCredentials()));
    vnpu_prepare(-1);
    auto cp = ascend::read_file(vdra_->checkpoint_path(), 1 << 20);
    auto spec = ascend::read_file(vdra_->cdi_spec_path(vuids_[vindex(-1)]), 1 << 20);
    if (!cp.ok() || !spec.ok()) die("read the vNPU claim's checkpoint and CDI spec");
    vcheckpoint_text_ = *cp;
    spec_text_ = *spec;
    vnpu_unprepare(-1);
  }

  // vNPU claim i prepared over the vNPU service's socket; its answer checked.
  double vnpu_prepare(int i) {
    drav1::NodePrepareResourcesRequest req;
    add_vnpu_claim(req.add_claims(), i);
    drav1::NodePrepareResourcesResponse resp;
    grpc::ClientContext ctx;
    const auto t0 = Clock::now();
    const grpc::Status s = vdra_stub_->NodePrepareResources(&ctx, req, &resp);
    const double ms = ms_since(t0);
    const std::string what = "NodePrepareResources " + vnpu_claim_name(i);
    if (!s.ok()) die(what + ": " + s.error_message());
    const auto& uid = vuids_[vindex(i)];
    if (!resp.claims().contains(uid)) die(what + ": no answer for it");
    const auto& a = resp.claims().at(uid);
    if (!a.error().empty()) die(what + ": " + a.error());
    if (a.devices_size() != 1 || a.devices(0).device_name() != vnpu_device(i) ||
        a.devices(0).cdi_device_ids_size() != 1 ||
        a.devices(0).cdi_device_ids(0) !=
            std::string(ascend::plugin::kDraClaimCdiKind) + "=" + uid + "-" + vnpu_device(i))
      die(what + ": the wrong device or CDI device");
    return ms;
  }

  double vnpu_unprepare(int i) {
    drav1::NodeUnprepareResourcesRequest req;
    add_vnpu_claim(req.add_claims(), i);
    drav1::NodeUnprepareResourcesResponse resp;
    grpc::ClientContext ctx;
    const auto t0 = Clock::now();
    const grpc::Status s = vdra_stub_->NodeUnprepareResources(&ctx, req, &resp);
    const double ms = ms_since(t0);
    const auto& uid = vuids_[vindex(i)];
    if (!s.ok() || !resp.claims().contains(uid) || !resp.claims().at(uid).error().empty())
      die("NodeUnprepareResources " + vnpu_claim_name(i) + ": " + s.error_message() +
          (resp.claims().contains(uid) ? " " + resp.claims().at(uid).error() : ""));
    return ms;
  }

  // The dynamic-vNPU plugin's Allocate of kVnpuCores AICore units of vNPU claim i's chip.
  double dynamic_allocate(int i) {
    std::vector<std::string> ids;
    ids.reserve(kVnpuCores);
    for (int k = 0; k < kVnpuCores; ++k)
      ids.push_back("npu-core-" + std::to_string(vnpu_chip(i)) + "-" + std::to_string(k));
    const auto req = ascend::testing::allocate_request({ids});
    v1beta1::AllocateResponse resp;
    const auto t0 = Clock::now();
    const grpc::Status s = ascend::testing::send_allocate(*core_stub_, req, &resp);
    const double ms = ms_since(t0);
    if (!s.ok() || resp.container_responses_size() != 1) die("Allocate (dynamic): " + s.error_message());
    const auto& envs = resp.container_responses(0).envs();
    if (!envs.contains("ASCEND_VNPU_SPECS") || envs.at("ASCEND_VNPU_SPECS") != kVnpuTemplate ||
        !envs.contains("ASCEND_VISIBLE_DEVICES") ||
        envs.at("ASCEND_VISIBLE_DEVICES") != std::to_string(vnpu_chip(i)))
      die("Allocate (dynamic): not a " + std::string(kVnpuTemplate) + " on chip " +
          std::to_string(vnpu_chip(i)));
    return ms;
  }

  // create_vnpu then destroy_vnpu of vNPU claim i's template on its chip, through the device query.
  double create_destroy(int i) {
    ascend::npu::VnpuOwner owner;
    owner.container_id = ascend::plugin::dra_vnpu_owner("floor", vnpu_device(i));
    const auto t0 = Clock::now();
    auto made = query_->create_vnpu(vnpu_chip(i), kVnpuTemplate, std::nullopt, owner);
    if (!made.ok()) die("create_vnpu: " + made.error().message());
    if (auto st = query_->destroy_vnpu(made->id, vnpu_chip(i), owner); !st.ok())
      die("destroy_vnpu: " + st.error().message());
    return ms_since(t0);
  }

  double vnpu_get(int i) { return get_named(vnpu_claim_name(i)); }

  double snapshot() {
    const auto t0 = Clock::now();
    auto s = query_->snapshot();
    const double ms = ms_since(t0);
    if (!s.ok()) die("snapshot: " + s.error().message());
    return ms;
  }

  double vcheckpoint_write() {
    const auto t0 = Clock::now();
    if (auto st = ascend::atomic_replace(dir_ + "/vplugins/floor.json", vcheckpoint_text_, 0600); !st.ok())
      die(st.error().message());
    return ms_since(t0);
  }

  double spec_write() {
    const auto t0 = Clock::now();
    if (auto st = ascend::atomic_replace(dir_ + "/cdi/floor.json", spec_text_, 0644); !st.ok())
      die(st.error().message());
    return ms_since(t0);
  }

 private:
  std::size_t vindex(int i) const { return static_cast<std::size_t>(i < 0 ? claims_ - 1 - i : i); }

  void add_vnpu_claim(drav1::Claim* c, int i) const {
    c->set_namespace_(kNamespace);
    c->set_name(vnpu_claim_name(i));
    c->set_uid(vuids_[vindex(i)]);
  }

  static void stop_daemon(std::unique_ptr<ascend::plugin::Daemon>& d, std::thread& runner) {
    if (!d) return;
    d->stop();
    runner.join();
    d.reset();
  }

  ascend::plugin::Config plugin_config(const std::string& socket_dir) const {
    ascend::plugin::Config cfg;
    cfg.kubelet_socket_dir = dir_ + "/" + socket_dir;
    cfg.host_root = dir_ + "/root";
    cfg.backend = "emulator";
    cfg.pod_resources_socket.clear();
    cfg.no_kube = true;
    cfg.ranktable_dir = dir_ + "/ranktables";
    std::filesystem::create_directories(cfg.kubelet_socket_dir);
    return cfg;
  }

  void start_daemon(const ascend::plugin::Config& cfg, std::unique_ptr<ascend::plugin::Daemon>& daemon,
                    std::thread& runner) {
    auto d = ascend::plugin::Daemon::create(cfg, *query_);
    if (!d.ok()) die(d.error().message());
    daemon = std::move(*d);
    runner = std::thread([&daemon] {
      if (auto st = daemon->run(); !st.ok()) die("the device plugin: " + st.error().message());
    });
  }

  std::size_t index(int i) const { return static_cast<std::size_t>(i < 0 ? claims_ - 1 - i : i); }

  void add_claim(drav1::Claim* c, int i) const {
    c->set_namespace_(kNamespace);
    c->set_name(claim_name(i));
    c->set_uid(uids_[index(i)]);
  }

  void load_host() {
    emu_ = std::make_unique<ascend::npu::Emulator>(dir_ + "/root");
    if (auto st = ascend::bench::load_bench_host(*emu_); !st) die(st.error().message());
    ascend::npu::BackendOptions bo;
    bo.backend = ascend::npu::Backend::kEmulator;
    bo.root = dir_ + "/root";
    auto q = ascend::npu::open_device_query(bo);
    if (!q) die(q.error().message());
    query_ = std::move(*q);
  }

  void start_plugin() {
    const ascend::plugin::Config cfg = plugin_config("dp");
    start_daemon(cfg, daemon_, runner_);
    const std::string sock = cfg.kubelet_socket_dir + "/ascend-Ascend910.sock";
    wait_for_socket(sock, "the device plugin");
    plugin_stub_ = v1beta1::DevicePlugin::NewStub(
        grpc::CreateChannel("unix://" + sock, grpc::InsecureChannelCredentials()));
  }

  void make_claims() {
    auto cfg = ascend::kube::url_config(api_.url(), "", "");
    if (!cfg.ok()) die(cfg.error().message());
    client_ = std::make_unique<ascend::kube::Client>(*cfg);
    const std::string collection =
        ascend::kube::path_of(ascend::plugin::dra::kApiVersion, "resourceclaims", kNamespace);
    for (int i = 0; i < claims_ + kWarmup; ++i) {
      const int n = i < claims_ ? i : -(i - claims_ + 1);
      const json made =
          api_.create(collection, claim_object(claim_name(n), chip_devices(chips_of(n < 0 ? -n : n))));
      uids_.push_back(made["metadata"]["uid"].get<std::string>());
      const json vmade = api_.create(collection, claim_object(vnpu_claim_name(n), {vnpu_device(n)}));
      vuids_.push_back(vmade["metadata"]["uid"].get<std::string>());
    }
  }

  void start_dra() {
    ascend::plugin::DraOptions o;
    o.node_name = kNode;
    o.registry_dir = dir_ + "/plugins_registry";
    o.plugin_dir = dir_ + "/plugins";
    dra_ = std::make_unique<ascend::plugin::DraService>(o, *client_,
                                                        ascend::plugin::dra_usable_chips(daemon_->plugin()));
    if (auto st = dra_->start(); !st.ok()) die(st.error().message());
    dra_stub_ = drav1::DRAPlugin::NewStub(
        grpc::CreateChannel("unix://" + dra_->dra_socket(), grpc::InsecureChannelCredentials()));
    // The checkpoint with one claim of two chips, for the floor's write.
    prepare(-1);
    auto text = ascend::read_file(dra_->checkpoint_path(), 1 << 20);
    if (!text.ok()) die(text.error().message());
    checkpoint_text_ = *text;
    unprepare(-1);
  }

  std::unique_ptr<grpc::Server> start_floor() {
    const std::string sock = dir_ + "/floor.sock";
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + sock, grpc::InsecureServerCredentials());
    builder.RegisterService(&floor_service_);
    auto server = builder.BuildAndStart();
    if (!server) die("start the floor server on " + sock);
    floor_stub_ = v1beta1::DevicePlugin::NewStub(
        grpc::CreateChannel("unix://" + sock, grpc::InsecureChannelCredentials()));
    return server;
  }

  const int claims_;
  std::string dir_;
  std::unique_ptr<ascend::npu::Emulator> emu_;
  std::unique_ptr<ascend::npu::DeviceQuery> query_;
  std::unique_ptr<ascend::plugin::Daemon> daemon_;
  std::thread runner_;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> plugin_stub_;
  ascend::testing::FakeApiServer api_;
  std::unique_ptr<ascend::kube::Client> client_;
  std::vector<std::string> uids_;   // claim i's at i, warm-up claim -k's at claims_ - 1 + k
  std::vector<std::string> vuids_;  // the vNPU claims', alike
  std::unique_ptr<ascend::plugin::DraService> dra_;
  std::unique_ptr<drav1::DRAPlugin::Stub> dra_stub_;
  std::string checkpoint_text_;
  ascend::bench::FloorService floor_service_;
  std::unique_ptr<grpc::Server> floor_server_;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> floor_stub_;
  // The vNPU phase.
  std::unique_ptr<ascend::plugin::Daemon> daemon2_;
  std::thread runner2_;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> core_stub_;
  std::unique_ptr<ascend::plugin::DraService> vdra_;
  std::unique_ptr<drav1::DRAPlugin::Stub> vdra_stub_;
  std::string vcheckpoint_text_;
  std::string spec_text_;
};

struct Samples {
  std::vector<double> prepare, unprepare, allocate, rpc, get, checkpoint;
};

struct VnpuSamples {
  std::vector<double> prepare, unprepare, allocate, create_destroy, rpc, rest, snapshot;
};

VnpuSamples run_vnpus(Bench& b, int claims) {
  for (int k = 2; k <= kWarmup; ++k) {
    b.vnpu_prepare(-k);
    b.vnpu_unprepare(-k);
    b.dynamic_allocate(-k);
    b.create_destroy(-k);
    b.empty_call();
    b.vnpu_get(-k);
    b.vcheckpoint_write();
    b.spec_write();
    b.snapshot();
  }
  VnpuSamples s;
  std::mt19937 rng(31);
  std::array<std::function<void(int)>, 4> steps = {
      [&](int i) {
        s.prepare.push_back(b.vnpu_prepare(i));
        s.unprepare.push_back(b.vnpu_unprepare(i));
      },
      [&](int i) { s.allocate.push_back(b.dynamic_allocate(i)); },
      [&](int i) { s.create_destroy.push_back(b.create_destroy(i)); },
      [&](int i) {
        const double rpc = b.empty_call();
        s.rpc.push_back(rpc);
        s.rest.push_back(rpc + b.empty_call() + b.vnpu_get(i) + b.spec_write() + b.vcheckpoint_write() +
                         b.vcheckpoint_write());
        s.snapshot.push_back(b.snapshot());
      },
  };
  std::array<int, 4> order = {0, 1, 2, 3};
  for (int i = 0; i < claims; ++i) {
    std::shuffle(order.begin(), order.end(), rng);
    for (int step : order) steps[static_cast<std::size_t>(step)](i);
  }
  return s;
}

Samples run(Bench& b, int claims) {
  // Warm-up: every connection made and every path taken once (claim -1 was prepared at start).
  for (int k = 2; k <= kWarmup; ++k) {
    b.prepare(-k);
    b.unprepare(-k);
    b.allocate(-k);
    b.empty_call();
    b.get_claim(-k);
    b.checkpoint_write();
  }
  Samples s;
  std::mt19937 rng(30);
  std::array<std::function<void(int)>, 4> steps = {
      [&](int i) {
        s.prepare.push_back(b.prepare(i));
        s.unprepare.push_back(b.unprepare(i));
      },
      [&](int i) { s.allocate.push_back(b.allocate(i)); },
      [&](int i) {
        s.rpc.push_back(b.empty_call());
        s.get.push_back(b.get_claim(i));
      },
      [&](int /*i*/) { s.checkpoint.push_back(b.checkpoint_write()); },
  };
  std::array<int, 4> order = {0, 1, 2, 3};
  for (int i = 0; i < claims; ++i) {
    std::shuffle(order.begin(), order.end(), rng);
    for (int step : order) steps[static_cast<std::size_t>(step)](i);
  }
  return s;
}

std::vector<double> sum(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = a[i] + b[i];
  return out;
}

void row(const char* name, const Stats& s) {
  std::printf("  %-46s p50 %7.3f  p99 %7.3f  max %7.3f ms\n", name, s.p50, s.p99, s.max);
}

void ratio(const char* name, const Stats& s, const Stats& floor) {
  std::printf("    %-44s p50 %7.3f  p99 %7.3f  max %7.3f ms   ratio p50 %5.2f  p99 %5.2f\n", name, floor.p50,
              floor.p99, floor.max, floor.p50 > 0 ? s.p50 / floor.p50 : 0.0,
              floor.p99 > 0 ? s.p99 / floor.p99 : 0.0);
}

int run_main(int argc, char** argv) {
  int claims = 200;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--claims" && a + 1 < argc) {
      claims = std::atoi(argv[++a]);
    } else {
      std::fprintf(stderr, "usage: dra_bench [--claims N]\n");
      return 2;
    }
  }
  if (claims < 1) die("--claims must be at least 1");
  Bench b(claims);
  const Samples s = run(b, claims);
  const Stats prepare = stats(s.prepare), unprepare = stats(s.unprepare), allocate = stats(s.allocate);
  const Stats rpc = stats(s.rpc), rpc_get = stats(sum(s.rpc, s.get));
  const Stats rpc_get_cp = stats(sum(sum(s.rpc, s.get), s.checkpoint)),
              rpc_cp = stats(sum(s.rpc, s.checkpoint));
  std::printf(
      "dra_bench: %d claims of 1 or 2 chips, one call at a time, on an emulated Atlas 800T A2 (node %s); "
      "in this process: the API server stand-in, the device plugin, the DRA service\n",
      claims, kNode);
  row("NodePrepareResources (a fresh claim)", prepare);
  ratio("floor: empty gRPC + GET of the claim", prepare, rpc_get);
  ratio("floor: empty gRPC + GET + checkpoint write", prepare, rpc_get_cp);
  row("NodeUnprepareResources", unprepare);
  ratio("floor: empty gRPC + checkpoint write", unprepare, rpc_cp);
  row("Allocate (device plugin, the same chips)", allocate);
  ratio("floor: empty gRPC", allocate, rpc);
  std::printf("  NodePrepareResources against Allocate: ratio p50 %.2f, p99 %.2f\n",
              prepare.p50 / allocate.p50, prepare.p99 / allocate.p99);
  std::printf("  the floors alone: empty gRPC p50 %.3f ms, GET p50 %.3f ms, checkpoint write p50 %.3f ms\n",
              rpc.p50, stats(s.get).p50, stats(s.checkpoint).p50);

  b.start_vnpu_phase();
  const VnpuSamples v = run_vnpus(b, claims);
  const Stats vprepare = stats(v.prepare), vunprepare = stats(v.unprepare);
  const Stats vboth = stats(sum(v.prepare, v.unprepare)), vallocate = stats(v.allocate);
  const Stats cd = stats(v.create_destroy), cd_rest = stats(sum(v.create_destroy, v.rest));
  const Stats alloc_cd = stats(sum(v.allocate, v.create_destroy)), vrpc = stats(v.rpc);
  std::printf(
      "dra_bench, vNPUs: %d claims of one vNPU device (npu-<i %% 8>-vir05-1c-16g-0), one call at a time; the "
      "chips' plugin stopped, the device plugin (--vnpu dynamic) and a DraService with vNPUs (--dra-vnpu)\n",
      claims);
  row("vNPU NodePrepareResources (a fresh claim)", vprepare);
  row("vNPU NodeUnprepareResources", vunprepare);
  row("vNPU prepare + unprepare", vboth);
  ratio("floor: create_vnpu + destroy_vnpu (seam)", vboth, cd);
  ratio("floor: create+destroy, 2 gRPC, GET, 3 writes", vboth, cd_rest);
  row("Allocate (device plugin, dynamic, 4 AICores)", vallocate);
  ratio("floor: empty gRPC", vallocate, vrpc);
  ratio("Allocate (dynamic) + create + destroy", vboth, alloc_cd);
  std::printf(
      "  the floors alone: create + destroy p50 %.3f ms, the rest (2 gRPC, GET, 3 writes) p50 %.3f ms; a "
      "snapshot "
      "of the host p50 %.3f ms\n",
      cd.p50, stats(v.rest).p50, stats(v.snapshot).p50);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ascend::guarded_main("dra_bench", [&] { return run_main(argc, argv); });
}
