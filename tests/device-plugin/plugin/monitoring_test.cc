// deploy/monitoring/ against what the plugin exports (issue 26): every metric name that the Prometheus
// scrape config, the alert rules and the Grafana dashboard query must be one that a running plugin's
// /metrics declares (its own ascend_* metrics with a chip, an Allocate and a scheduler call, and the NPU
// Exporter ones with every series present: a chip held by a pod, with power, HBM and two error codes). The scrape config must select the DaemonSet's port.
#include <gtest/gtest.h>
#include <httplib.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "ascend/plugin/metrics.h"
#include "ascend/plugin/npu_exporter.h"

namespace ascend::plugin {
namespace {

const std::string kDir = std::string(ASCEND_SOURCE_DIR) + "/deploy/monitoring/";

std::string read(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The names a running plugin's /metrics declares (# TYPE lines; a histogram's series names too).
std::set<std::string> exported() {
  Metrics metrics;
  NpuExporter::Sources s;
  s.host = [] {
    npu::DeviceSnapshot snap;
    npu::Chip c;
    c.name = "910B3";
    c.hbm_total_mb = 65536;
    snap.chips = {c};
    return snap;
  };
  s.telemetry = []() -> Result<std::vector<npu::ChipTelemetry>> {
    npu::ChipTelemetry t;
    t.power_w = 100;
    t.error_codes = {1, 2};
    return std::vector<npu::ChipTelemetry>{t};
  };
  s.holders = [] { return Attribution{{0, PodRef{"ns", "pod", "c"}}}; };
  // The plugin's own families show once they have a series: one chip, one Allocate, one scheduler call.
  metrics.update_chips(s.host());
  metrics.observe_allocate("huawei.com/Ascend910", std::chrono::milliseconds(1), false);
  metrics.observe_scheduler_call("inventory", false);
  metrics.attach(std::make_shared<NpuExporter>(s));
  auto server = MetricsServer::start("127.0.0.1:0", metrics);
  EXPECT_TRUE(server.ok());
  if (!server) return {};
  httplib::Client client("127.0.0.1", (*server)->port());
  auto r = client.Get("/metrics");
  EXPECT_TRUE(r && r->status == 200);
  std::set<std::string> names;
  std::istringstream in(r ? r->body : "");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream w(line);
    std::string hash, type, name, kind;
    if (!(w >> hash >> type >> name >> kind) || hash != "#" || type != "TYPE") continue;
    names.insert(name);
    if (kind == "histogram") {
      for (const char* suffix : {"_bucket", "_sum", "_count"}) names.insert(name + suffix);
    }
  }
  return names;
}

// The metric names a PromQL expression reads: identifiers outside strings, label matchers, ranges and
// by/without lists that are not functions, keywords or numbers. Grafana's label_values(metric, label) reads
// its first argument.
std::set<std::string> metric_names(std::string expr) {
  static const std::set<std::string> kKeywords = {"and",         "or",   "unless",   "by",
                                                  "without",     "on",   "ignoring", "group_left",
                                                  "group_right", "bool", "offset"};
  expr = std::regex_replace(expr, std::regex(R"re("[^"]*")re"), " ");
  expr = std::regex_replace(expr, std::regex(R"(\{[^}]*\})"), " ");
  expr = std::regex_replace(expr, std::regex(R"(\[[^\]]*\])"), " ");
  expr = std::regex_replace(expr, std::regex(R"(\b(by|without)\s*\([^)]*\))"), " ");
  expr = std::regex_replace(expr, std::regex(R"(label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,[^)]*\))"),
                            " $1 ");
  std::set<std::string> out;
  const std::regex ident(R"([A-Za-z_:][A-Za-z0-9_:]*)");
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), ident); it != std::sregex_iterator(); ++it) {
    const std::string name = it->str();
    const auto end = static_cast<std::size_t>(it->position() + it->length());
    std::size_t next = expr.find_first_not_of(" \t\n", end);
    const bool call = next != std::string::npos && expr[next] == '(';
    const bool number_part =
        it->position() > 0 && std::isdigit(static_cast<unsigned char>(expr[it->position() - 1]));
    if (!call && !number_part && kKeywords.count(name) == 0) out.insert(name);
  }
  return out;
}

TEST(Monitoring, MetricNamesOfAPromQlExpression) {
  EXPECT_EQ(metric_names("sum by (namespace, pod_name) (container_npu_used_memory{node=~\"$node\"})"),
            std::set<std::string>{"container_npu_used_memory"});
  EXPECT_EQ(metric_names("machine_npu_nums < max_over_time(machine_npu_nums[1d])"),
            std::set<std::string>{"machine_npu_nums"});
  EXPECT_EQ(metric_names("count(a == 0) or vector(0)"), std::set<std::string>{"a"});
  EXPECT_EQ(metric_names("100 * x / y > 0.95"), (std::set<std::string>{"x", "y"}));
  EXPECT_EQ(metric_names("label_values(machine_npu_nums, node)"), std::set<std::string>{"machine_npu_nums"});
}

void collect_json(const nlohmann::json& j, std::vector<std::string>& exprs) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if ((it.key() == "expr" || it.key() == "definition") && it->is_string()) exprs.push_back(*it);
      if (it.key() == "query" && it->is_object() && it->contains("query")) exprs.push_back((*it)["query"]);
      collect_json(*it, exprs);
    }
  } else if (j.is_array()) {
    for (const auto& e : j) collect_json(e, exprs);
  }
}

TEST(Monitoring, EveryQueriedMetricIsOneThePluginExports) {
  const std::set<std::string> names = exported();
  ASSERT_TRUE(names.count("npu_chip_info_utilization") && names.count("ascend_npu_healthy")) << names.size();
  std::vector<std::pair<std::string, std::string>> exprs;  // (where, expression)
  const YAML::Node rules = YAML::LoadFile(kDir + "ascend-npu-alerts.yaml");
  for (const auto& g : rules["groups"]) {
    for (const auto& r : g["rules"])
      exprs.emplace_back(r["alert"].as<std::string>(), r["expr"].as<std::string>());
  }
  std::vector<std::string> dash;
  collect_json(nlohmann::json::parse(read(kDir + "ascend-npu-dashboard.json")), dash);
  for (const auto& e : dash) exprs.emplace_back("dashboard", e);
  ASSERT_GE(exprs.size(), 20U);
  std::set<std::string> used;
  for (const auto& [where, e] : exprs) {
    for (const auto& n : metric_names(e)) {
      used.insert(n);
      EXPECT_TRUE(names.count(n)) << where << ": " << n << " is not exported (in: " << e << ")";
    }
  }
  // The alerts the issue asks for are there.
  for (const char* n :
       {"npu_chip_info_health_status", "npu_chip_info_hbm_used_memory", "npu_chip_info_temperature",
        "npu_chip_info_link_status", "container_npu_utilization"}) {
    EXPECT_TRUE(used.count(n)) << n;
  }
}

TEST(Monitoring, TheScrapeConfigSelectsTheDaemonSetsMetricsPortAndLoadsTheRules) {
  const YAML::Node cfg = YAML::LoadFile(kDir + "prometheus-scrape.yaml");
  ASSERT_EQ(cfg["rule_files"].size(), 1U);
  EXPECT_TRUE(std::ifstream(kDir + cfg["rule_files"][0].as<std::string>()).good());
  const YAML::Node job = cfg["scrape_configs"][0];
  EXPECT_EQ(job["metrics_path"].as<std::string>(), "/metrics");
  std::string port_name;
  std::string app;
  for (const auto& r : job["relabel_configs"]) {
    const std::string src = r["source_labels"][0].as<std::string>();
    if (src == "__meta_kubernetes_pod_container_port_name") port_name = r["regex"].as<std::string>();
    if (src == "__meta_kubernetes_pod_label_app_kubernetes_io_name") app = r["regex"].as<std::string>();
  }
  bool found = false;
  for (const auto& doc : YAML::LoadAllFromFile(std::string(ASCEND_SOURCE_DIR) +
                                               "/deploy/kubernetes/ascend-device-plugin.yaml")) {
    if (!doc["kind"] || doc["kind"].as<std::string>() != "DaemonSet") continue;
    EXPECT_EQ(doc["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"].as<std::string>(), app);
    for (const auto& c : doc["spec"]["template"]["spec"]["containers"]) {
      for (const auto& p : c["ports"]) found = found || p["name"].as<std::string>() == port_name;
    }
  }
  EXPECT_TRUE(found) << "the DaemonSet has no port named " << port_name;
}

}  // namespace
}  // namespace ascend::plugin
