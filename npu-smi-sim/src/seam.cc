#include "ascend/npu/seam.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <nlohmann/json.hpp>

#include "ascend/npu/device_query.h"
#include "ascend/npu/driver_files.h"
#include "ascend/npu/host_model.h"
#include "lookup.h"
#include "seam_json.h"

namespace ascend::npu {

using nlohmann::json;

std::string_view to_string(Health h) {
  switch (h) {
    case Health::kOk:
      return "OK";
    case Health::kWarning:
      return "Warning";
    case Health::kAlarm:
      return "Alarm";
    case Health::kCritical:
      return "Critical";
  }
  return "OK";
}

namespace {
std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}
}  // namespace

Result<Health> parse_health(std::string_view s) {
  std::string l = lower(s);
  if (l == "ok") return Health::kOk;
  if (l == "warning") return Health::kWarning;
  if (l == "alarm") return Health::kAlarm;
  if (l == "critical") return Health::kCritical;
  return Error::invalid("unknown severity '" + std::string(s) + "' (use warning, alarm or critical)");
}

std::string_view to_string(Link l) {
  switch (l) {
    case Link::kSelf:
      return "X";
    case Link::kSio:
      return "SIO";
    case Link::kHccs:
      return "HCCS";
    case Link::kHccsSw:
      return "HCCS_SW";
    case Link::kPix:
      return "PIX";
    case Link::kPxb:
      return "PXB";
    case Link::kPhb:
      return "PHB";
    case Link::kSys:
      return "SYS";
    case Link::kNa:
      return "NA";
  }
  return "NA";
}

LinkLevel level_of(Link l) {
  switch (l) {
    case Link::kSelf:
    case Link::kSio:
      return LinkLevel::kSio;
    case Link::kHccs:
    case Link::kHccsSw:
      return LinkLevel::kHccs;
    default:
      return LinkLevel::kPcie;
  }
}

std::string_view to_string(Family f) {
  switch (f) {
    case Family::k910:
      return "910";
    case Family::k910B:
      return "910B";
    case Family::k910_93:
      return "910_93";
    case Family::k310P:
      return "310P";
  }
  return "910B";
}

Result<Family> parse_family(std::string_view s) {
  for (Family f : {Family::k910, Family::k910B, Family::k910_93, Family::k310P}) {
    if (lower(s) == lower(to_string(f))) return f;
  }
  return Error::invalid("unknown chip family '" + std::string(s) + "' (use 910, 910B, 910_93 or 310P)");
}

bool held_by(const Vnpu& v, const VnpuOwner& want) {
  const VnpuOwner& o = v.owner;
  return (want.container_id.empty() || want.container_id == o.container_id) &&
         (want.state_root.empty() || want.state_root == o.state_root) &&
         (want.pid == 0 || want.pid == o.pid) && (want.pid_start == 0 || want.pid_start == o.pid_start) &&
         (want.pid_ns.empty() || want.pid_ns == o.pid_ns);
}

Health severity_of_code(std::uint32_t code) {
  unsigned cls = (code >> 24) & 0xFU;
  if (cls <= 3) return Health::kWarning;
  if (cls <= 7) return Health::kAlarm;
  return Health::kCritical;
}

Health Chip::health() const {
  Health h = Health::kOk;
  for (const auto& f : faults) h = std::max(h, f.severity);
  return h;
}
ChipTelemetry telemetry_of(const Chip& c) {
  ChipTelemetry t;
  t.phy_id = c.phy_id;
  t.aicore_pct = c.aicore_usage_pct;
  t.aicpu_pct = c.aicpu_usage_pct;
  const bool hbm = c.hbm_total_mb > 0;
  t.memory_total_mb = hbm ? c.hbm_total_mb : c.mem_total_mb;
  t.memory_used_mb = hbm ? c.hbm_used_mb : c.mem_used_mb;
  t.temp_c = c.temp_c;
  if (!c.power_na && c.power_w >= 0) t.power_w = c.power_w;
  t.health = c.health();
  for (const auto& f : c.faults) t.error_codes.push_back(f.code);
  t.link_up = c.link_up;
  return t;
}

Result<std::uint32_t> parse_fault_code(std::string_view s) {
  std::string_view digits = s;
  if (digits.starts_with("0x") || digits.starts_with("0X")) digits.remove_prefix(2);
  std::uint32_t v = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, 16);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
    return Error::invalid("'" + std::string(s) + "': expected a hexadecimal code like 0x80E01801");
  }
  return v;
}

std::string device_ip(int node_index, int phy_id) {
  return fmt::format("10.{}.{}.{}", 100 + phy_id, node_index / 254, node_index % 254 + 1);
}

std::vector<std::string> DeviceQuery::driver_files() const {
  return npu::driver_files();
}

Result<std::vector<ChipTelemetry>> DeviceQuery::telemetry() const {
  ASCEND_ASSIGN(DeviceSnapshot s, snapshot(), "");
  std::vector<ChipTelemetry> out;
  out.reserve(s.chips.size());
  for (const auto& c : s.chips) out.push_back(telemetry_of(c));
  return out;
}

const Chip* DeviceSnapshot::chip(int phy_id) const {
  return detail::find_by_id(chips, phy_id, &Chip::phy_id);
}

const Vnpu* DeviceSnapshot::vnpu(int id) const {
  return detail::find_by_id(vnpus, id, &Vnpu::id);
}

const VnpuTemplate* DeviceSnapshot::find_template(std::string_view name) const {
  return detail::find_template(templates, name);
}

namespace {
std::ptrdiff_t index_of(const std::vector<Chip>& chips, int phy) {
  for (std::size_t i = 0; i < chips.size(); ++i) {
    if (chips[i].phy_id == phy) return static_cast<std::ptrdiff_t>(i);
  }
  return -1;
}
}  // namespace

Link DeviceSnapshot::link(int phy_a, int phy_b) const {
  const auto a = index_of(chips, phy_a);
  const auto b = index_of(chips, phy_b);
  if (a < 0 || b < 0) return Link::kNa;
  const auto n = static_cast<std::ptrdiff_t>(chips.size());
  if (static_cast<std::ptrdiff_t>(links.size()) != n * n) return phy_a == phy_b ? Link::kSelf : Link::kNa;
  return links[static_cast<std::size_t>(a * n + b)];
}

std::vector<std::vector<int>> DeviceSnapshot::cards() const {
  return detail::cards_of(chips);
}

bool DeviceSnapshot::holds_vnpus(int phy_id) const {
  return detail::holds_vnpus(vnpus, phy_id);
}

DeviceNode DeviceSnapshot::chip_node(int phy_id) const {
  const auto i = index_of(chips, phy_id);
  if (i >= 0 && static_cast<std::size_t>(i) < chip_nodes.size())
    return chip_nodes[static_cast<std::size_t>(i)];
  return {"/dev/davinci" + std::to_string(phy_id), 0, 0, 0660};
}

DeviceNode DeviceSnapshot::vnpu_node(int vnpu_id) const {
  for (std::size_t i = 0; i < vnpus.size() && i < vnpu_nodes.size(); ++i) {
    if (vnpus[i].id == vnpu_id) return vnpu_nodes[i];
  }
  return {"/dev/vdavinci" + std::to_string(vnpu_id), 0, 0, 0660};
}

std::vector<int> hccs_domains(const DeviceSnapshot& s) {
  const std::size_t n = s.chips.size();
  std::vector<int> domain(n, -1);
  int next = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (domain[i] >= 0) continue;
    // Flood the HCCS component of chip i (chips are in phy order, so domains are numbered in phy order).
    std::vector<std::size_t> todo{i};
    bool any = false;
    while (!todo.empty()) {
      std::size_t a = todo.back();
      todo.pop_back();
      for (std::size_t b = 0; b < n; ++b) {
        if (a == b || domain[b] >= 0 || n * n != s.links.size()) continue;
        const Link l = s.links[a * n + b];
        if (l != Link::kHccs && l != Link::kHccsSw) continue;
        domain[a] = next;
        domain[b] = next;
        any = true;
        todo.push_back(b);
      }
    }
    if (any) ++next;
  }
  return domain;
}

// ---- JSON: the seam's own form of each type's codec (seam_json.h)
// ------------------------------------------

namespace {
template <typename T>
Result<T> parse_as(const json& j, const char* what) {
  try {
    return j.get<T>();
  } catch (const json::exception& e) {
    return Error::invalid(std::string("malformed ") + what + ": " + e.what());
  }
}
}  // namespace

json snapshot_to_json(const DeviceSnapshot& s) {
  return s;
}
Result<DeviceSnapshot> snapshot_from_json(const json& j) {
  return parse_as<DeviceSnapshot>(j, "device snapshot");
}
json vnpu_to_json(const Vnpu& v) {
  return v;
}
Result<Vnpu> vnpu_from_json(const json& j) {
  return parse_as<Vnpu>(j, "vNPU");
}
json owner_to_json(const VnpuOwner& o) {
  return o;
}
Result<VnpuOwner> owner_from_json(const json& j) {
  return parse_as<VnpuOwner>(j, "vNPU owner");
}

}  // namespace ascend::npu
