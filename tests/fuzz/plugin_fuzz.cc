// The device plugin's request handling: Allocate and GetPreferredAllocation requests as the kubelet sends
// them (protobuf bytes, parsed with the generated classes) through the DevicePlugin service's call bodies
// and the plugin's planning, against an emulated 8-chip 910B host (two vNPUs on chip 6) in a scratch folder.
// Byte 0 picks the call (bit 0: Allocate / GetPreferredAllocation) and the configuration (the rest, modulo
// 5: runtime, device-spec, cdi, static vNPUs, dynamic vNPUs), byte 1 the resource of that configuration;
// the rest is the request message. After each input the plugin forgets what it handed out (reconcile
// against an empty kubelet), so that inputs do not depend on each other.
//
// Oracle: an OK Allocate answers every container; an OK GetPreferredAllocation answers every container with
// exactly allocation_size distinct ids among the available ones, the must-include ones among them.
#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>

#include "ascend/npu/emulator.h"
#include "ascend/npu/profiles.h"
#include "ascend/plugin/plugin.h"
#include "fuzz_util.h"
#include "service.h"

using namespace ascend;

namespace {

struct Served {
  std::unique_ptr<plugin::Plugin> plugin;
  std::vector<std::unique_ptr<plugin::DevicePluginService>> services;  // one per resource
};

struct World {
  fuzz::ScratchDir dir;
  npu::Emulator emu{dir / "root"};
  std::vector<Served> configs;

  World() {
    // Quiet: protobuf reports every invalid UTF-8 string it refuses, the plugin every refused call.
    google::protobuf::SetLogHandler(nullptr);
    spdlog::set_level(spdlog::level::off);
    // Stand-ins for what load copies into the host, laid out as the build lays them out (the emulated
    // libdcmi.so in lib/ beside bin/).
    std::filesystem::create_directories(dir / "bin");
    std::filesystem::create_directories(dir / "lib");
    fuzz::write_file(dir / "bin/npu-smi", "");
    fuzz::write_file(dir / "bin/libascend_driver_stub.so", "");
    fuzz::write_file(dir / "lib/libdcmi.so", "");
    auto profile = npu::builtin_profile("atlas800t-a2");
    fuzz::check(profile.ok(), "profile");
    npu::LoadOptions o;
    o.make_nodes = false;
    o.majors = npu::DeviceMajors{240, 241, 242, 243, 244};
    o.npu_smi_binary = dir / "bin/npu-smi";
    auto st = emu.load(*profile, o);
    fuzz::check(st.ok(), "load the emulated host: " + (st.ok() ? "" : st.error().message()));
    for (int i = 0; i < 2; ++i)
      fuzz::check(emu.create_vnpu(6, profile->templates.front().name, std::nullopt, {}).ok(), "vNPU");

    const std::pair<plugin::AllocateMode, plugin::VnpuMode> modes[] = {
        {plugin::AllocateMode::kRuntime, plugin::VnpuMode::kOff},
        {plugin::AllocateMode::kDeviceSpec, plugin::VnpuMode::kOff},
        {plugin::AllocateMode::kCdi, plugin::VnpuMode::kOff},
        {plugin::AllocateMode::kRuntime, plugin::VnpuMode::kStatic},
        {plugin::AllocateMode::kRuntime, plugin::VnpuMode::kDynamic},
    };
    for (auto [mode, vnpu] : modes) {
      plugin::Config cfg;
      cfg.host_root = emu.root();
      cfg.allocate_mode = mode;
      cfg.vnpu = vnpu;
      cfg.pod_resources_socket.clear();
      auto p = plugin::Plugin::create(emu, cfg, nullptr);
      fuzz::check(p.ok(), "create the plugin: " + (p.ok() ? "" : p.error().message()));
      Served s;
      s.plugin = std::move(*p);
      for (const auto& res : s.plugin->resources())
        s.services.push_back(std::make_unique<plugin::DevicePluginService>(*s.plugin, res, nullptr));
      configs.push_back(std::move(s));
    }
  }
};

void check_allocate(plugin::DevicePluginService& svc, const std::uint8_t* data, std::size_t size) {
  v1beta1::AllocateRequest req;
  if (!req.ParseFromArray(data, static_cast<int>(size))) return;
  v1beta1::AllocateResponse resp;
  grpc::Status st = svc.allocate(req, &resp);
  if (!st.ok()) {
    fuzz::check(!st.error_message().empty(), "a refused Allocate without a message");
    return;
  }
  fuzz::check(resp.container_responses_size() == req.container_requests_size(),
              "Allocate did not answer every container");
  (void)resp.SerializeAsString();
}

void check_preferred(plugin::DevicePluginService& svc, const std::uint8_t* data, std::size_t size) {
  v1beta1::PreferredAllocationRequest req;
  if (!req.ParseFromArray(data, static_cast<int>(size))) return;
  v1beta1::PreferredAllocationResponse resp;
  grpc::Status st = svc.preferred(req, &resp);
  if (!st.ok()) return;
  fuzz::check(resp.container_responses_size() == req.container_requests_size(),
              "GetPreferredAllocation did not answer every container");
  for (int i = 0; i < req.container_requests_size(); ++i) {
    const auto& cr = req.container_requests(i);
    const auto& ids = resp.container_responses(i).deviceids();
    std::set<std::string> avail(cr.available_deviceids().begin(), cr.available_deviceids().end());
    std::set<std::string> got(ids.begin(), ids.end());
    fuzz::check(got.size() == static_cast<std::size_t>(ids.size()), "an id preferred twice");
    fuzz::check(ids.size() == cr.allocation_size(), "not allocation_size ids preferred");
    for (const auto& id : ids)
      fuzz::check(avail.count(id) == 1, "preferred an id that is not available: " + id);
    for (const auto& id : cr.must_include_deviceids())
      fuzz::check(got.count(id) == 1, "a must-include id left out: " + id);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static World* world = new World;  // never destroyed: the services' threads run until exit
  if (size < 2) return 0;
  Served& served = world->configs[(data[0] >> 1) % world->configs.size()];
  auto& svc = *served.services[data[1] % served.services.size()];
  if ((data[0] & 1) == 0) {
    check_allocate(svc, data + 2, size - 2);
  } else {
    check_preferred(svc, data + 2, size - 2);
  }
  served.plugin->reconcile({}, std::chrono::milliseconds(0));
  return 0;
}
