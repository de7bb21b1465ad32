// The whole Kubernetes loop on one machine, with the real binaries: N emulated Atlas 800T A2 nodes (npu-sim
// roots with --node-index), one `ascend-device-plugin` per node (its own kubelet socket folder, reporting to
// the scheduler), one `ascend-scheduler serve`, and a driver that plays kube-scheduler (filter, prioritize,
// bind over HTTP) and each node's kubelet (ListAndWatch, GetPreferredAllocation and Allocate over gRPC, then
// the container through ascend-docker-runtime and runc, with the Allocate answer's env and mounts in its
// spec). Used by the end-to-end test and by the demo. Needs root (device nodes, runc).
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "fake_kubelet.h"
#include "support.h"

namespace ascend::loop {

struct Scheduled {
  std::string node;  // empty: no node passed
  nlohmann::json filter;
  nlohmann::json priorities;
  std::string bind_error;
};

struct Admitted {
  bool ok = false;
  std::string error;                 // why the kubelet's admission failed (the plugin's message)
  std::vector<std::string> offered;  // available device ids (healthy ones)
  std::vector<std::string> preferred;
  v1beta1::ContainerAllocateResponse response;
};

struct Started {
  hook::testing::Output output;
  hook::testing::Probe probe;
  std::string ranktable;                   // /etc/ascend/hccl.json as the container read it
  std::map<std::string, std::string> env;  // the job's launch variables the container saw
};

class Loop {
 public:
  // Lays out `nodes` hosts under `dir`, writes the cluster file (two nodes per leaf) and starts the scheduler
  // and the plugins. `error()` is non-empty when something could not start.
  Loop(std::string dir, int nodes);
  ~Loop();
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  const std::string& error() const { return error_; }
  const std::string& scheduler_url() const { return url_; }          // the plugins' listener
  const std::string& extender_url() const { return extender_url_; }  // kube-scheduler's
  std::string node_name(int i) const { return "node-" + std::to_string(i); }
  std::string host_root(int i) const;
  int node_count() const { return static_cast<int>(nodes_.size()); }

  // kube-scheduler: filter and prioritize over every node, bind to the best.
  Scheduled schedule(const nlohmann::json& pod);
  // The node's kubelet: the healthy devices from ListAndWatch, GetPreferredAllocation, then Allocate.
  Admitted admit(const std::string& node, int chips);
  // The kubelet starts the container: the Allocate answer's env and mounts go into the spec, and the engine
  // runs it with ascend-docker-runtime on that node's host.
  Started start(const std::string& node, const v1beta1::ContainerAllocateResponse& a,
                const std::string& name);

  nlohmann::json get(const std::string& path) const;
  int node_index(const std::string& node) const;
  // Waits until the plugin of `node` has told the scheduler about `unhealthy` unhealthy chips.
  bool wait_reported_unhealthy(const std::string& node, int unhealthy, int timeout_ms) const;

 private:
  struct Node {
    std::unique_ptr<hook::testing::EmulatedHost> host;
    std::unique_ptr<testing::FakeKubelet> kubelet;
    std::string dir;
    std::string hook_config;
    pid_t plugin = -1;
  };
  std::string dir_;
  std::string error_;
  std::string url_;
  std::string extender_url_;
  pid_t scheduler_ = -1;
  std::vector<Node> nodes_;
  std::unique_ptr<hook::testing::Runner> runc_;
  std::map<std::string, std::set<std::string>> held_;  // node -> device ids the kubelet handed out
  int bundles_ = 0;
};

// The container's script: the hook tests' probe, then the rank table and the launch variables.
std::string loop_script();

}  // namespace ascend::loop
