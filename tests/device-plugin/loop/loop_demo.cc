// The demo's Kubernetes loop, printed for a person: four emulated Atlas 800T A2 nodes, a device plugin on
// each reporting to one `ascend-scheduler serve`, and a 4-pod TP 4 x PP 2 x DP 2 job scheduled, admitted and
// started as kube-scheduler and the kubelets would do it. Needs root.
//
// usage: k8s_loop_demo DIR   (DIR: a scratch folder; the scheduler's log and state stay there)
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <set>

#include "loop.h"

namespace {

using nlohmann::json;

json job_pod(int index) {
  return {{"metadata",
           {{"name", "llama-" + std::to_string(index)},
            {"namespace", "default"},
            {"annotations",
             {{"ascend.huawei.com/job", "llama"},
              {"ascend.huawei.com/job-pods", "4"},
              {"ascend.huawei.com/parallel", "tp=4,pp=2,dp=2"}}}}},
          {"spec",
           {{"containers", json::array({{{"name", "trainer"},
                                         {"resources", {{"limits", {{"huawei.com/Ascend910", "4"}}}}}}})}}}};
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 || std::string(argv[1]) == "--help") {
    std::cerr << "usage: k8s_loop_demo DIR  (needs root; DIR is a scratch folder)\n";
    return argc == 2 ? 0 : 2;
  }
  if (::geteuid() != 0) {
    std::cerr << "k8s_loop_demo: needs root (device nodes, runc)\n";
    return 1;
  }
  ascend::loop::Loop loop(argv[1], 4);
  if (!loop.error().empty()) {
    std::cerr << "k8s_loop_demo: " << loop.error() << "\n";
    return 1;
  }
  std::printf(
      "4 emulated nodes (node-0..3, two per leaf switch), a device plugin on each, and\n"
      "ascend-scheduler serve: the plugins report to %s (dashboard: open it in a browser),\n"
      "kube-scheduler's verbs go to %s\n\n",
      loop.scheduler_url().c_str(), loop.extender_url().c_str());
  std::printf("kube-scheduler, for each pod of job llama (16 NPUs: TP 4 x PP 2 x DP 2, 4 pods of 4):\n");
  std::vector<std::string> node_of;
  for (int i = 0; i < 4; ++i) {
    auto s = loop.schedule(job_pod(i));
    if (s.node.empty()) {
      std::printf("  llama-%d: no node: %s\n", i, s.filter.dump().c_str());
      return 1;
    }
    std::string why = s.filter["FailedAndUnresolvableNodes"].empty()
                          ? ""
                          : s.filter["FailedAndUnresolvableNodes"].begin().value().get<std::string>();
    std::printf("  llama-%d  filter -> %s   (others: \"%s\")   bind %s\n", i, s.node.c_str(), why.c_str(),
                s.bind_error.empty() ? "ok" : s.bind_error.c_str());
    node_of.push_back(s.node);
  }
  json placement = loop.get("/v1/jobs/default/llama/placement");
  std::printf(
      "  the whole job was placed at the first filter: TP groups outside HCCS: %d, comm. cost %.3f "
      "s/step\n\n",
      placement["tp_groups_outside_hccs"].get<int>(), placement["cost"]["total"].get<double>());
  std::printf(
      "each node's kubelet: GetPreferredAllocation, Allocate, then the container through "
      "ascend-docker-runtime and runc:\n");
  int rc = 0;
  for (int i = 0; i < 4; ++i) {
    const std::string& node = node_of[static_cast<std::size_t>(i)];
    auto a = loop.admit(node, 4);
    if (!a.ok) {
      std::printf("  llama-%d on %s: admission failed: %s\n", i, node.c_str(), a.error.c_str());
      rc = 1;
      continue;
    }
    auto c = loop.start(node, a.response, "llama" + std::to_string(i));
    std::set<int> smi = ascend::hook::testing::smi_ids(c.probe.smi);
    std::string seen;
    for (int id : smi) seen += (seen.empty() ? "" : ",") + std::to_string(id);
    json rt = json::parse(c.ranktable, nullptr, false);
    std::string ranks;
    if (rt.is_object()) {
      for (const auto& srv : rt["server_list"]) {
        if (srv["server_id"] != node) continue;
        for (const auto& d : srv["device"]) {
          if (smi.count(std::stoi(d["device_id"].get<std::string>())) == 0) continue;
          ranks += " " + d["device_id"].get<std::string>() + "->" + d["rank_id"].get<std::string>();
        }
      }
    }
    std::printf("  llama-%d on %s: preferred %s\n", i, node.c_str(), join(a.preferred).c_str());
    std::printf(
        "      container: npu-smi sees NPUs %s; RANK_START=%s NODE_RANK=%s NPROC_PER_NODE=%s WORLD_SIZE=%s\n",
        seen.c_str(), c.env["RANK_START"].c_str(), c.env["NODE_RANK"].c_str(),
        c.env["NPROC_PER_NODE"].c_str(), c.env["WORLD_SIZE"].c_str());
    std::printf("      /etc/ascend/hccl.json: %s servers; its entries for these chips (device->rank):%s\n",
                rt.is_object() ? rt["server_count"].get<std::string>().c_str() : "?", ranks.c_str());
    if (c.output.exit_code != 0) {
      std::printf("      the container failed: %s\n", c.output.err.c_str());
      rc = 1;
    }
  }
  json view = loop.get("/v1/cluster");
  std::printf("\nthe scheduler now: %d chips free, %d used; job llama: %d of 4 pods running\n",
              view["chips"]["free"].get<int>(), view["chips"]["used"].get<int>(),
              view["jobs"][0]["allocated"].get<int>());
  return rc;
}
