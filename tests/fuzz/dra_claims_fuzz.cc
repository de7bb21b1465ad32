// The DRA driver's parse boundary (device-plugin/plugin/src/dra_claims.h): a ResourceClaim as the API server
// answers it, read for this node's chips, and the checkpoint as the plugin reads it back at start. Byte 0
// picks the reader: 'c' a claim asked for by its own metadata.uid, 'u' a claim asked for by a fixed uid (the
// kubelet names a claim deleted and made again), each followed by a byte whose bits are the usable chips
// 0-7 of node worker-1, then the claim's JSON; any other byte: the rest is a checkpoint.
//
// Oracle, a claim read: as many devices as results of driver npu.ascend.huawei.com (1 to 32), each in this
// node's pool, a usable chip `npu-<phy>` with its CDI device `huawei.com/npu=<phy>` and one request name
// without a subrequest; asked for by another uid, never read; and the claim prepared goes through the
// checkpoint unchanged (what start() reads back is what prepare() wrote). A checkpoint read: its format and
// version are exactly the plugin's, its bounds hold, and written again it reads back the same.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "ascend/common/json_depth.h"
#include "ascend/plugin/allocate.h"
#include "ascend/plugin/dra_service.h"
#include "dra_claims.h"
#include "fuzz_util.h"

using namespace ascend;
using nlohmann::json;
namespace dk = ascend::plugin::dra_kubelet;

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
  check_round_trip(*claims, "a checkpoint read");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text = fuzz::as_text(data, size);
  if ((text[0] == 'c' || text[0] == 'u') && size >= 2) {
    read_claim(text.substr(2), text[0] == 'c', static_cast<unsigned char>(text[1]));
  } else {
    read_checkpoint(text.substr(1));
  }
  return 0;
}
