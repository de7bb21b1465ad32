// kube_bench (issue 28): what our extender costs in a real scheduling cycle. On the kube test bed
// (tests/kube/kube_support.h: real kube-apiserver, kube-scheduler, kube-controller-manager, a kubelet with
// containerd, the device plugin, ascend-scheduler serve):
//   1. pod created to Running on the real node, 1 NPU, through kube-scheduler with deploy/'s configuration
//      (our extender: filter, prioritize, bind), N pods one after the other;
//   2. the same through the default kube-scheduler alone (no extender; the plugin still allocates): the
//   floor;
//   3. a 4-pod Indexed Job (TP 4 x PP 2 x DP 2, 4 NPUs a pod, over the real node and three API-only nodes):
//      created to all four bound, with the extender and with the default scheduler alone.
// "Created" is when `kubectl apply` returned (the pod is in the API); the state is read from the API server
// every 20 ms. Prints p50 and p90 and the ratios to the floor.
//
//   kube_bench [--pods N] [--jobs M]     (default 30 pods, 5 jobs; root; tests/kube/build-binaries first)
// Exit codes: 0 measured, 1 the test bed or a pod failed, 2 usage or not runnable here.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "kube_support.h"

namespace {

namespace kt = ascend::kube::testing;
namespace ht = ascend::hook::testing;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

[[noreturn]] void fail(const kt::Testbed& tb, const std::string& what) {
  std::fprintf(stderr, "kube_bench: %s\n%s", what.c_str(), tb.logs_tail(3000).c_str());
  std::exit(1);
}

// Waits until the pod is gone from the API (the kubelet has let its chips go).
void wait_gone(const kt::Testbed& tb, const std::string& name) {
  kt::wait_until(
      [&] { return tb.cluster().api_get("/api/v1/namespaces/default/pods/" + name).is_discarded(); }, 60s,
      50ms);
}

std::vector<double> pods_to_running(kt::Testbed& tb, const std::string& tag, const std::string& scheduler,
                                    int n) {
  std::vector<double> out;
  for (int i = 0; i < n; ++i) {
    std::string name = tag + "-" + std::to_string(i);
    // Each pod on a quiet node: the last one's chips are free in the scheduler's view too (else the extender
    // refuses the pod and kube-scheduler retries only on a cluster event or after 5 minutes: issue 22).
    if (!tb.wait_real_node_free(60s)) fail(tb, "the real node's chips did not come free");
    auto a = tb.apply_json(kt::npu_pod(name, 1, "sleep 3600", scheduler));
    if (a.exit_code != 0) fail(tb, "kubectl apply " + name + ": " + a.err);
    auto t0 = Clock::now();
    bool running = kt::wait_until(
        [&] {
          json p = tb.cluster().api_get("/api/v1/namespaces/default/pods/" + name);
          return !p.is_discarded() && p["status"].value("phase", "") == "Running";
        },
        120s, 20ms);
    double ms = ms_since(t0);
    if (!running) fail(tb, name + " did not run: " + tb.events_of(name));
    out.push_back(ms);
    tb.force_delete("pod", name);
    wait_gone(tb, name);
  }
  return out;
}

std::vector<double> jobs_to_bound(kt::Testbed& tb, const std::string& tag, const std::string& scheduler,
                                  int n) {
  std::vector<double> out;
  for (int i = 0; i < n; ++i) {
    std::string name = tag + "-" + std::to_string(i);
    if (!tb.wait_real_node_free(60s)) fail(tb, "the real node's chips did not come free");
    auto a = tb.apply_json(kt::tp4pp2dp2_job(name, "sleep 3600", scheduler));
    if (a.exit_code != 0) fail(tb, "kubectl apply job " + name + ": " + a.err);
    auto t0 = Clock::now();
    json pods;
    bool bound = kt::wait_until(
        [&] {
          pods = tb.cluster().api_get("/api/v1/namespaces/default/pods?labelSelector=job-name%3D" + name);
          if (pods.is_discarded() || pods["items"].size() != 4) return false;
          return std::all_of(pods["items"].begin(), pods["items"].end(),
                             [](const json& p) { return !p["spec"].value("nodeName", "").empty(); });
        },
        120s, 20ms);
    double ms = ms_since(t0);
    if (!bound) fail(tb, "job " + name + " was not bound: " + (pods.is_discarded() ? "" : pods.dump()));
    out.push_back(ms);
    tb.cluster().kubectl({"delete", "job", name, "--cascade=orphan"});
    for (const auto& p : pods["items"]) {
      tb.force_delete("pod", p["metadata"]["name"]);
    }
    for (const auto& p : pods["items"]) wait_gone(tb, p["metadata"]["name"]);
  }
  return out;
}

void print(const char* what, const std::vector<double>& v) {
  std::printf("%-52s n=%-3zu p50 %8.1f ms  p90 %8.1f ms\n", what, v.size(), pct(v, 0.5), pct(v, 0.9));
}

}  // namespace

int main(int argc, char** argv) {
  int pods = 30;
  int jobs = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--pods" || a == "--jobs") && i + 1 < argc) {
      int v = std::atoi(argv[++i]);
      if (v < 1 || v > 1000) {
        std::fprintf(stderr, "kube_bench: %s takes 1..1000\n", a.c_str());
        return 2;
      }
      (a == "--pods" ? pods : jobs) = v;
    } else {
      std::fprintf(stderr, "usage: kube_bench [--pods N] [--jobs M]  (exit 0 measured, 1 failed, 2 usage)\n");
      return a == "-h" || a == "--help" ? 0 : 2;
    }
  }
  if (::geteuid() != 0) {
    std::fprintf(stderr, "kube_bench: needs root (a kubelet, containerd)\n");
    return 2;
  }
  if (kt::kube_bin_dir().empty()) {
    std::fprintf(stderr,
                 "kube_bench: the Kubernetes binaries are not built (run tests/kube/build-binaries)\n");
    return 2;
  }
  kt::Testbed tb;
  if (auto e = tb.start(); !e.empty()) fail(tb, e);

  // Warm-up: the first container start pays for the image's snapshot and the runtime's first exec.
  pods_to_running(tb, "warm", "ascend-scheduler", 2);
  auto ext = pods_to_running(tb, "ext", "ascend-scheduler", pods);
  auto ext_jobs = jobs_to_bound(tb, "ext-job", "ascend-scheduler", jobs);

  // The default kube-scheduler alone: the same binary, no extender.
  auto s = tb.cluster().script("stop-component", {"kube-scheduler"});
  if (s.exit_code != 0) fail(tb, "stopping kube-scheduler: " + s.err);
  std::string plain = tb.path("default-scheduler.yaml");
  ht::spit(plain,
           "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
           "leaderElection:\n  leaderElect: false\nprofiles:\n  - schedulerName: default-scheduler\n");
  s = tb.cluster().script("scheduler", {plain});
  if (s.exit_code != 0) fail(tb, "the default kube-scheduler: " + s.err + s.out);
  pods_to_running(tb, "warm-plain", "default-scheduler", 2);
  auto floor = pods_to_running(tb, "plain", "default-scheduler", pods);
  auto floor_jobs = jobs_to_bound(tb, "plain-job", "default-scheduler", jobs);

  print("pod created -> Running, kube-scheduler + our extender", ext);
  print("pod created -> Running, default kube-scheduler alone", floor);
  print("4-pod job created -> all bound, with our extender", ext_jobs);
  print("4-pod job created -> all bound, default scheduler", floor_jobs);
  std::printf("ratio (extender / default), pod to Running p50: %.3f\n", pct(ext, 0.5) / pct(floor, 0.5));
  std::printf("ratio (extender / default), job to bound p50:   %.3f\n",
              pct(ext_jobs, 0.5) / pct(floor_jobs, 0.5));
  return 0;
}
