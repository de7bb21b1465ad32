// The kubelet side of the DRA driver (Dynamic Resource Allocation, resource.k8s.io/v1, Kubernetes 1.34):
// the two gRPC servers a kubelet expects of a DRA driver's node plugin.
// - Registration (pluginregistration.Registration) on <registry_dir>/npu.ascend.huawei.com-reg.sock: the
//   kubelet's plugin watcher finds the socket, asks GetInfo (type "DRAPlugin", the driver name, the DRA
//   socket's path, the services "v1.DRAPlugin" and "v1beta1.DRAPlugin") and says whether it registered.
// - DRAPlugin, v1 and v1beta1 (one implementation), on <plugin_dir>/dra.sock: NodePrepareResources reads
//   each ResourceClaim from the API server and answers, for the devices allocated to this driver in this
//   node's pool (whole chips `npu-<phy>`, as dra_slices.h publishes them), the CDI device of the chip
//   (`huawei.com/npu=<phy>`, the spec `ascend-ctk cdi generate` writes); NodeUnprepareResources forgets
//   them. Preparing gives nothing out (the container runtime opens the device through CDI), so there is
//   nothing to undo: the claims prepared are kept in a checkpoint (<plugin_dir>/checkpoint.json), so that a
//   prepare the kubelet repeats, also after this plugin restarts, answers the same devices without asking
//   the API server again.
//
// vNPUs (--dra-vnpu; dra_slices.h publishes them as npu-<phy>-<template>-<k>): preparing a claim that names
// one creates a vNPU of that template on the chip through the device query (the seam the runtime's dynamic
// vNPUs go through), tagged with the claim (owner container_id "dra-claim/<uid>/<device>", which `vnpu gc`
// leaves alone), writes the claim's CDI spec (<cdi_dir>/npu.ascend.huawei.com-claim_<uid>.json, kind
// npu.ascend.huawei.com/claim, one device "<uid>-<device>" per vNPU: its /dev/vdavinci<id> as
// /dev/davinci<id>, the control nodes and the driver files, as Allocate's device-spec mode gives them) and
// checkpoints the vNPU's id, all before it answers; unprepare destroys the vNPU (only while it still has the
// claim's tag), removes the spec, then forgets the claim. Crash safety: a vNPU with the claim's tag found on
// the chip is taken over instead of a second one made (a crash between creating and checkpointing); a
// prepare repeated after a restart answers from the checkpoint once the vNPU is found there still (gone:
// the claim's error says so, and the claim stays for unprepare); an unprepare after a restart destroys the
// recorded vNPU, and one already gone is no error; an unprepare of a claim the checkpoint does not have
// destroys the vNPUs carrying its tag (made before a crash ahead of the checkpoint, its pod gone since).
//
// Trust: the kubelet (root) is the only client. Both sockets are mode 0600 from the moment they can be
// reached, and each connection's peer (SO_PEERCRED) must be root or this process's user, checked when it is
// accepted, before gRPC reads a byte of it. A call names at most kDraMaxClaimsPerCall claims and each name is
// bounded (kDraMax*); bad input is INVALID_ARGUMENT or that claim's error, never an exception.
//
// Thread-safety: start()/stop() from one thread (the daemon's); prepare()/unprepare() and the gRPC handlers
// from any thread (the checkpoint is one mutex's).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/plugin/dra_slices.h"

namespace ascend::kube {
class Client;
}  // namespace ascend::kube
namespace ascend::npu {
class DeviceQuery;
struct DeviceSnapshot;
}  // namespace ascend::npu
namespace ascend::plugin::dra_kubelet {
struct VnpuRules;
}  // namespace ascend::plugin::dra_kubelet

namespace ascend::plugin {

class Plugin;

// The driver is dra::kDriver (dra_slices.h); the kubelet's folders, the plugin's named after it.
inline constexpr const char* kDraRegistryDir = "/var/lib/kubelet/plugins_registry";
inline constexpr const char* kDraPluginDir = "/var/lib/kubelet/plugins/npu.ascend.huawei.com";
// The kubelet's names of the services served on the DRA socket, in the order it should prefer them (it
// takes the first one it knows).
inline constexpr const char* kDraServiceV1 = "v1.DRAPlugin";
inline constexpr const char* kDraServiceV1beta1 = "v1beta1.DRAPlugin";

// Bounds of what a caller may send. A pod names at most 128 ResourceClaims, so a kubelet never asks for more
// in one call; the others are the API server's own limits of metadata (namespace: a DNS label; name: a DNS
// subdomain; uid: a UUID, with room).
inline constexpr std::size_t kDraMaxClaimsPerCall = 128;
inline constexpr std::size_t kDraMaxNamespace = 63;
inline constexpr std::size_t kDraMaxName = 253;
inline constexpr std::size_t kDraMaxUid = 128;
// Claims prepared at once on this node: a node has at most a few dozen chips and a whole chip is in one
// claim (shared claims are prepared once), so this is far above any real count and bounds the checkpoint.
inline constexpr std::size_t kDraMaxPreparedClaims = 1024;

struct DraOptions {
  std::string node_name;  // this node: the pool the slices publish its chips in
  std::string registry_dir = kDraRegistryDir;
  std::string plugin_dir = kDraPluginDir;  // the DRA socket and the checkpoint
};

// A claim as the kubelet names it.
struct DraClaimRef {
  std::string ns;
  std::string uid;
  std::string name;
};

// One prepared device, as the kubelet's Device message carries it (and, for a vNPU made for the claim, the
// vNPU's id, which only the checkpoint keeps).
struct DraDevice {
  std::vector<std::string> request_names;
  std::string pool_name;
  std::string device_name;
  std::vector<std::string> cdi_device_ids;
  int vnpu_id = -1;  // -1: a whole chip
  bool operator==(const DraDevice&) const = default;
};

// The answer for one claim: its devices, or (non-empty) why it was not prepared.
struct DraPrepared {
  std::vector<DraDevice> devices;
  std::string error;
};

// A claim prepared: what the checkpoint keeps of it, by uid.
struct DraPreparedClaim {
  std::string ns;
  std::string name;
  std::vector<DraDevice> devices;
  bool operator==(const DraPreparedClaim&) const = default;
};

// The physical ids of the chips this node can hand out now. An error (the NPU driver is away) fails the
// claims not yet prepared with its message. Called once per NodePrepareResources that needs it, on a gRPC
// thread.
using DraNodeChips = std::function<Result<std::vector<int>>()>;

// The chips of `plugin`'s host that are healthy in its view (graded faults, isolation), as Allocate hands
// them out; the driver lost is an error. `plugin` must outlive the function.
DraNodeChips dra_usable_chips(const Plugin& plugin);
// The chips of `plugin`'s host that are healthy in its view, vNPUs on them or not (where a claim's vNPU may
// be made); the driver lost is an error. `plugin` must outlive the function.
DraNodeChips dra_healthy_chips(const Plugin& plugin);

// --dra-vnpu: what preparing vNPU devices needs. Without a query, a claim naming a vNPU is that claim's
// error.
struct DraVnpus {
  npu::DeviceQuery* query = nullptr;  // creates and destroys them; must outlive the service
  DraNodeChips healthy;               // dra_healthy_chips
  std::string cdi_dir = "/var/run/cdi";
};
// The CDI kind of the claims' vNPU specs, and the owner tag of a claim's vNPU.
inline constexpr const char* kDraClaimCdiKind = "npu.ascend.huawei.com/claim";
std::string dra_vnpu_owner(const std::string& claim_uid, const std::string& device);

class DraService {
 public:
  // `api` and whatever `chips` refers to must outlive the service. Nothing is served before start().
  DraService(DraOptions opts, kube::Client& api, DraNodeChips chips, DraVnpus vnpus = {});
  ~DraService();  // stop()
  DraService(const DraService&) = delete;
  DraService& operator=(const DraService&) = delete;

  // Creates the folders (0750) when missing, loads the checkpoint (one that does not parse is renamed to
  // checkpoint.json.corrupt-<unix seconds>, -<n> added when one set aside in the same second has that name,
  // with one warning, and the service starts with none), serves
  // the DRA socket, then the registration socket: the kubelet reaches a server already running. A socket
  // file left at either path is replaced. Calling it again while serving does nothing.
  Status start();
  // Stops the registration server (removing its socket tells the kubelet the plugin is gone), then the DRA
  // server; removes the socket files this service made. The checkpoint stays.
  void stop();
  bool serving() const;
  // True once the kubelet said it registered the plugin (NotifyRegistrationStatus).
  bool registered() const;

  std::string registration_socket() const;  // <registry_dir>/npu.ascend.huawei.com-reg.sock
  std::string dra_socket() const;           // <plugin_dir>/dra.sock
  std::string checkpoint_path() const;      // <plugin_dir>/checkpoint.json
  std::string cdi_spec_path(const std::string& claim_uid) const;  // the claim's vNPU CDI spec (--dra-vnpu)

  // The calls' bodies, without gRPC (the handlers answer with these; tests and fuzz targets may call them).
  // The answers are keyed by claim uid, one per distinct uid asked. EINVAL for the whole call: more than
  // kDraMaxClaimsPerCall claims, or a uid that is empty or longer than kDraMaxUid (an answer is keyed by
  // it). Everything else wrong with one claim is that claim's error.
  Result<std::map<std::string, DraPrepared>> prepare(const std::vector<DraClaimRef>& claims);
  // A claim not prepared (unknown, or unprepared before) is a success: the kubelet may repeat the call.
  Result<std::map<std::string, std::string>> unprepare(const std::vector<DraClaimRef>& claims);

  // Called by the registration server.
  void note_registration(bool registered, const std::string& error);

  struct Servers;

 private:
  Status load_checkpoint();
  Status write_checkpoint_locked() const;
  // Prepares one claim not in the checkpoint: reads it and checks its allocation (no lock held).
  Result<std::vector<DraDevice>> read_claim(const DraClaimRef& ref, const std::vector<int>& chips,
                                            const dra_kubelet::VnpuRules* vnpus);
  // A claim naming vNPUs, read: makes (or takes over) its vNPUs, writes its CDI spec and checkpoints it,
  // all under vnpu_mu_; on failure nothing of it is left.
  Result<std::vector<DraDevice>> prepare_vnpus(const DraClaimRef& ref, std::vector<DraDevice> devices);
  // A claim prepared before, as the checkpoint has it: EIO naming the vNPU when one of its vNPUs is gone.
  Status check_vnpus(const std::string& uid, const DraPreparedClaim& c) const;
  // Destroys the vNPUs of a prepared claim (gone already: fine) and removes its CDI spec.
  Status release_vnpus(const std::string& uid, const DraPreparedClaim& c);
  // A claim unprepared that is not in the checkpoint: destroys the vNPUs of `host` that carry its tag (made
  // before a crash ahead of the checkpoint) and removes its CDI spec.
  Status release_orphans(const std::string& uid, const npu::DeviceSnapshot& host);

  const DraOptions opts_;
  kube::Client& api_;
  const DraNodeChips chips_;
  const DraVnpus vnpus_;

  std::mutex vnpu_mu_;  // one claim's vNPUs made or destroyed at a time (taken before mu_)
  mutable std::mutex mu_;
  std::map<std::string, DraPreparedClaim> prepared_;  // by uid; what the checkpoint holds
  bool registered_ = false;

  std::unique_ptr<Servers> servers_;  // while serving
};

}  // namespace ascend::plugin
