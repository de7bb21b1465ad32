// The DRA driver's parse boundary (device-plugin/plugin/src/dra_claims.h): a ResourceClaim as the API server
// answers it, read for this node's chips, and the checkpoint as the plugin reads it back at start. Byte 0
// picks the reader: 'c' a claim asked for by its own metadata.uid, 'u' a claim asked for by a fixed uid (the
// kubelet names a claim deleted and made again), each followed by a byte whose bits are the usable chips
// 0-7 of node worker-1, then the claim's JSON; 'v' a claim read as --dra-vnpu reads it (vNPU devices
// npu-<phy>-<template>-<k> allowed), followed by three bytes: the healthy chips (bit phy % 8: where a vNPU
// may be made), the usable chips (the same bits: whole chips), and flags (bits 0-1: the emulated host, one
// of atlas800t-a2, atlas800-9000, atlas800t-a3, atlas300i-duo; bit 2: asked for by the fixed uid; bit 3: no
// vNPU rules, as without --dra-vnpu), then the claim's JSON; any other byte: the rest is a checkpoint.
//
// Oracle, a claim read: as many devices as results of driver npu.ascend.huawei.com (1 to 32), each in this
// node's pool, a usable chip `npu-<phy>` with its CDI device `huawei.com/npu=<phy>` and one request name
// without a subrequest; asked for by another uid, never read; and the claim prepared goes through the
// checkpoint unchanged (what start() reads back is what prepare() wrote). A vNPU claim read ('v'), besides:
// each device that is not such a chip is a vNPU device the node's slices publish (dra_slices.h, with
// vNPU templates: a template the host offers, an instance below the template's most on a chip) on a chip
// of the host that is healthy, named back by vnpu_of_device as the slice's attributes say (phyId,
// vnpuTemplate, the instance of the name), with no CDI device and no vNPU id yet; without the vNPU rules,
// no vNPU is read; and the claim with a vNPU id on each vNPU (as prepare checkpoints it) goes through the
// checkpoint unchanged. A checkpoint read: its format and version are exactly the plugin's, its bounds
// hold, each device's vNPU id is the document's `vnpu_id` (a whole chip's, without one, -1), and written
// again it reads back the same.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ascend/common/json_depth.h"
#include "ascend/npu/profiles.h"
#include "ascend/plugin/allocate.h"
#include "ascend/plugin/dra_service.h"
#include "ascend/plugin/dra_slices.h"
#include "dra_claims.h"
#include "fuzz_util.h"

using namespace ascend;
using nlohmann::json;
namespace dk = ascend::plugin::dra_kubelet;
namespace dra = ascend::plugin::dra;

namespace {

constexpr const char* kNode = "worker-1";
constexpr const char* kFixedUid = "0b9d3c1e-0000-4000-8000-000000000001";
constexpr int kMaxJsonDepth = 256;  // kube::Client's: a deeper answer never reaches devices_of_claim

std::string uid_of(const json& claim) {
  if (!claim.is_object() || !claim.contains("metadata") || !claim["metadata"].is_object()) return {};
  const json& meta = claim["metadata"];
  return meta.contains("uid") && meta["uid"].is_string() ? meta["uid"].get<std::string>() : std::string();
}

// The results of our driver in the claim's allocation (the reader's own path through it, written again).
std::size_t our_results(const json& claim) {
  const json* results = &claim;
  for (const char* key : {"status", "allocation", "devices", "results"}) {
    if (!results->is_object() || !results->contains(key)) return 0;
    results = &(*results)[key];
  }
  std::size_t n = 0;
  for (const auto& r : *results)
    n += r.is_object() && r.contains("driver") && r["driver"] == plugin::dra::kDriver;
  return n;
}

void check_round_trip(const std::map<std::string, plugin::DraPreparedClaim>& claims,
                      const std::string& what) {
  const std::string text = dk::encode_checkpoint(claims);
  auto back = dk::decode_checkpoint(text);
  fuzz::check(back.ok(), what + " written to a checkpoint does not read back: " +
                             (back.ok() ? "" : back.error().message()) + "\n" + text);
  fuzz::check(*back == claims, what + " written to a checkpoint reads back different:\n" + text);
}

void read_claim(std::string_view text, bool own_uid, unsigned usable) {
  if (json_nests_deeper_than(text, kMaxJsonDepth)) return;
  const json claim = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (claim.is_discarded()) return;
  std::vector<int> chips;
  for (int c = 0; c < 8; ++c) {
    if ((usable >> c) & 1U) chips.push_back(c);
  }
  const plugin::DraClaimRef ref{"team-a", own_uid ? uid_of(claim) : kFixedUid, "train"};
  if (!dk::check_uid(ref.uid).ok()) return;  // prepare() refuses such a call before reading any claim
  auto devices = dk::devices_of_claim(claim, ref, kNode, chips);
  if (!devices.ok()) return;
  fuzz::check(uid_of(claim) == ref.uid, "read a claim whose uid is not the one asked for");
  fuzz::check(!devices->empty() && devices->size() <= dk::kMaxResults,
              "read a claim of 0 or over 32 devices");
  fuzz::check(devices->size() == our_results(claim), "a device for each result of the driver, no other");
  for (const auto& d : *devices) {
    fuzz::check(d.pool_name == kNode, "a device in pool " + d.pool_name);
    bool usable_chip = false;
    for (int c : chips) {
      if (d.device_name == "npu-" + std::to_string(c)) {
        usable_chip = true;
        fuzz::check(d.cdi_device_ids ==
                        std::vector<std::string>{std::string(plugin::kCdiKind) + "=" + std::to_string(c)},
                    "the CDI device of " + d.device_name);
      }
    }
    fuzz::check(usable_chip, "device " + d.device_name + " is not a usable chip");
    fuzz::check(d.request_names.size() == 1 && d.request_names[0].find('/') == std::string::npos,
                "a device's request names are not one base request");
  }
  check_round_trip({{ref.uid, {ref.ns, ref.name, *devices}}}, "a claim read");
}

void read_checkpoint(std::string_view text) {
  auto claims = dk::decode_checkpoint(text);
  if (!claims.ok()) return;
  const json doc = json::parse(text, nullptr, false);  // it parsed for decode_checkpoint too
  fuzz::check(doc["format"] == dk::kCheckpointFormat && doc["version"].is_number_integer() &&
                  doc["version"] == dk::kCheckpointVersion,
              "read a checkpoint of format " + doc["format"].dump() + ", version " + doc["version"].dump());
  fuzz::check(claims->size() <= plugin::kDraMaxPreparedClaims, "more claims than a node keeps");
  for (const auto& [uid, c] : *claims) {
    fuzz::check(!uid.empty() && uid.size() <= plugin::kDraMaxUid,
                "a claim uid of " + std::to_string(uid.size()));
    fuzz::check(c.devices.size() <= dk::kMaxResults, "a claim of over 32 devices");
  }
  for (const auto& [uid, c] : *claims) {
    const json& devices = doc["claims"][uid]["devices"];
    for (std::size_t i = 0; i < c.devices.size(); ++i) {
      const json& d = devices[i];
      const int want = d.contains("vnpu_id") ? d["vnpu_id"].get<int>() : -1;
      fuzz::check(c.devices[i].vnpu_id == want && (!d.contains("vnpu_id") || c.devices[i].vnpu_id >= 0),
                  "claim " + uid + ": device " + std::to_string(i) + " read with vNPU id " +
                      std::to_string(c.devices[i].vnpu_id) + ", its vnpu_id is " +
                      (d.contains("vnpu_id") ? d["vnpu_id"].dump() : std::string("absent")));
    }
  }
  check_round_trip(*claims, "a checkpoint read");
}

// An emulated host of a built-in profile and the vNPU devices its node's slices publish, by name.
struct VnpuHost {
  std::string profile;
  npu::DeviceSnapshot host;
  std::map<std::string, dra::VnpuDeviceRef> published;  // from the slices' attributes
};

const std::array<VnpuHost, 4>& vnpu_hosts() {
  static const std::array<VnpuHost, 4> hosts = [] {
    std::array<VnpuHost, 4> out;
    const std::array<const char*, 4> names = {"atlas800t-a2", "atlas800-9000", "atlas800t-a3",
                                              "atlas300i-duo"};
    for (std::size_t i = 0; i < names.size(); ++i) {
      auto state = npu::builtin_profile(names[i]);
      fuzz::check(state.ok(), std::string("built-in profile ") + names[i]);
      out[i].profile = names[i];
      out[i].host = *state;
      const auto slices =
          dra::resource_slices(out[i].host, {}, {kNode, "", "", ""}, 1, dra::SliceVnpus::kTemplates);
      for (const auto& s : slices) {
        for (const auto& d : s["spec"]["devices"]) {
          const json& a = d["attributes"];
          if (!a.contains(dra::kVnpuTemplateAttribute)) continue;
          const std::string name = d["name"].get<std::string>();
          const int k = std::stoi(name.substr(name.rfind('-') + 1));
          const dra::VnpuDeviceRef ref{a["phyId"]["int"].get<int>(),
                                       a[dra::kVnpuTemplateAttribute]["string"].get<std::string>(), k};
          fuzz::check(out[i].published.emplace(name, ref).second, "published twice: " + name);
          // What the slices publish, the reader takes back (the converse of the oracle below).
          auto back = dra::vnpu_of_device(out[i].host, name);
          fuzz::check(back.ok() && *back == ref,
                      out[i].profile + ": published " + name + ", read back " +
                          (back.ok() ? back->template_name : back.error().message()));
        }
      }
      fuzz::check(!out[i].published.empty(), out[i].profile + " publishes no vNPU device");
    }
    return out;
  }();
  return hosts;
}

void read_vnpu_claim(std::string_view text, unsigned healthy_bits, unsigned usable_bits, unsigned flags) {
  if (json_nests_deeper_than(text, kMaxJsonDepth)) return;
  const json claim = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (claim.is_discarded()) return;
  const VnpuHost& vh = vnpu_hosts()[flags & 3U];
  const bool own_uid = (flags & 4U) == 0;
  const bool with_rules = (flags & 8U) == 0;
  // The plugin's views of the host's chips: healthy (dra_healthy_chips) and usable (dra_usable_chips).
  std::vector<int> chips;
  dk::VnpuRules rules{&vh.host, {}};
  for (const auto& c : vh.host.chips) {
    const unsigned bit = 1U << (static_cast<unsigned>(c.phy_id) % 8);
    if (healthy_bits & bit) rules.healthy.push_back(c.phy_id);
    if (usable_bits & bit) chips.push_back(c.phy_id);
  }
  const plugin::DraClaimRef ref{"team-a", own_uid ? uid_of(claim) : kFixedUid, "train"};
  if (!dk::check_uid(ref.uid).ok()) return;
  auto devices = dk::devices_of_claim(claim, ref, kNode, chips, with_rules ? &rules : nullptr);
  if (!devices.ok()) return;
  const std::string where = vh.profile + ": ";
  fuzz::check(uid_of(claim) == ref.uid, where + "read a claim whose uid is not the one asked for");
  fuzz::check(!devices->empty() && devices->size() <= dk::kMaxResults,
              where + "read a claim of 0 or over 32 devices");
  fuzz::check(devices->size() == our_results(claim),
              where + "a device for each result of the driver, no other");
  int next_id = 100;
  for (auto& d : *devices) {
    fuzz::check(d.pool_name == kNode, where + "a device in pool " + d.pool_name);
    fuzz::check(d.request_names.size() == 1 && d.request_names[0].find('/') == std::string::npos,
                where + "a device's request names are not one base request");
    bool usable_chip = false;
    for (int c : chips) {
      if (d.device_name == "npu-" + std::to_string(c)) {
        usable_chip = true;
        fuzz::check(d.cdi_device_ids == std::vector<std::string>{std::string(plugin::kCdiKind) + "=" +
                                                                 std::to_string(c)} &&
                        d.vnpu_id == -1,
                    where + "the CDI device of " + d.device_name);
      }
    }
    if (usable_chip) continue;
    fuzz::check(with_rules, where + "read vNPU device " + d.device_name + " without the vNPU rules");
    auto it = vh.published.find(d.device_name);
    fuzz::check(it != vh.published.end(),
                where + "device " + d.device_name + " is neither a usable chip nor a published vNPU");
    const dra::VnpuDeviceRef& v = it->second;
    fuzz::check(
        vh.host.chip(v.phy) != nullptr && std::count(rules.healthy.begin(), rules.healthy.end(), v.phy),
        where + "vNPU " + d.device_name + " on chip " + std::to_string(v.phy) + ", not a healthy one");
    fuzz::check(vh.host.find_template(v.template_name) != nullptr,
                where + "vNPU " + d.device_name + " of a template the host does not offer");
    auto named = dra::vnpu_of_device(vh.host, d.device_name);
    fuzz::check(named.ok() && *named == v, where + "vNPU " + d.device_name + " named back otherwise");
    fuzz::check(dra::is_vnpu_device_name(d.device_name), where + d.device_name + " is not a vNPU's name");
    fuzz::check(d.cdi_device_ids.empty() && d.vnpu_id == -1,
                where + "vNPU " + d.device_name + " read with a CDI device or a vNPU id");
    d.vnpu_id = next_id++;  // as prepare_vnpus checkpoints it
  }
  check_round_trip({{ref.uid, {ref.ns, ref.name, *devices}}}, where + "a vNPU claim read");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text = fuzz::as_text(data, size);
  if ((text[0] == 'c' || text[0] == 'u') && size >= 2) {
    read_claim(text.substr(2), text[0] == 'c', static_cast<unsigned char>(text[1]));
  } else if (text[0] == 'v' && size >= 4) {
    read_vnpu_claim(text.substr(4), static_cast<unsigned char>(text[1]), static_cast<unsigned char>(text[2]),
                    static_cast<unsigned char>(text[3]));
  } else {
    read_checkpoint(text.substr(1));
  }
  return 0;
}
