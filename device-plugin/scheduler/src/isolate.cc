// ascend-scheduler isolate [--clear] NODE/CHIP...: an operator takes a chip out of service, or puts an
// isolated one back, through the node's device ConfigMap (`ManuallySeparateNPU`, MindCluster's key, which the
// device plugin reads back and follows: docs/device-plugin.md "Health and graded faults"). Each node's
// ConfigMap is changed with its resourceVersion as precondition (a concurrent write by the plugin is read
// again, never overwritten).
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "ascend/common/kube_client.h"
#include "ascend/deviceinfo/deviceinfo.h"
#include "ascend/scheduler/commands.h"
#include "ascend/scheduler/pod.h"

namespace ascend::scheduler {

namespace {

// "node-1/3" -> (node-1, 3); EINVAL naming what is wrong.
Result<std::pair<std::string, int>> parse_target(const std::string& t) {
  auto slash = t.rfind('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == t.size())
    return Error::invalid("'" + t + "' is not NODE/CHIP (e.g. node-1/3: chip 3 of node node-1)");
  std::string node = t.substr(0, slash);
  ASCEND_CHECK(check_dns1123_subdomain(node, "node", 253), "'" + t + "'");
  const std::string chip = t.substr(slash + 1);
  if (chip.size() > 4 || !std::all_of(chip.begin(), chip.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return Error::invalid("'" + t + "': the chip is its physical id, a number 0-" +
                          std::to_string(deviceinfo::kMaxPhyId));
  int phy = std::stoi(chip);
  if (phy > deviceinfo::kMaxPhyId)
    return Error::invalid("'" + t + "': no chip id is above " + std::to_string(deviceinfo::kMaxPhyId));
  return std::pair{node, phy};
}

// The merge patch that isolates (or clears) `chips` in one node's device ConfigMap; nullopt when it says so
// already. EINVAL: a chip the node's device plugin does not report.
Result<std::optional<nlohmann::json>> isolation_patch(const nlohmann::json& cm, const std::set<int>& chips,
                                                      bool clear, std::string* now_value) {
  ASCEND_ASSIGN(auto d, deviceinfo::from_configmap(cm), "");
  std::set<int> known(d.healthy.begin(), d.healthy.end());
  known.insert(d.unhealthy.begin(), d.unhealthy.end());
  known.insert(d.network_unhealthy.begin(), d.network_unhealthy.end());
  known.insert(d.manually_separated.begin(), d.manually_separated.end());
  for (int c : chips) {
    if (known.count(c) == 0) {
      std::vector<int> all(known.begin(), known.end());
      return Error::invalid(fmt::format("node {} has no chip {} (its device plugin reports chips {})", d.node,
                                        c, fmt::join(all, ",")));
    }
  }
  std::set<int> listed(d.manually_separated.begin(), d.manually_separated.end());
  std::set<int> want = listed;
  for (int c : chips) {
    if (clear) {
      want.erase(c);
    } else {
      want.insert(c);
    }
  }
  *now_value = deviceinfo::manually_separated_value(d.resource, {want.begin(), want.end()});
  if (want == listed) return std::optional<nlohmann::json>{};
  return std::optional<nlohmann::json>{
      nlohmann::json{{"data", {{deviceinfo::kManuallySeparateKey, *now_value}}}}};
}

}  // namespace

int run_isolate(const IsolateOptions& o, std::ostream& out, std::ostream& err) {
  std::map<std::string, std::set<int>> by_node;
  for (const auto& t : o.targets) {
    auto target = parse_target(t);
    if (!target.ok()) {
      err << "ascend-scheduler isolate: " << target.error().message() << "\n";
      return kExitBadInput;
    }
    by_node[target->first].insert(target->second);
  }
  auto cfg = kube::resolve_config({o.kubeconfig, o.kube_api, o.kube_token_file, o.kube_ca_file, true});
  if (!cfg.ok() || !*cfg) {
    err << "ascend-scheduler isolate: "
        << (cfg.ok() ? std::string("no API server: give --kubeconfig or --kube-api (or run in a pod)")
                     : cfg.error().message())
        << "\n";
    return kExitBadInput;
  }
  kube::Client api(std::move(**cfg));
  int rc = kExitOk;
  for (const auto& entry : by_node) {
    const std::string& node = entry.first;
    const std::set<int>& chips = entry.second;
    const std::string path =
        kube::path_of("v1", "configmaps", deviceinfo::kNamespace, deviceinfo::configmap_name(node));
    std::string value;
    Error bad_input(0, "");
    auto r = api.update(path, [&](const nlohmann::json& cm) -> std::optional<nlohmann::json> {
      auto p = isolation_patch(cm, chips, o.clear, &value);
      if (!p.ok()) {
        bad_input = p.error();
        return std::nullopt;
      }
      return *p;
    });
    if (bad_input.code() != 0) {
      err << "ascend-scheduler isolate: " << bad_input.message() << "\n";
      rc = std::max(rc, kExitBadInput);
      continue;
    }
    if (!r.ok()) {
      if (r.error().code() == ENOENT) {
        err << "ascend-scheduler isolate: the API server has no " << deviceinfo::kNamespace << "/"
            << deviceinfo::configmap_name(node) << ": is " << node
            << " a node with an Ascend device plugin (the name as kubectl get nodes shows it)?\n";
        rc = std::max(rc, kExitBadInput);
      } else {
        err << "ascend-scheduler isolate: " << node << ": " << r.error().message() << "\n";
        rc = std::max(rc, kExitIo);
      }
      continue;
    }
    std::vector<int> list(chips.begin(), chips.end());
    out << fmt::format("{}: chips {} {}; {} is now \"{}\"\n", node, fmt::join(list, ","),
                       o.clear ? "cleared (back in service once their faults are gone)" : "isolated",
                       deviceinfo::kManuallySeparateKey, value);
  }
  return rc;
}

}  // namespace ascend::scheduler
