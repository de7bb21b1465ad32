// Test support for the `kube` tests and the kube benchmark: a real Kubernetes cluster on this machine
// (tests/kube/cluster: etcd, kube-apiserver, kube-controller-manager, containerd, a kubelet as the node, and
// kube-scheduler with the configuration a test gives), kubectl against it, and waiting for a condition.
// Not thread-safe (tests are single-threaded). Root only.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "support.h"

namespace ascend::kube::testing {

using hook::testing::Output;

// The folder of the pinned Kubernetes binaries (tests/kube/build-binaries --check), or "" when they are not
// built.
std::string kube_bin_dir();

// The project's source folder and a script of tests/kube.
std::string source_dir();

// Calls `f` every `every` until it returns true or `timeout` has passed; returns its last answer.
bool wait_until(const std::function<bool()>& f, std::chrono::milliseconds timeout,
                std::chrono::milliseconds every = std::chrono::milliseconds(200));

class Cluster {
 public:
  // Starts the cluster in `dir` (tests/kube/cluster start). `runtime_config`: the config file of
  // ascend-docker-runtime for containerd's `ascend` handler ("" for none).
  Cluster(std::string dir, const std::string& runtime_config);
  ~Cluster();  // stops every daemon, whatever state they are in
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  const std::string& dir() const { return dir_; }
  std::string kubeconfig() const { return dir_ + "/kubeconfig"; }
  std::string ca_file() const { return dir_ + "/pki/ca.crt"; }
  std::string api_url() const { return "https://127.0.0.1:" + std::to_string(kApiPort); }
  static constexpr int kApiPort = 26443;  // tests/kube/cluster's api_port
  std::string node() const { return "kube-node-0"; }
  std::string bin(const std::string& name) const { return bin_ + "/" + name; }
  std::string log(const std::string& daemon) const;

  // kubectl with the admin kubeconfig; `input` goes to its stdin.
  Output kubectl(const std::vector<std::string>& args, const std::string& input = "") const;
  // `kubectl get ARGS -o json`, parsed (a discarded value when kubectl failed).
  nlohmann::json get(const std::vector<std::string>& args) const;
  // GET on the API server with the admin's client certificate, without a kubectl process (for timings);
  // a discarded value unless 200 with JSON.
  nlohmann::json api_get(const std::string& path) const;
  // An HTTPS client of the API server with the admin's client certificate.
  std::unique_ptr<httplib::SSLClient> api_client() const;
  // tests/kube/cluster COMMAND DIR ARGS...
  Output script(const std::string& command, const std::vector<std::string>& args = {}) const;

  // A kubeconfig for a bearer token (a service account's), written under the cluster's folder.
  std::string token_kubeconfig(const std::string& name, const std::string& token) const;

 private:
  std::string dir_;
  std::string bin_;
  bool ok_ = false;
  std::string error_;
};

constexpr const char* kResource = "huawei.com/Ascend910";
constexpr int kPluginsPort = 28888;  // serve --listen: the device plugins' reports (token)
// kube-scheduler calls the extender where deploy/'s KubeSchedulerConfiguration says.
constexpr const char* kExtenderListen = "127.0.0.1:8889";
// Nodes that exist only in the API, with a status the test bed keeps (as kwok's nodes).
const std::vector<std::string>& api_only_nodes();

// deploy/kubernetes/FILE.
std::string deploy(const std::string& file);

// A pod of the RuntimeClass `ascend` asking for `npus` whole chips and running `script` once, scheduled by
// `scheduler` (deploy/'s ascend-scheduler by default) onto `node` (kubernetes.io/hostname; "" for any).
nlohmann::json npu_pod(const std::string& name, int npus, const std::string& script,
                       const std::string& scheduler = "ascend-scheduler",
                       const std::string& node = "kube-node-0");

// A 4-pod Indexed Job placed as one gang (TP 4 x PP 2 x DP 2, 4 NPUs a pod, as ascend-scheduler's annotations
// say), its pods as npu_pod's on any node, running `script`.
nlohmann::json tp4pp2dp2_job(const std::string& name, const std::string& script,
                             const std::string& scheduler = "ascend-scheduler");

// What the kube tests and the kube benchmark run on: the cluster, kube-node-0's emulated Atlas 800T A2 host,
// deploy/'s objects applied (but the workloads, whose images cannot be pulled here), three API-only nodes,
// `ascend-scheduler serve` (its Bindings with the ascend-scheduler service account's token), kube-scheduler
// with deploy/'s configuration under that account, and the device plugin on the real kubelet.
class Testbed {
 public:
  Testbed();
  ~Testbed();  // stops our daemons and the cluster
  Testbed(const Testbed&) = delete;
  Testbed& operator=(const Testbed&) = delete;

  // Starts everything; "" or what failed.
  std::string start();

  Cluster& cluster() { return *cluster_; }
  const Cluster& cluster() const { return *cluster_; }
  std::string path(const std::string& rel) const;
  std::string host_root() const { return path("host"); }
  // The config file of ascend-docker-runtime on this node (its host root, mount lists).
  const std::string& runtime_config() const { return runtime_config_; }
  const std::string& applied() const { return applied_; }
  const std::string& token_file() const { return token_file_; }
  const std::string& scheduler_config() const { return scheduler_config_; }
  const std::string& scheduler_kubeconfig() const { return scheduler_kubeconfig_; }

  // ascend-scheduler serve (no state file: its records are in the API server).
  void start_serve();
  void stop_serve();
  void kill_serve();  // SIGKILL, as an OOM kill or a lost node
  int serve_pid() const { return serve_pid_; }
  bool serve_healthy() const;
  // /readyz of the replica whose --listen is on `port`: its cache is synced with the API server.
  bool serve_ready(int port = kPluginsPort) const;
  std::string serve_url() const;
  // Another replica (a second serve against the same API server; kube-scheduler calls only the one on
  // kExtenderListen): its pid. Stop it with ht::stop_process.
  int start_replica(int port, const std::string& extender_listen, const std::string& log) const;
  // GET with the token; a discarded value unless 200 with JSON.
  nlohmann::json scheduler_get(const std::string& path, int port = kPluginsPort) const;
  // POST with the token: the answer's JSON when 200, else {"status": N, "body": ...}.
  nlohmann::json scheduler_post(const std::string& path, const nlohmann::json& body,
                                int port = kPluginsPort) const;

  // Until the scheduler sees every chip of kube-node-0 free (the plugin reports a chip free about 10 s
  // after the kubelet stops listing its pod: a pod the extender refused meanwhile waits for kube-scheduler's
  // next retry, up to 5 minutes, so tests start each pod on a quiet node). False on a timeout.
  bool wait_real_node_free(std::chrono::milliseconds timeout = std::chrono::seconds(40)) const;

  // The device plugin of kube-node-0: it publishes its device ConfigMap and Node labels in the API server
  // (the ascend-device-plugin service account's token) and, with `scheduler_http`, reports to serve over
  // HTTP and asks it for allocations.
  void start_plugin(const std::vector<std::string>& extra = {}, bool scheduler_http = true);
  void stop_plugin();
  void pause_plugin();  // SIGSTOP: it holds its sockets and answers nothing
  void kill_plugin();   // SIGKILL, as an OOM kill
  bool plugin_running() const { return plugin_pid_ > 0; }

  // The node's capacity and allocatable of `resource` (-1: not there).
  std::pair<int, int> npus_of(const std::string& node, const std::string& resource = kResource) const;
  nlohmann::json pod(const std::string& name, const std::string& ns = "default") const;
  std::string phase_of(const std::string& name) const;
  // "reason: message" of the events about an object, one per line.
  std::string events_of(const std::string& name, const std::string& ns = "default") const;
  Output apply_json(const nlohmann::json& object) const;
  void force_delete(const std::string& kind, const std::string& name,
                    const std::string& ns = "default") const;
  // Creates (or re-creates) an API-only node: Ready, 8 NPUs.
  void put_api_only_node(const std::string& name) const;
  // Plays the device plugin of an API-only node: chips 0..7 but `in_use` are free, in the node's
  // allocatable (the API) and in its inventory report to the scheduler (PUT /v1/nodes/NAME). "" or what
  // failed.
  std::string set_api_only_node_in_use(const std::string& name, const std::vector<int>& in_use) const;
  // The end of every daemon's log.
  std::string logs_tail(std::size_t bytes) const;

 private:
  // The Authorization header of the plugins' token.
  httplib::Headers bearer() const;
  // Renews the API-only nodes' Leases in kube-node-lease every few seconds, as a kubelet does, so that the
  // node lifecycle controller keeps them Ready (kwok does the same for its nodes).
  void heartbeat();
  std::atomic<bool> stopping_{false};
  std::thread heartbeat_;

  std::unique_ptr<hook::testing::TempDir> tmp_;
  std::unique_ptr<hook::testing::EmulatedHost> host_;
  std::unique_ptr<Cluster> cluster_;
  std::string runtime_config_;
  std::string token_file_;         // the plugins' bearer token (serve --token-file)
  std::string sa_token_file_;      // the ascend-scheduler service account's token
  std::string plugin_token_file_;  // the ascend-device-plugin service account's token
  std::string cluster_file_;
  std::string scheduler_config_;  // kube-scheduler's, as deploy/'s ConfigMap holds it in the API
  std::string scheduler_kubeconfig_;
  std::string applied_;
  int serve_pid_ = -1;
  int plugin_pid_ = -1;
};

}  // namespace ascend::kube::testing
