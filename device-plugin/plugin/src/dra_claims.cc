#include "dra_claims.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

#include "ascend/common/json_depth.h"
#include "ascend/plugin/allocate.h"

namespace ascend::plugin::dra_kubelet {

namespace {

using nlohmann::json;

// The checkpoint is ours and flat; anything nested deeper is not it (and is not walked).
constexpr int kMaxCheckpointDepth = 8;
// A chip belongs to one claim; a claim of this driver names at most kMaxResults devices.
constexpr std::size_t kMaxDevicesPerClaim = kMaxResults;
constexpr std::size_t kMaxStringsPerDevice = 8;
constexpr std::size_t kMaxStringLength = 256;
// The largest vNPU id a checkpoint may name (100 + 16 * phy + 15, for far more chips than a node has).
constexpr int kMaxVnpuId = 1 << 20;

const json* member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

std::optional<std::string> string_member(const json& obj, const char* key) {
  const json* v = member(obj, key);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return v->get<std::string>();
}

std::string claim_name(const DraClaimRef& ref) {
  return ref.ns + "/" + ref.name;
}

// The strings of a checkpoint's array field, each at most kMaxStringLength, at most `max` of them.
Result<std::vector<std::string>> strings_of(const json& obj, const char* key, std::size_t max) {
  const json* v = member(obj, key);
  if (v == nullptr || !v->is_array() || v->size() > max)
    return Error::invalid(fmt::format("{}: not an array of at most {} strings", key, max));
  std::vector<std::string> out;
  for (const auto& s : *v) {
    if (!s.is_string() || s.get_ref<const std::string&>().size() > kMaxStringLength)
      return Error::invalid(fmt::format("{}: not a string of at most {} bytes", key, kMaxStringLength));
    out.push_back(s.get<std::string>());
  }
  return out;
}

Result<std::string> bounded_string(const json& obj, const char* key) {
  auto s = string_member(obj, key);
  if (!s || s->size() > kMaxStringLength)
    return Error::invalid(fmt::format("{}: not a string of at most {} bytes", key, kMaxStringLength));
  return *s;
}

Result<DraDevice> device_of_checkpoint(const json& d) {
  DraDevice out;
  ASCEND_ASSIGN(out.request_names, strings_of(d, "request_names", kMaxStringsPerDevice), "device");
  ASCEND_ASSIGN(out.pool_name, bounded_string(d, "pool_name"), "device");
  ASCEND_ASSIGN(out.device_name, bounded_string(d, "device_name"), "device");
  ASCEND_ASSIGN(out.cdi_device_ids, strings_of(d, "cdi_device_ids", kMaxStringsPerDevice), "device");
  if (const json* v = member(d, "vnpu_id"); v != nullptr) {
    // Compared as JSON numbers: get<int>() would wrap a huge one.
    if (!v->is_number_integer() || *v < 0 || *v > kMaxVnpuId)
      return Error::invalid(fmt::format("device: vnpu_id: not an integer from 0 to {}", kMaxVnpuId));
    out.vnpu_id = v->get<int>();
  }
  return out;
}

Result<DraPreparedClaim> claim_of_checkpoint(const json& c) {
  DraPreparedClaim out;
  ASCEND_ASSIGN(out.ns, bounded_string(c, "namespace"), "claim");
  ASCEND_ASSIGN(out.name, bounded_string(c, "name"), "claim");
  const json* devices = member(c, "devices");
  if (devices == nullptr || !devices->is_array() || devices->size() > kMaxDevicesPerClaim)
    return Error::invalid(fmt::format("claim: devices: not an array of at most {}", kMaxDevicesPerClaim));
  for (const auto& d : *devices) {
    ASCEND_ASSIGN(auto dev, device_of_checkpoint(d), "claim " + out.ns + "/" + out.name);
    out.devices.push_back(std::move(dev));
  }
  return out;
}

// One result of this driver: the device it names, checked against this node.
Result<DraDevice> device_of_result(const json& r, const std::string& node, const std::vector<int>& chips,
                                   const VnpuRules* vnpus) {
  auto request = string_member(r, "request");
  auto pool = string_member(r, "pool");
  auto device = string_member(r, "device");
  if (!request || !pool || !device) return Error::invalid("a result without its request, pool or device");
  // The API server allows no longer one; bounded here, the checkpoint reads back every claim it holds.
  if (request->size() > kMaxRequest)
    return Error::invalid(
        fmt::format("device {}: its request is {} bytes, longer than the API server allows ({})",
                    device->substr(0, kMaxStringLength), request->size(), kMaxRequest));
  if (*pool != node)
    return Error::invalid(
        fmt::format("device {} is allocated in pool {:?}, not in this node's ({})", *device, *pool, node));
  if (dra::is_vnpu_device_name(*device)) {
    if (vnpus == nullptr || vnpus->host == nullptr)
      return Error::invalid(
          fmt::format("device {} is a vNPU, and this node's plugin does not publish vNPUs "
                      "(--dra-vnpu)",
                      device->substr(0, kMaxStringLength)));
    ASCEND_ASSIGN(const auto v, dra::vnpu_of_device(*vnpus->host, *device), "");
    const auto& ok = vnpus->healthy;
    if (std::find(ok.begin(), ok.end(), v.phy) == ok.end())
      return Error::invalid(
          fmt::format("device {} is a vNPU of chip {}, which is not a healthy chip of this "
                      "node (healthy: {})",
                      *device, v.phy, ok.empty() ? "none" : fmt::format("{}", fmt::join(ok, ","))));
    return DraDevice{.request_names = {base_request(*request)},
                     .pool_name = *pool,
                     .device_name = *device,
                     .cdi_device_ids = {},
                     .vnpu_id = -1};
  }
  auto phy = dra::phy_of_device(*device);
  if (!phy.ok()) return phy.error();
  if (std::find(chips.begin(), chips.end(), *phy) == chips.end())
    return Error::invalid(fmt::format("device {} is not a usable chip of this node (usable: {})", *device,
                                      chips.empty() ? "none" : fmt::format("{}", fmt::join(chips, ","))));
  return DraDevice{.request_names = {base_request(*request)},
                   .pool_name = *pool,
                   .device_name = *device,
                   .cdi_device_ids = {std::string(kCdiKind) + "=" + std::to_string(*phy)}};
}

}  // namespace

Status check_uid(const std::string& uid) {
  if (uid.empty() || uid.size() > kDraMaxUid)
    return Error::invalid(fmt::format("a claim uid must be 1 to {} bytes, not {}", kDraMaxUid, uid.size()));
  return {};
}

Status check_names(const DraClaimRef& ref) {
  if (ref.ns.empty() || ref.ns.size() > kDraMaxNamespace)
    return Error::invalid(
        fmt::format("the claim's namespace must be 1 to {} bytes, not {}", kDraMaxNamespace, ref.ns.size()));
  if (ref.name.empty() || ref.name.size() > kDraMaxName)
    return Error::invalid(
        fmt::format("the claim's name must be 1 to {} bytes, not {}", kDraMaxName, ref.name.size()));
  return {};
}

std::string base_request(std::string_view request) {
  return std::string(request.substr(0, request.find('/')));
}

Result<std::vector<DraDevice>> devices_of_claim(const json& claim, const DraClaimRef& ref,
                                                const std::string& node, const std::vector<int>& chips,
                                                const VnpuRules* vnpus) {
  const std::string what = claim_name(ref);
  const json* meta = member(claim, "metadata");
  auto uid = meta != nullptr ? string_member(*meta, "uid") : std::nullopt;
  if (!uid) return Error::invalid("claim " + what + ": the API server's answer has no metadata.uid");
  if (*uid != ref.uid)
    return Error::invalid(
        fmt::format("claim {} is another one than asked for: uid {}, not {} (deleted and made "
                    "again)",
                    what, *uid, ref.uid));
  const json* status = member(claim, "status");
  const json* allocation = status != nullptr ? member(*status, "allocation") : nullptr;
  if (allocation == nullptr || !allocation->is_object())
    return Error::invalid("claim " + what + " is not allocated (no status.allocation)");
  const json* devices = member(*allocation, "devices");
  const json* results = devices != nullptr ? member(*devices, "results") : nullptr;
  if (results != nullptr && (!results->is_array() || results->size() > kMaxResults))
    return Error::invalid(fmt::format(
        "claim {}: status.allocation.devices.results is not a list of at most {}", what, kMaxResults));
  std::vector<DraDevice> out;
  if (results != nullptr) {
    for (const auto& r : *results) {
      if (string_member(r, "driver") != dra::kDriver) continue;
      auto dev = device_of_result(r, node, chips, vnpus);
      if (!dev.ok()) return dev.error().context("claim " + what);
      out.push_back(std::move(*dev));
    }
  }
  if (out.empty())
    return Error::invalid(fmt::format("claim {} has no device of driver {}", what, dra::kDriver));
  return out;
}

std::string encode_checkpoint(const std::map<std::string, DraPreparedClaim>& claims) {
  json by_uid = json::object();
  for (const auto& [uid, c] : claims) {
    json devices = json::array();
    for (const auto& d : c.devices) {
      json dev = {{"request_names", d.request_names},
                  {"pool_name", d.pool_name},
                  {"device_name", d.device_name},
                  {"cdi_device_ids", d.cdi_device_ids}};
      if (d.vnpu_id >= 0) dev["vnpu_id"] = d.vnpu_id;  // a vNPU made for the claim: unprepare destroys it
      devices.push_back(std::move(dev));
    }
    by_uid[uid] = {{"namespace", c.ns}, {"name", c.name}, {"devices", std::move(devices)}};
  }
  const json doc = {
      {"format", kCheckpointFormat}, {"version", kCheckpointVersion}, {"claims", std::move(by_uid)}};
  // Names come from the kubelet; a byte that is not UTF-8 is replaced rather than thrown on.
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

Result<std::map<std::string, DraPreparedClaim>> decode_checkpoint(std::string_view text) {
  if (json_nests_deeper_than(text, kMaxCheckpointDepth))
    return Error::invalid(fmt::format("nested deeper than {}", kMaxCheckpointDepth));
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Error::invalid("not JSON");
  if (string_member(doc, "format") != kCheckpointFormat)
    return Error::invalid(fmt::format("format is not {:?}", kCheckpointFormat));
  const json* version = member(doc, "version");
  // Compared as JSON numbers: get<int>() would wrap 4294967297 to 1.
  if (version == nullptr || !version->is_number_integer() || *version != kCheckpointVersion)
    return Error::invalid(fmt::format("version is not {}", kCheckpointVersion));
  const json* claims = member(doc, "claims");
  if (claims == nullptr || !claims->is_object() || claims->size() > kDraMaxPreparedClaims)
    return Error::invalid(fmt::format("claims: not an object of at most {}", kDraMaxPreparedClaims));
  std::map<std::string, DraPreparedClaim> out;
  for (const auto& [uid, c] : claims->items()) {
    if (auto st = check_uid(uid); !st.ok()) return st.error().context("claims");
    ASCEND_ASSIGN(out[uid], claim_of_checkpoint(c), "claims: " + uid);
  }
  return out;
}

}  // namespace ascend::plugin::dra_kubelet
