// The Kubernetes manifests of deploy/kubernetes parse, and the parts that must agree do: the scheduler
// configuration's extender entry, the extender's command line, and the sample job's annotations (read by the
// extender's own pod reader, so a typo in an annotation fails here).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <map>

#include "ascend/common/yaml_json.h"
#include "ascend/scheduler/pod.h"

namespace ascend::scheduler {
namespace {

using nlohmann::json;

std::vector<json> load_all(const std::string& name) {
  std::vector<json> docs;
  for (const auto& d : YAML::LoadAllFromFile(std::string(ASCEND_SOURCE_DIR) + "/deploy/kubernetes/" + name)) {
    docs.push_back(ascend::yaml_to_json(d));
  }
  return docs;
}

json find_kind(const std::vector<json>& docs, const std::string& kind, const std::string& name) {
  for (const auto& d : docs) {
    if (d.value("kind", "") == kind && d["metadata"].value("name", "") == name) return d;
  }
  ADD_FAILURE() << "no " << kind << " " << name;
  return json::object();
}

TEST(Deploy, TheSchedulerConfigurationCallsTheExtenderForEveryVerb) {
  auto docs = load_all("ascend-scheduler.yaml");
  json cm = find_kind(docs, "ConfigMap", "ascend-scheduler-config");
  json cfg = ascend::yaml_to_json(YAML::Load(cm["data"]["scheduler-config.yaml"].get<std::string>()));
  EXPECT_EQ(cfg["kind"], "KubeSchedulerConfiguration");
  EXPECT_EQ(cfg["apiVersion"], "kubescheduler.config.k8s.io/v1");
  ASSERT_EQ(cfg["extenders"].size(), 1U);
  const json& e = cfg["extenders"][0];
  EXPECT_EQ(e["urlPrefix"], "http://127.0.0.1:8889") << "the extender's loopback listener";
  EXPECT_EQ(e["filterVerb"], "filter");
  EXPECT_EQ(e["prioritizeVerb"], "prioritize");
  EXPECT_EQ(e["bindVerb"], "bind");
  EXPECT_EQ(e["nodeCacheCapable"], true);
  EXPECT_GT(e["weight"].get<int>(), 0);
  // Every pod of the profile reaches the extender: a job pod whose chips come through DRA ResourceClaims
  // names no resource kube-scheduler could match managedResources with.
  EXPECT_FALSE(e.contains("managedResources")) << e.dump();
  EXPECT_EQ(cfg["profiles"][0]["schedulerName"], "ascend-scheduler");

  json dep = find_kind(docs, "Deployment", "ascend-scheduler");
  json extender;
  for (const auto& c : dep["spec"]["template"]["spec"]["containers"]) {
    if (c["name"] == "extender") extender = c;
  }
  ASSERT_TRUE(extender.is_object());
  std::vector<std::string> cmd = extender["command"];
  EXPECT_EQ(cmd[0], "ascend-scheduler");
  EXPECT_EQ(cmd[1], "serve");
  auto has = [&](const std::string& arg) { return std::find(cmd.begin(), cmd.end(), arg) != cmd.end(); };
  EXPECT_TRUE(has("--extender-listen=127.0.0.1:8889")) << "the port urlPrefix names, on loopback";
  EXPECT_TRUE(has("--listen=0.0.0.0:8888")) << "the device plugins' listener, behind the Service";
  EXPECT_TRUE(has("--token-file=/etc/ascend-scheduler-token/token"));
  EXPECT_TRUE(has("--tls-cert=/etc/ascend-scheduler-tls/tls.crt") &&
              has("--tls-key=/etc/ascend-scheduler-tls/tls.key"))
      << "the plugins' channel is HTTPS";
  for (const auto& a : cmd) EXPECT_EQ(a.find("--extender-listen=0.0.0.0"), std::string::npos) << a;
  bool mounted = false;
  for (const auto& m : extender["volumeMounts"]) mounted |= m["mountPath"] == "/etc/ascend-scheduler-tls";
  EXPECT_TRUE(mounted);
  EXPECT_EQ(extender["readinessProbe"]["httpGet"]["path"], "/readyz");
  EXPECT_EQ(extender["readinessProbe"]["httpGet"]["scheme"], "HTTPS");
  EXPECT_EQ(extender["livenessProbe"]["httpGet"]["path"], "/healthz");
  json svc = find_kind(docs, "Service", "ascend-scheduler");
  EXPECT_EQ(svc["spec"]["ports"][0]["port"], 8888);
  EXPECT_EQ(svc["spec"]["ports"][0]["targetPort"], 8888) << "--listen's port, never the extender's";
  json cluster_cm = find_kind(docs, "ConfigMap", "ascend-scheduler-cluster");
  EXPECT_TRUE(YAML::Load(cluster_cm["data"]["cluster.yaml"].get<std::string>())["nodes"].IsSequence());
}

TEST(Deploy, TheSampleJobIsAFourPodJobTheExtenderUnderstands) {
  auto docs = load_all("training-job.yaml");
  json job = find_kind(docs, "Job", "llama-pretrain");
  json pod = job["spec"]["template"];
  pod["metadata"]["name"] = "llama-pretrain-2-x7k2p";
  pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] =
      "2";  // what the Job controller adds
  auto p = read_pod(pod);
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_TRUE(p->job.has_value()) << p->job_error;
  EXPECT_EQ(p->job_error, "");
  EXPECT_EQ(p->index, 2);
  EXPECT_EQ(p->job->pods, 4);
  EXPECT_EQ(p->job->pods, job["spec"]["completions"].get<int>());
  EXPECT_EQ(p->job->tp * p->job->pp * p->job->dp, p->job->pods * p->chips);
  EXPECT_EQ(p->resource, kResource910);
  EXPECT_EQ(pod["spec"]["schedulerName"], "ascend-scheduler");
  // Chip-fault recovery (issue 23): pod recovery, and an eviction (the pod's DisruptionTarget condition, as
  // the Eviction API sets it) not counted against backoffLimit by the Job controller.
  EXPECT_EQ(p->job->recovery, "pod");
  EXPECT_EQ(p->job->max_restarts, 3);
  const json& rule = job["spec"]["podFailurePolicy"]["rules"][0];
  EXPECT_EQ(rule["action"], "Ignore");
  EXPECT_EQ(rule["onPodConditions"][0]["type"], "DisruptionTarget");
  EXPECT_EQ(pod["spec"]["restartPolicy"], "Never") << "podFailurePolicy requires it";
}

}  // namespace
}  // namespace ascend::scheduler
