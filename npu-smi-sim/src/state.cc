#include "ascend/npu/state.h"

#include "ascend/npu/smi/telemetry.h"

#include <array>
#include <charconv>
#include <string>

#include "lookup.h"

namespace ascend::npu {

const Chip* HostState::chip(int phy_id) const {
  return detail::find_by_id(chips, phy_id, &Chip::phy_id);
}

Chip* HostState::chip(int phy_id) {
  return detail::find_by_id(chips, phy_id, &Chip::phy_id);
}

const Vnpu* HostState::vnpu(int id) const {
  return detail::find_by_id(vnpus, id, &Vnpu::id);
}

const VnpuTemplate* HostState::find_template(std::string_view name) const {
  return detail::find_template(templates, name);
}

Link HostState::link(int phy_a, int phy_b) const {
  const Chip* a = chip(phy_a);
  const Chip* b = chip(phy_b);
  if (a == nullptr || b == nullptr) return Link::kNa;
  if (phy_a == phy_b) return Link::kSelf;
  bool same_domain = a->hccs_domain >= 0 && a->hccs_domain == b->hccs_domain;
  switch (family) {
    case Family::k910_93:
      if (a->card_id == b->card_id) return Link::kSio;
      return same_domain ? Link::kHccsSw : Link::kSys;
    case Family::k310P:
      if (a->card_id == b->card_id) return Link::kPix;
      return a->numa_node == b->numa_node ? Link::kPhb : Link::kSys;
    case Family::k910:
    case Family::k910B:
      if (same_domain) return Link::kHccs;
      return a->numa_node == b->numa_node ? Link::kPhb : Link::kSys;
  }
  return Link::kNa;
}

std::vector<std::vector<int>> HostState::cards() const {
  return detail::cards_of(chips);
}

bool HostState::holds_vnpus(int phy_id) const {
  return detail::holds_vnpus(vnpus, phy_id);
}

DeviceNode HostState::chip_node(int phy_id) const {
  return {"/dev/davinci" + std::to_string(phy_id), majors.davinci, phy_id, 0660};
}

DeviceNode HostState::vnpu_node(int vnpu_id) const {
  return {"/dev/vdavinci" + std::to_string(vnpu_id), majors.vdavinci, vnpu_id, 0660};
}

std::vector<DeviceNode> HostState::control_nodes() const {
  return {{"/dev/davinci_manager", majors.manager, 0, 0660},
          {"/dev/devmm_svm", majors.svm, 0, 0660},
          {"/dev/hisi_hdc", majors.hdc, 0, 0660}};
}

HostState::operator DeviceSnapshot() const {
  return to_snapshot(*this);
}

DeviceSnapshot to_snapshot(const HostState& s) {
  DeviceSnapshot d;
  d.backend = "emulator";
  d.family = s.family;
  d.chip_type = s.chip_type;
  d.driver_version = s.driver_version;
  d.resource_name = s.resource_name;
  d.vnpu_capacity = s.vnpu_capacity;
  d.templates = s.templates;
  d.chips = s.chips;
  for (const auto& c : s.chips) d.chip_nodes.push_back(s.chip_node(c.phy_id));
  d.vnpus = s.vnpus;
  for (const auto& v : s.vnpus) d.vnpu_nodes.push_back(s.vnpu_node(v.id));
  d.control = s.control_nodes();
  for (const auto& a : s.chips) {
    for (const auto& b : s.chips) d.links.push_back(s.link(a.phy_id, b.phy_id));
  }
  // The seam numbers HCCS domains from the links (as a DCMI host must), not from the profile's labels.
  const std::vector<int> domains = hccs_domains(d);
  for (std::size_t i = 0; i < d.chips.size(); ++i) {
    Chip& c = d.chips[i];
    c.hccs_domain = domains[i];
    // What the emulated libdcmi.so reports of the chip (dcmi_get_device_chip_info, _die_v2).
    c.chip_version = smi::kChipVersion;
    c.vdie_id = smi::vdie_id(c, s.family);
  }
  d.vnpu_mode = s.vnpu_mode;
  d.boot_id = s.boot_id;
  return d;
}

Result<DeviceMajors> parse_majors(std::string_view s) {
  std::array<int, 5> v{};
  std::size_t i = 0;
  const char* p = s.data();
  const char* end = s.data() + s.size();
  for (; i < v.size(); ++i) {
    auto [next, ec] = std::from_chars(p, end, v[i]);
    if (ec != std::errc() || v[i] < 0) break;
    p = next;
    if (i + 1 < v.size()) {
      if (p == end || *p != ',') break;
      ++p;
    }
  }
  if (i != v.size() || p != end) {
    return Error::invalid("'" + std::string(s) + "': expected five numbers a,b,c,d,e");
  }
  return DeviceMajors{v[0], v[1], v[2], v[3], v[4]};
}

}  // namespace ascend::npu
