// The format, as MindCluster documents and writes it (read, not copied):
// - MindCluster API reference, "Chip Resources: mindx-dl-deviceinfo-<nodename>" (DeviceInfoCfg's DeviceList
//   keys <resource>, -NetworkUnhealthy, -Unhealthy, -Recovering, -Fault and its fault fields; SuperPodID,
//   ServerIndex, CheckCode; ManuallySeparateNPU): https://gitcode.com/Ascend/mind-cluster/blob/master/docs/
//   en/scheduling/api/ascend_device_plugin.md, and https://www.hiascend.com/document/detail/zh/mindcluster/
//   60rc3/clustersched/usage/operations/mxdlug_com_008.html (a `kubectl describe cm` of one).
// - Ascend/mind-cluster component/ascend-device-plugin: pkg/common/types.go (NodeDeviceInfoCache{DeviceInfo
//   {DeviceList map[string]string, UpdateTime int64}, SuperPodID, ServerIndex, CheckCode}), pkg/common/
//   common.go MakeDataHash (CheckCode = hex(sha256(json.Marshal(DeviceInfo)))), pkg/kubeclient/kubeclient.go
//   WriteDeviceInfoDataIntoCM (kube-system, label mx-consumer-cim=true, keys DeviceInfoCfg and
//   ManuallySeparateNPU), pkg/device/ascendcommon.go getDeviceFaults (one fault entry per chip and kind,
//   codes upper-case hex joined by commas), pkg/common/constants.go (ChipNameLabel, servertype).
// - Ascend/mind-cluster component/ascend-common/api/label/consts.go: the node label keys (huawei.com/npu.*)
//   and the older ones still written beside them (node.kubernetes.io/npu.chip.name, servertype,
//   huawei.com/driver.version, accelerator=huawei-Ascend910).
#include "ascend/deviceinfo/deviceinfo.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <array>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace ascend::deviceinfo {
namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kNetworkUnhealthy = "-NetworkUnhealthy";
constexpr std::string_view kUnhealthy = "-Unhealthy";
constexpr std::string_view kRecovering = "-Recovering";
constexpr std::string_view kFault = "-Fault";
constexpr std::string_view kCardUnhealthy = "CardUnhealthy";
constexpr std::string_view kCardNetworkUnhealthy = "CardNetworkUnhealthy";
constexpr std::size_t kMaxCodeLength = 32;

std::string kind_of(std::string_view resource) {
  const auto slash = resource.rfind('/');
  return std::string(slash == std::string_view::npos ? resource : resource.substr(slash + 1));
}

// Go's encoding/json escapes <, > and & (and U+2028/U+2029) inside strings where nlohmann writes them as
// they are; outside strings none of them can appear, so replacing them in the whole text is exact. Other
// escapes agree (both write \n \r \t \b \f and \u00xx in lower case; Go before 1.22 wrote \b and \f as
// \u0008 and \u000c, which a device list never holds).
template <typename Json>
std::string go_marshal(const Json& j) {
  const std::string text = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else if (c == '\xE2' && i + 2 < text.size() && text[i + 1] == '\x80' &&
               (text[i + 2] == '\xA8' || text[i + 2] == '\xA9')) {
      out += text[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

std::string sha256_hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

std::string join_names(std::string_view resource, const std::vector<int>& phys) {
  std::string out;
  for (int p : phys) out.append(out.empty() ? "" : ",").append(chip_name(resource, p));
  return out;
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out.append(out.empty() ? "" : ",").append(p);
  return out;
}

std::vector<std::string> split(std::string_view s) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  std::size_t start = 0;
  while (true) {
    const auto comma = s.find(',', start);
    out.emplace_back(
        s.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

// The -Fault value: a JSON array (as a string) of MindCluster's DeviceFault, fields in its order.
std::string fault_list(std::string_view resource, const std::vector<ChipFault>& faults) {
  ojson arr = ojson::array();
  for (const auto& f : faults) {
    arr.push_back({{"fault_type", f.network ? kCardNetworkUnhealthy : kCardUnhealthy},
                   {"npu_name", chip_name(resource, f.phy_id)},
                   {"large_model_fault_level", f.level},
                   {"fault_level", f.level},
                   {"fault_handling", f.level},
                   {"fault_code", join(f.codes)}});
  }
  return go_marshal(arr);
}

std::map<std::string, std::string> device_list(const NodeDevices& d) {
  return {{d.resource, join_names(d.resource, d.healthy)},
          {d.resource + std::string(kNetworkUnhealthy), join_names(d.resource, d.network_unhealthy)},
          {d.resource + std::string(kUnhealthy), join_names(d.resource, d.unhealthy)},
          {d.resource + std::string(kRecovering), ""},
          {d.resource + std::string(kFault), fault_list(d.resource, d.faults)}};
}

// ---- reading ----

Result<int> parse_chip(std::string_view kind, std::string_view name) {
  const auto bad = [&] {
    return Error::invalid(fmt::format("chip name '{}' is not {}-<physical id>", name.substr(0, 64), kind));
  };
  if (name.size() <= kind.size() + 1 || name.substr(0, kind.size()) != kind || name[kind.size()] != '-')
    return bad();
  const auto digits = name.substr(kind.size() + 1);
  int id = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
  if (ec != std::errc() || end != digits.data() + digits.size() || id < 0 || id > kMaxPhyId) return bad();
  return id;
}

Result<std::vector<int>> parse_chips(std::string_view kind, std::string_view key, const std::string& list) {
  std::vector<int> out;
  for (const auto& name : split(list)) {
    if (out.size() > static_cast<std::size_t>(kMaxPhyId))
      return Error::invalid(fmt::format("{}: more than {} chips", key, kMaxPhyId + 1));
    ASCEND_ASSIGN(int id, parse_chip(kind, name), std::string(key));
    out.push_back(id);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool valid_code(std::string_view c) {
  return !c.empty() && c.size() <= kMaxCodeLength &&
         std::all_of(c.begin(), c.end(), [](unsigned char ch) { return std::isalnum(ch) != 0 || ch == '_'; });
}

const nlohmann::json* string_field(const nlohmann::json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? &*it : nullptr;
}

// One entry of the -Fault list; nullopt-like skip (ok, phy -1) for node-level and other kinds of faults.
Result<ChipFault> parse_fault(std::string_view kind, const nlohmann::json& e) {
  if (!e.is_object()) return Error::invalid("a fault entry is not an object");
  const auto* type = string_field(e, "fault_type");
  const auto* npu = string_field(e, "npu_name");
  const auto* codes = string_field(e, "fault_code");
  if (type == nullptr || npu == nullptr || codes == nullptr)
    return Error::invalid("a fault entry lacks fault_type, npu_name or fault_code (strings)");
  ChipFault f;
  f.phy_id = -1;
  const auto& t = type->get_ref<const std::string&>();
  if (t != kCardUnhealthy && t != kCardNetworkUnhealthy) return f;  // NodeUnhealthy, PublicFault, ...
  f.network = t == kCardNetworkUnhealthy;
  ASCEND_ASSIGN(f.phy_id, parse_chip(kind, npu->get_ref<const std::string&>()), "fault entry");
  for (auto& c : split(codes->get_ref<const std::string&>())) {
    if (!valid_code(c)) return Error::invalid(fmt::format("fault code '{}' is not a code", c.substr(0, 64)));
    f.codes.push_back(std::move(c));
  }
  const auto* level = string_field(e, "fault_handling");
  if (level == nullptr) level = string_field(e, "fault_level");
  f.level = level != nullptr ? level->get<std::string>() : "";
  return f;
}

Result<std::vector<ChipFault>> parse_faults(std::string_view kind, const std::string& text) {
  std::vector<ChipFault> out;
  if (text.empty()) return out;
  const auto arr = nlohmann::json::parse(text, nullptr, false);
  if (arr.is_null()) return out;  // Go writes a nil list as null
  if (!arr.is_array()) return Error::invalid("the fault list is not a JSON array");
  for (const auto& e : arr) {
    ASCEND_ASSIGN(ChipFault f, parse_fault(kind, e), "");
    if (f.phy_id >= 0) out.push_back(std::move(f));
  }
  return out;
}

bool has_suffix(std::string_view key) {
  for (auto s : {kNetworkUnhealthy, kUnhealthy, kRecovering, kFault})
    if (key.ends_with(s)) return true;
  return false;
}

// The resource the list describes: its one key without a suffix, or (where MindCluster no longer writes
// the available chips) the key before "-Unhealthy".
Result<std::string> resource_of(const std::map<std::string, std::string>& list) {
  std::vector<std::string> bases;
  for (const auto& [k, v] : list)
    if (!has_suffix(k)) bases.push_back(k);
  if (bases.size() == 1) return bases.front();
  if (bases.size() > 1)
    return Error::invalid(
        fmt::format("DeviceList names {} resources ({}, ...); expected one", bases.size(), bases.front()));
  for (const auto& [k, v] : list)
    if (k.ends_with(kUnhealthy) && !k.ends_with(kNetworkUnhealthy))
      return k.substr(0, k.size() - kUnhealthy.size());
  return Error::invalid("DeviceList names no resource (no huawei.com/<chip> key)");
}

Result<std::map<std::string, std::string>> parse_device_list(const nlohmann::json& info) {
  const auto it = info.find("DeviceList");
  if (it == info.end() || !it->is_object())
    return Error::invalid("DeviceInfo.DeviceList is missing or not an object");
  std::map<std::string, std::string> list;
  for (const auto& [k, v] : it->items()) {
    if (!v.is_string())
      return Error::invalid(fmt::format("DeviceList '{}' is not a string", k.substr(0, 64)));
    list[k] = v.get<std::string>();
  }
  return list;
}

Result<int> optional_int(const nlohmann::json& cfg, const char* key) {
  const auto it = cfg.find(key);
  if (it == cfg.end()) return kNoSuperPod;  // versions before super-pods did not write it
  if (!it->is_number_integer() || *it < INT32_MIN || *it > INT32_MAX)
    return Error::invalid(fmt::format("{} is not a 32-bit integer", key));
  return it->get<int>();
}

Status check_name(const nlohmann::json& cm, NodeDevices& out) {
  if (!cm.is_object()) return Error::invalid("not a ConfigMap object");
  const auto meta = cm.find("metadata");
  if (meta == cm.end() || !meta->is_object()) return Error::invalid("ConfigMap has no metadata");
  const auto* name = string_field(*meta, "name");
  if (name == nullptr) return Error::invalid("ConfigMap has no metadata.name");
  const auto& n = name->get_ref<const std::string&>();
  if (!n.starts_with(kNamePrefix) || n.size() == std::string_view(kNamePrefix).size())
    return Error::invalid(fmt::format("ConfigMap '{}' is not {}<node>", n.substr(0, 253), kNamePrefix));
  if (const auto* ns = string_field(*meta, "namespace"); ns != nullptr && *ns != kNamespace)
    return Error::invalid(
        fmt::format("ConfigMap {} is in namespace '{}', not {}", n, ns->get<std::string>(), kNamespace));
  out.node = n.substr(std::string_view(kNamePrefix).size());
  return {};
}

Result<nlohmann::json> read_cfg(const nlohmann::json& cm) {
  const auto data = cm.find("data");
  if (data == cm.end() || !data->is_object()) return Error::invalid("ConfigMap has no data");
  const auto* text = string_field(*data, kDataKey);
  if (text == nullptr) return Error::invalid(fmt::format("ConfigMap has no data key {}", kDataKey));
  if (text->get_ref<const std::string&>().size() > kMaxDataBytes)
    return Error::invalid(fmt::format("{} is larger than {} bytes", kDataKey, kMaxDataBytes));
  auto cfg = nlohmann::json::parse(text->get_ref<const std::string&>(), nullptr, false);
  if (!cfg.is_object()) return Error::invalid(fmt::format("{} is not a JSON object", kDataKey));
  return cfg;
}

Status read_lists(const std::map<std::string, std::string>& list, NodeDevices& out) {
  ASCEND_ASSIGN(out.resource, resource_of(list), "");
  const std::string kind = kind_of(out.resource);
  const auto value = [&](std::string_view suffix) {
    const auto it = list.find(out.resource + std::string(suffix));
    return it == list.end() ? std::string() : it->second;
  };
  ASCEND_ASSIGN(out.healthy, parse_chips(kind, out.resource, value("")), "");
  ASCEND_ASSIGN(out.unhealthy, parse_chips(kind, out.resource + std::string(kUnhealthy), value(kUnhealthy)),
                "");
  ASCEND_ASSIGN(out.network_unhealthy,
                parse_chips(kind, out.resource + std::string(kNetworkUnhealthy), value(kNetworkUnhealthy)),
                "");
  ASCEND_ASSIGN(out.faults, parse_faults(kind, value(kFault)), out.resource + std::string(kFault));
  return {};
}

}  // namespace

namespace {
constexpr std::array<std::string_view, 8> kLevels = {
    "NotHandleFault", "RestartRequest", "RestartBusiness", "FreeRestartNPU",
    "RestartNPU",     "PreSeparateNPU", "SeparateNPU",     "ManuallySeparateNPU"};
}  // namespace

int level_rank(std::string_view level) {
  for (std::size_t i = 0; i < kLevels.size(); ++i) {
    if (kLevels[i] == level) return static_cast<int>(i);
  }
  return -1;
}

bool stops_work(std::string_view level) {
  int r = level_rank(level);
  return r < 0 || r >= level_rank("RestartNPU");
}

std::string configmap_name(const std::string& node) {
  return kNamePrefix + node;
}

std::string chip_name(std::string_view resource, int phy_id) {
  return fmt::format("{}-{}", kind_of(resource), phy_id);
}

std::string check_code(const std::map<std::string, std::string>& device_list, std::int64_t update_time) {
  const nlohmann::json info = {{"DeviceList", device_list}, {"UpdateTime", update_time}};
  return sha256_hex(go_marshal(info));
}

nlohmann::json to_configmap(const NodeDevices& d) {
  const auto list = device_list(d);
  ojson cfg;  // NodeDeviceInfoCache's field order
  cfg["DeviceInfo"] = {{"DeviceList", list}, {"UpdateTime", d.update_time}};
  cfg["SuperPodID"] = d.super_pod_id;
  cfg["ServerIndex"] = d.server_index;
  cfg["CheckCode"] = check_code(list, d.update_time);
  return {
      {"apiVersion", "v1"},
      {"kind", "ConfigMap"},
      {"metadata",
       {{"name", configmap_name(d.node)}, {"namespace", kNamespace}, {"labels", {{kConsumerLabel, "true"}}}}},
      {"data",
       {{kDataKey, go_marshal(cfg)}, {kManuallySeparateKey, join_names(d.resource, d.manually_separated)}}}};
}

Result<NodeDevices> from_configmap(const nlohmann::json& cm) {
  NodeDevices out;
  ASCEND_CHECK(check_name(cm, out), "");
  const std::string where = configmap_name(out.node);
  ASCEND_ASSIGN(const auto cfg, read_cfg(cm), where);
  const auto info = cfg.find("DeviceInfo");
  if (info == cfg.end() || !info->is_object()) return Error::invalid(where + ": DeviceInfo is missing");
  ASCEND_ASSIGN(const auto list, parse_device_list(*info), where);
  const auto time = info->find("UpdateTime");
  if (time == info->end() || !time->is_number_integer())
    return Error::invalid(where + ": DeviceInfo.UpdateTime is not an integer");
  out.update_time = time->get<std::int64_t>();
  const auto* code = string_field(cfg, "CheckCode");
  if (code == nullptr) return Error::invalid(where + ": CheckCode is missing");
  if (*code != check_code(list, out.update_time))
    return Error::invalid(where + ": CheckCode does not match DeviceInfo (changed by hand, or corrupted)");
  ASCEND_ASSIGN(out.super_pod_id, optional_int(cfg, "SuperPodID"), where);
  ASCEND_ASSIGN(out.server_index, optional_int(cfg, "ServerIndex"), where);
  ASCEND_CHECK(read_lists(list, out), where);
  ASCEND_ASSIGN(out.manually_separated, manually_separated(cm, out.resource), where);
  return out;
}

std::string manually_separated_value(std::string_view resource, const std::vector<int>& phys) {
  return join_names(resource, phys);
}

Result<std::vector<int>> manually_separated(const nlohmann::json& cm, std::string_view resource) {
  if (!cm.is_object() || !cm.contains("data") || !cm["data"].is_object()) return std::vector<int>{};
  const auto* list = string_field(cm["data"], kManuallySeparateKey);
  if (list == nullptr) return std::vector<int>{};
  ASCEND_ASSIGN(auto phys, parse_chips(kind_of(resource), kManuallySeparateKey, list->get<std::string>()),
                "");
  std::sort(phys.begin(), phys.end());
  phys.erase(std::unique(phys.begin(), phys.end()), phys.end());
  return phys;
}

// ---- Node labels ----

std::string label_value(std::string_view s) {
  std::string v;
  for (unsigned char c : s) v += (std::isalnum(c) != 0 || c == '.' || c == '_' || c == '-') ? char(c) : '-';
  const auto alnum = [](unsigned char c) { return std::isalnum(c) != 0; };
  const auto first = std::find_if(v.begin(), v.end(), alnum);
  v.erase(v.begin(), first);
  if (v.size() > 63) v.resize(63);
  while (!v.empty() && !alnum(v.back())) v.pop_back();
  return v;
}

std::map<std::string, std::string> node_labels(const NodeFacts& f) {
  std::map<std::string, std::string> out;
  const auto put = [&](std::initializer_list<const char*> keys, std::string_view value) {
    const auto v = label_value(value);
    if (v.empty()) return;
    for (const char* k : keys) out[k] = v;
  };
  if (!f.resource.empty()) put({"accelerator"}, "huawei-" + kind_of(f.resource));
  put({"huawei.com/npu.chip.name", "node.kubernetes.io/npu.chip.name"}, f.chip_name);
  put({"huawei.com/npu.server.type", "servertype"}, f.server_type);
  put({"huawei.com/npu.driver.version", "huawei.com/driver.version"}, f.driver_version);
  put({"huawei.com/npu.count"}, std::to_string(f.count));
  return out;
}

}  // namespace ascend::deviceinfo
