// The plugin's configuration: a plain value (its flags and YAML keys are options.h). Pure functions;
// thread-safe.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "ascend/common/error.h"

namespace ascend::plugin {

// What Allocate answers with.
enum class AllocateMode {
  kRuntime,     // ASCEND_VISIBLE_DEVICES (+ marker mounts): the Ascend runtime/hook injects the devices
  kDeviceSpec,  // DeviceSpecs and driver Mounts: works with no Ascend runtime at all
  kCdi,         // CDI device names huawei.com/npu=<id>: a CDI-aware runtime injects the devices
};
std::string_view to_string(AllocateMode m);
Result<AllocateMode> parse_allocate_mode(std::string_view s);  // runtime | device-spec | cdi

enum class VnpuMode {
  kOff,      // whole chips only
  kStatic,   // vNPUs that already exist are advertised, one resource per template
  kDynamic,  // AICore units (huawei.com/npu-core); the runtime creates the vNPU at container start
};
std::string_view to_string(VnpuMode m);
Result<VnpuMode> parse_vnpu_mode(std::string_view s);  // off | static | dynamic

inline constexpr const char* kDefaultSocketDir = "/var/lib/kubelet/device-plugins";
inline constexpr const char* kDefaultPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock";
inline constexpr const char* kDefaultRanktableDir = "/var/lib/ascend-device-plugin/ranktables";

struct Config {
  std::string kubelet_socket_dir = kDefaultSocketDir;
  std::string host_root;         // empty: $ASCEND_SIM_ROOT, else "/"
  std::string backend = "auto";  // the device seam's backend: auto | emulator | dcmi (npu/backend.h)
  std::string dcmi_library;      // libdcmi.so for the dcmi backend; empty: the driver's, under the host root
  std::string resource_name;     // empty: the chip's (huawei.com/Ascend910, huawei.com/Ascend310P)
  AllocateMode allocate_mode = AllocateMode::kRuntime;
  VnpuMode vnpu = VnpuMode::kOff;
  std::string metrics_addr;  // "host:port"; empty: no /metrics
  // Serve /metrics only (--metrics-only): for a host that runs no kubelet. No plugin sockets, no
  // registration, no scheduler, no API server; the NPU metrics carry no pod labels.
  bool metrics_only = false;
  // Telegraf's execd input (--telegraf): NPU Exporter's `-platform=Telegraf` lines (npu_exporter.h) on
  // standard output every telegraf_interval (--telegraf-interval, s) and at each line on standard input,
  // until standard input closes. Like --metrics-only, no kubelet, scheduler or API server; /metrics too if
  // --metrics-addr is given.
  bool telegraf = false;
  std::chrono::seconds telegraf_interval{1};
  // The kubelet's pod-resources socket, used in dynamic vNPU mode to learn which promises ended; empty or
  // absent: promises end only when the kubelet hands their ids out again.
  std::string pod_resources_socket = kDefaultPodResourcesSocket;
  // How often the pod-resources list is read, and how old a promise must be before its absence from that
  // list ends it (the kubelet records an allocation only after Allocate returns). Not flags: tests shorten
  // them.
  std::chrono::milliseconds reconcile_every{5000};
  std::chrono::milliseconds promise_grace{10000};
  std::string log_level = "info";
  std::string log_file;
  // How often the device query is asked whether the driver is still there (--health-interval, ms): when it
  // fails (the driver was unloaded, or DCMI starts failing) every device turns Unhealthy and Allocate is
  // refused, with one log line; when it answers again the devices follow the new driver (new majors too).
  std::chrono::milliseconds health_interval{500};
  // How often dynamic vNPUs whose container is gone are destroyed (--vnpu-gc-interval, seconds; 0: never).
  // Needs the host's pid namespace and runc's state folders (the DaemonSet has hostPID and mounts them);
  // without them nothing is destroyed (vnpu_gc.h).
  std::chrono::seconds vnpu_gc_interval{60};

  // The scheduler extender (ascend-scheduler serve): empty URL, no scheduler, and the plugin behaves as it
  // did without one. http:// or https://, optionally with a path prefix.
  std::string scheduler_url;
  std::string node_name;             // empty: $NODE_NAME, else the host name (default_node_name())
  std::string scheduler_token_file;  // its trimmed content is sent as "Authorization: Bearer <token>"
  std::string scheduler_ca_file;  // https: the CA that signed the scheduler's certificate (else the system's)
  // Allows an http:// scheduler URL whose host is not loopback (--insecure-scheduler-http): the token then
  // crosses the network in clear text and whoever answers in the scheduler's place is believed. Off, such a
  // URL is bad usage.
  bool insecure_scheduler_http = false;
  // A fault-code table read over the built-in one (faults.h, --fault-codes): the levels chip faults get.
  // Empty: the built-in table only.
  std::string fault_codes;
  std::string ranktable_dir = kDefaultRanktableDir;  // where job rank tables are written for containers
  // The group the rank tables (mode 0640, owned by root) get, so that a job container whose user is not
  // root can read its own (the group of that user: HwHiAiUser's in Ascend's images). -1: the plugin's own.
  int ranktable_group = -1;
  // How often the inventory is sent although nothing changed (a restarted scheduler learns the node again),
  // and how often a refused (4xx) report is tried again. Not a flag: tests shorten it.
  std::chrono::milliseconds report_every{30000};
  // How often the scheduler is asked for the rank table of each job with a pod here, so that a table it
  // rewrote (a fault recovery moved a pod) reaches the surviving pods' folders. 0: never. Not a flag: tests
  // shorten it.
  std::chrono::milliseconds ranktable_refresh{2000};

  // The Kubernetes API server (kube_publisher.h): the node's chips in MindCluster's device ConfigMap and its
  // labels. --kubeconfig wins, then --kube-api (with its token and CA files), then the in-cluster
  // configuration when KUBERNETES_SERVICE_HOST is set; --no-kube turns it off.
  std::string kubeconfig;
  std::string kube_api;
  std::string kube_token_file;
  std::string kube_ca_file;
  bool no_kube = false;
  // How often the ConfigMap is written although nothing changed (MindCluster refreshes its UpdateTime every
  // minute). Not a flag: tests shorten it.
  std::chrono::milliseconds kube_refresh{60000};
  // Dynamic Resource Allocation (--dra): the node's chips go out through DRA instead of the Device Plugin
  // API: ResourceSlices of driver npu.ascend.huawei.com (dra_slices.h) and the kubelet's DRA plugin API
  // (dra_service.h) on sockets in these folders. Not both at once: two allocators would hand out the same
  // chip. Needs the API server.
  bool dra = false;
  std::string dra_registry_dir = "/var/lib/kubelet/plugins_registry";
  std::string dra_plugin_dir = "/var/lib/kubelet/plugins/npu.ascend.huawei.com";
  // vNPUs as DRA devices too (--dra-vnpu, needs --dra): each chip's vNPU templates published as
  // partitionable devices (shared counters: the cluster needs the DRAPartitionableDevices gate; without it
  // the chips alone are published, kube_publisher.h), created on the chip when a claim is prepared, with a
  // CDI spec of their own in dra_cdi_dir, and destroyed when it is unprepared (dra_service.h).
  bool dra_vnpu = false;
  std::string dra_cdi_dir = "/var/run/cdi";
};

// True when Allocate must remember the whole chips it hands out: dynamic vNPUs (a chip is never handed out
// both whole and as cores) and a scheduler (it is told which chips are in use).
bool tracks_whole_chips(const Config& c);

// $NODE_NAME when set and not empty, else the host name (gethostname).
std::string default_node_name();

// Checks combinations that cannot work (dynamic vNPU needs runtime mode; cdi mode has no vNPU names) and the
// scheduler settings (an http(s) URL, an absolute rank-table folder; http:// only to a loopback host unless
// insecure_scheduler_http; a CA file only with https://), and the API server's (--no-kube with none of the
// others; token and CA files only with --kube-api). Every failure is bad usage of the flags.
Status validate(const Config& c);

}  // namespace ascend::plugin
