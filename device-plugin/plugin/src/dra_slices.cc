#include "ascend/plugin/dra_slices.h"

#include <algorithm>
#include <charconv>

namespace ascend::plugin::dra {

using nlohmann::json;

namespace {

std::string label_of(const json& node, const char* key) {
  const json* labels = nullptr;
  if (node.is_object() && node.contains("metadata") && node["metadata"].is_object() &&
      node["metadata"].contains("labels") && node["metadata"]["labels"].is_object())
    labels = &node["metadata"]["labels"];
  if (labels == nullptr) return "";
  auto it = labels->find(key);
  return it != labels->end() && it->is_string() ? it->get<std::string>() : "";
}

std::string meta_string(const json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains("metadata") || !obj["metadata"].is_object()) return "";
  auto it = obj["metadata"].find(key);
  return it != obj["metadata"].end() && it->is_string() ? it->get<std::string>() : "";
}

// A quantity in the API server's canonical form (it answers "64Gi" for "65536Mi"): the slices compare
// equal to what the server lists.
std::string mebibytes(long long mb) {
  if (mb > 0 && mb % (1024LL * 1024) == 0) return std::to_string(mb / (1024LL * 1024)) + "Ti";
  if (mb > 0 && mb % 1024 == 0) return std::to_string(mb / 1024) + "Gi";
  return std::to_string(mb) + "Mi";
}

json str(const std::string& v) {
  return {{"string", v}};
}
json num(long long v) {
  return {{"int", v}};
}

// What one device says, for comparison with the API server's copy (which may add fields of its own).
json device_key(const json& d) {
  json k = json::object();
  for (const char* f : {"name", "attributes", "capacity"}) {
    if (d.is_object() && d.contains(f)) k[f] = d[f];
  }
  return k;
}

}  // namespace

SliceNode slice_node(const json& node) {
  return {meta_string(node, "name"), meta_string(node, "uid"), label_of(node, kLeafLabel),
          label_of(node, kSpineLabel)};
}

std::string device_name(int phy) {
  return "npu-" + std::to_string(phy);
}

Result<int> phy_of_device(std::string_view device) {
  constexpr std::string_view kPrefix = "npu-";
  const auto bad = [&] {
    return Error::invalid("device \"" + std::string(device.substr(0, 64)) + "\" is not one of driver " +
                          kDriver + "'s chips (npu-<phy id>)");
  };
  if (!device.starts_with(kPrefix) || device.size() == kPrefix.size() || device.size() > kPrefix.size() + 4)
    return bad();
  const auto digits = device.substr(kPrefix.size());
  if (digits[0] < '0' || digits[0] > '9') return bad();     // from_chars would take "-1"
  if (digits.size() > 1 && digits[0] == '0') return bad();  // "npu-03" is not the name we publish
  int phy = -1;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), phy);
  if (ec != std::errc() || end != digits.data() + digits.size()) return bad();
  return phy;
}

std::string slice_name(const std::string& node, std::size_t index) {
  return node + "-" + kDriver + "-" + std::to_string(index);
}

json chip_device(const npu::DeviceSnapshot& host, const npu::Chip& c, bool healthy, const SliceNode& node) {
  json attrs = {
      {"model", str(c.name)},
      {"family", str(std::string(npu::to_string(host.family)))},
      {"phyId", num(c.phy_id)},
      {"logicId", num(c.logic_id)},
      {"cardId", num(c.card_id)},
      {"chipIndex", num(c.chip_index)},
      {"aicoreCount", num(c.aicore_count)},
      {"hbmMiB", num(c.hbm_total_mb)},
      {"numaNode", num(c.numa_node)},
      {"healthy", {{"bool", healthy}}},
  };
  // Optional facts: absent rather than empty, so that a CEL test on them is false, not "".
  if (!host.driver_version.empty()) attrs["driverVersion"] = str(host.driver_version);
  if (c.hccs_domain >= 0) attrs["hccsDomain"] = num(c.hccs_domain);
  if (!c.bus_id.empty()) attrs["pcieBus"] = str(c.bus_id);
  if (!c.device_ip.empty()) attrs["deviceIp"] = str(c.device_ip);
  if (!node.leaf.empty()) attrs["leaf"] = str(node.leaf);
  if (!node.spine.empty()) attrs["spine"] = str(node.spine);
  json capacity = json::object();
  if (c.aicore_count > 0) capacity["aicore"] = {{"value", std::to_string(c.aicore_count)}};
  const long long memory = c.hbm_total_mb > 0 ? c.hbm_total_mb : c.mem_total_mb;  // 310P: on-chip DDR
  if (memory > 0) capacity["memory"] = {{"value", mebibytes(memory)}};
  json d = {{"name", device_name(c.phy_id)}, {"attributes", std::move(attrs)}};
  if (!capacity.empty()) d["capacity"] = std::move(capacity);
  return d;
}

std::vector<json> resource_slices(const npu::DeviceSnapshot& host, const std::set<int>& unusable,
                                  const SliceNode& node, std::int64_t generation) {
  std::vector<json> devices;
  for (const auto& c : host.chips)
    devices.push_back(chip_device(host, c, unusable.count(c.phy_id) == 0, node));
  const std::size_t count =
      std::max<std::size_t>(1, (devices.size() + kMaxDevicesPerSlice - 1) / kMaxDevicesPerSlice);
  std::vector<json> out;
  for (std::size_t i = 0; i < count; ++i) {
    json meta = {{"name", slice_name(node.name, i)}};
    if (!node.uid.empty()) {
      meta["ownerReferences"] = json::array({{{"apiVersion", "v1"},
                                              {"kind", "Node"},
                                              {"name", node.name},
                                              {"uid", node.uid},
                                              {"controller", true}}});
    }
    json part = json::array();
    for (std::size_t k = i * kMaxDevicesPerSlice; k < std::min(devices.size(), (i + 1) * kMaxDevicesPerSlice);
         ++k)
      part.push_back(std::move(devices[k]));
    out.push_back({{"apiVersion", kApiVersion},
                   {"kind", "ResourceSlice"},
                   {"metadata", std::move(meta)},
                   {"spec",
                    {{"driver", kDriver},
                     {"nodeName", node.name},
                     {"pool",
                      {{"name", node.name},
                       {"generation", generation},
                       {"resourceSliceCount", static_cast<std::int64_t>(count)}}},
                     {"devices", std::move(part)}}}});
  }
  return out;
}

bool slices_match(const std::vector<json>& have, const std::vector<json>& want) {
  if (have.size() != want.size()) return false;
  const auto key = [](const json& s) {
    json k = {{"name", meta_string(s, "name")}};
    const json spec = s.is_object() && s.contains("spec") ? s["spec"] : json::object();
    for (const char* f : {"driver", "nodeName"}) k[f] = spec.contains(f) ? spec[f] : json();
    k["pool"] = spec.contains("pool") && spec["pool"].is_object() && spec["pool"].contains("name")
                    ? spec["pool"]["name"]
                    : json();
    json devices = json::array();
    if (spec.contains("devices") && spec["devices"].is_array()) {
      for (const auto& d : spec["devices"]) devices.push_back(device_key(d));
    }
    k["devices"] = std::move(devices);
    return k;
  };
  std::vector<json> a, b;
  for (const auto& s : have) a.push_back(key(s));
  for (const auto& s : want) b.push_back(key(s));
  const auto by_name = [](const json& x, const json& y) { return x["name"] < y["name"]; };
  std::sort(a.begin(), a.end(), by_name);
  std::sort(b.begin(), b.end(), by_name);
  return a == b;
}

}  // namespace ascend::plugin::dra
