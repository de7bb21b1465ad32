#include "ascend/topology/chip.h"

#include <algorithm>
#include <cctype>

#include "reader.h"

namespace ascend::topology {

using nlohmann::json;

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

ChipSpec chip(std::string name, std::vector<std::string> aliases, double hbm_gib, double tflops, int per_node,
              std::string profile) {
  ChipSpec c;
  c.name = std::move(name);
  c.aliases = std::move(aliases);
  c.hbm_gib = hbm_gib;
  c.peak_tflops_bf16 = tflops;
  c.chips_per_node = per_node;
  c.profile = std::move(profile);
  return c;
}

bool answers_to(const ChipSpec& c, const std::string& want) {
  return lower(c.name) == want || std::find(c.aliases.begin(), c.aliases.end(), want) != c.aliases.end();
}

}  // namespace

const std::vector<ChipSpec>& builtin_chips() {
  // Figures and their sources: docs/scheduler.md, "Chips". The 910 A1 and the 310P have no bf16 unit: their
  // fp16 peak.
  static const std::vector<ChipSpec> kChips = {
      chip("910ProA", {"910", "910a", "910 a1", "ascend910a", "atlas800-9000"}, 32, 256, 8, "atlas800-9000"),
      chip("910B1", {}, 64, 414, 8, "atlas800t-a2"),
      chip("910B2", {}, 64, 376, 8, "atlas800t-a2"),
      chip("910B3", {"910b", "atlas800t-a2"}, 64, 313, 8, "atlas800t-a2"),
      chip("910B4", {}, 32, 280, 8, "atlas800t-a2"),
      chip("910C", {"ascend910", "910_93", "atlas800t-a3"}, 64, 390, 16, "atlas800t-a3"),
      chip("310P3", {"310p", "atlas300i-duo"}, 24, 70, 8, "atlas300i-duo"),
  };
  return kChips;
}

Result<ChipSpec> builtin_chip(std::string_view name) {
  std::string want = lower(name);
  std::string known;
  for (const auto& c : builtin_chips()) {
    if (answers_to(c, want)) return c;
    known += (known.empty() ? "" : ", ") + c.name;
  }
  return Error::invalid("unknown chip '" + std::string(name) + "' (known: " + known +
                        ", a family or profile name, or a chip file)");
}

Result<ChipSpec> chip_from_json(const json& j, const LineLocator& where) {
  try {
    detail::ObjectReader r(j, {});
    ChipSpec c;
    c.name = r.string("name");
    c.hbm_gib = r.positive("hbm_gib");
    c.peak_tflops_bf16 = r.positive("peak_tflops_bf16");
    c.chips_per_node = static_cast<int>(r.integer("chips_per_node", 1, 64));
    if (const json* b = r.find("bandwidth_gbps")) {
      detail::ObjectReader br(*b, r.path("bandwidth_gbps"));
      c.intra_node_gbps = br.positive("intra_node", 0.0);
      c.inter_node_gbps = br.positive("inter_node", 0.0);
      br.done();
    }
    if (const json* ic = r.find("interconnect"))
      c.interconnect = interconnect_from_json(*ic, r.path("interconnect"));
    r.done();
    return c;
  } catch (const detail::FieldError& e) {
    return detail::to_error(e, where);
  }
}

Result<npu::HostModel> node_host(const ChipSpec& c) {
  if (!c.profile.empty()) return npu::builtin_host_model(c.profile);
  // A full mesh: the 910B server's shape (one HCCS domain) with the chip file's chip count and HBM.
  ASCEND_ASSIGN(npu::HostModel m, npu::builtin_host_model("atlas800t-a2"), "chip " + c.name);
  npu::DeviceSnapshot& host = m.host;
  const npu::Chip model = host.chips.front();
  const npu::DeviceNode node = host.chip_nodes.front();
  m.profile = "chip-" + c.name;
  m.description = c.name + " node: " + std::to_string(c.chips_per_node) + " chips, full mesh";
  host.chips.clear();
  host.chip_nodes.clear();
  host.links.clear();
  for (int i = 0; i < c.chips_per_node; ++i) {
    npu::Chip x = model;
    x.phy_id = x.logic_id = x.card_id = i;
    x.name = c.name;
    x.numa_node = 0;
    x.hccs_domain = 0;
    x.hbm_total_mb = static_cast<int>(c.hbm_gib * 1024);
    host.chips.push_back(x);
    host.chip_nodes.push_back({"/dev/davinci" + std::to_string(i), node.major, i, node.mode});
    for (int j = 0; j < c.chips_per_node; ++j)
      host.links.push_back(i == j ? npu::Link::kSelf : npu::Link::kHccs);
  }
  return m;
}

Bandwidth bandwidth_for(const ChipSpec& c, const Bandwidth& defaults) {
  Bandwidth bw = defaults;
  auto set = [&](std::initializer_list<Level> levels, double gbps) {
    if (gbps <= 0) return;
    for (Level l : levels) bw.gbps[static_cast<std::size_t>(l)] = gbps;
  };
  set({Level::kSio, Level::kHccs, Level::kPcie}, c.intra_node_gbps);
  set({Level::kLeaf, Level::kSpine, Level::kCore}, c.inter_node_gbps);
  return bw;
}

}  // namespace ascend::topology
