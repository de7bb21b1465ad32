#include "ascend/npu/smi/view.h"

#include <algorithm>
#include <map>
#include <set>

namespace ascend::npu::smi {

const Card* View::card(int id) const {
  for (const auto& c : cards) {
    if (c.id == id) return &c;
  }
  return nullptr;
}

const Device* View::device(int card_id, int chip_index) const {
  const Card* c = card(card_id);
  if (c == nullptr) return nullptr;
  for (const auto& d : c->devices) {
    if (d.chip_index == chip_index) return &d;
  }
  return nullptr;
}

std::size_t View::device_count() const {
  std::size_t n = 0;
  for (const auto& c : cards) n += c.devices.size();
  return n;
}

std::string vnpu_display_name(const HostState& s, const Vnpu& v) {
  return std::string(to_string(s.family)) + v.template_name;
}

Visible all_chips(const HostState& s) {
  Visible v;
  for (const auto& c : s.chips) v.chips.push_back(c.phy_id);
  return v;
}

namespace {

Device chip_device(const Chip& c) {
  Device d;
  d.chip = &c;
  d.card_id = c.card_id;
  d.chip_index = c.chip_index;
  d.logic_id = c.logic_id;
  d.phy_id = c.phy_id;
  d.name = c.name;
  d.aicore_count = c.aicore_count;
  d.hbm_total_mb = c.hbm_total_mb;
  d.hbm_used_mb = c.hbm_used_mb;
  d.mem_total_mb = c.mem_total_mb;
  d.mem_used_mb = c.mem_used_mb;
  d.aicore_usage_pct = c.aicore_usage_pct;
  return d;
}

// A vNPU seen on its own: the template's share of the parent chip. Memory used is the parent's usage scaled
// by the template's AICore share, so that the row stays plausible; the total is the template's memory.
Device vnpu_device(const HostState& s, const Chip& parent, const Vnpu& v) {
  Device d = chip_device(parent);
  d.vnpu = &v;
  d.tmpl = s.find_template(v.template_name);
  d.phy_id = v.id;
  d.name = vnpu_display_name(s, v);
  d.aicore_usage_pct = 0;
  if (d.tmpl == nullptr || parent.aicore_count <= 0) return d;
  const int share_num = d.tmpl->aicore;
  const int share_den = parent.aicore_count;
  auto scale = [&](int x) { return static_cast<int>(static_cast<long long>(x) * share_num / share_den); };
  d.aicore_count = d.tmpl->aicore;
  if (parent.hbm_total_mb > 0) {
    d.hbm_total_mb = d.tmpl->memory_mb;
    d.hbm_used_mb = std::min(scale(parent.hbm_used_mb), d.hbm_total_mb);
    d.mem_total_mb = scale(parent.mem_total_mb);
    d.mem_used_mb = scale(parent.mem_used_mb);
  } else {
    d.mem_total_mb = d.tmpl->memory_mb;
    d.mem_used_mb = std::min(scale(parent.mem_used_mb), d.mem_total_mb);
  }
  return d;
}

}  // namespace

View make_view(const HostState& s, const Visible& visible) {
  View view;
  view.state = &s;
  std::set<int> chips(visible.chips.begin(), visible.chips.end());
  std::map<int, std::vector<Device>> by_card;
  for (const auto& c : s.chips) {
    if (chips.count(c.phy_id) != 0) by_card[c.card_id].push_back(chip_device(c));
  }
  for (auto& [card, devs] : by_card) {
    std::sort(devs.begin(), devs.end(),
              [](const Device& a, const Device& b) { return a.chip_index < b.chip_index; });
  }
  // vNPU rows: only those whose parent chip is not itself visible (inside a container). They take the
  // parent's card number and the next free chip index on it, and logical ids after the chips'.
  std::vector<int> vnpu_ids = visible.vnpus;
  std::sort(vnpu_ids.begin(), vnpu_ids.end());
  int next_logic = 0;
  for (const auto& [card, devs] : by_card) {
    for (const auto& d : devs) next_logic = std::max(next_logic, d.logic_id + 1);
  }
  for (int id : vnpu_ids) {
    const Vnpu* v = s.vnpu(id);
    if (v == nullptr || chips.count(v->phy_id) != 0) continue;
    const Chip* parent = s.chip(v->phy_id);
    if (parent == nullptr) continue;
    Device d = vnpu_device(s, *parent, *v);
    auto& devs = by_card[parent->card_id];
    d.chip_index = devs.empty() ? 0 : devs.back().chip_index + 1;
    d.logic_id = next_logic++;
    devs.push_back(std::move(d));
  }
  for (auto& [card, devs] : by_card) view.cards.push_back(Card{card, std::move(devs)});
  return view;
}

}  // namespace ascend::npu::smi
