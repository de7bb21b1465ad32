#include "ascend/topology/ranktable.h"

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "ascend/npu/host_model.h"

namespace ascend::topology {

using nlohmann::json;
using nlohmann::ordered_json;

ordered_json rank_table(const Cluster& c, const Placement& p) {
  bool a3 = false;
  for (const auto& ch : p.chips) a3 = a3 || c.type_of(ch.node).family == npu::Family::k910_93;
  // Servers in order of their first rank; ranks inside a server in rank order.
  std::vector<int> servers;
  std::map<int, std::vector<int>> ranks_of;
  for (std::size_t r = 0; r < p.chips.size(); ++r) {
    int node = p.chips[r].node;
    auto& list = ranks_of[node];
    if (list.empty()) servers.push_back(node);
    list.push_back(static_cast<int>(r));
  }
  // Position of each node inside its spine (super pod), in cluster order.
  std::map<int, int> pos_in_pod;
  if (a3) {
    std::map<int, int> next;
    for (std::size_t n = 0; n < c.nodes.size(); ++n)
      pos_in_pod[static_cast<int>(n)] = next[c.nodes[n].spine]++;
  }
  ordered_json list = ordered_json::array();
  std::vector<int> pods_in_order;
  std::map<int, std::vector<int>> pod_servers;
  for (int node : servers) {
    const NodeType& t = c.type_of(node);
    ordered_json devices = ordered_json::array();
    for (int r : ranks_of[node]) {
      int phy = t.phy[static_cast<std::size_t>(p.chips[static_cast<std::size_t>(r)].slot)];
      ordered_json d = {{"device_id", std::to_string(phy)}, {"device_ip", npu::device_ip(node, phy)}};
      if (a3) d["super_device_id"] = std::to_string(pos_in_pod[node] * t.size + phy);
      d["rank_id"] = std::to_string(r);
      devices.push_back(std::move(d));
    }
    list.push_back(
        {{"server_id", c.nodes[static_cast<std::size_t>(node)].name}, {"device", std::move(devices)}});
    int spine = c.nodes[static_cast<std::size_t>(node)].spine;
    if (pod_servers[spine].empty()) pods_in_order.push_back(spine);
    pod_servers[spine].push_back(node);
  }
  ordered_json out = {{"status", "completed"},
                      {"version", a3 ? "1.2" : "1.0"},
                      {"server_count", std::to_string(servers.size())},
                      {"server_list", std::move(list)}};
  if (a3) {
    ordered_json pods = ordered_json::array();
    for (int spine : pods_in_order) {
      ordered_json members = ordered_json::array();
      for (int node : pod_servers[spine])
        members.push_back({{"server_id", c.nodes[static_cast<std::size_t>(node)].name}});
      pods.push_back({{"super_pod_id", std::to_string(spine)}, {"server_list", std::move(members)}});
    }
    out["super_pod_list"] = std::move(pods);
  }
  return out;
}

}  // namespace ascend::topology
