// Lookups shared by the emulator's HostState and the seam's DeviceSnapshot (both hold the seam's Chip, Vnpu
// and VnpuTemplate lists): one definition each.
#pragma once

#include <algorithm>
#include <map>
#include <string_view>
#include <utility>
#include <vector>

#include "ascend/npu/seam.h"

namespace ascend::npu::detail {

template <typename T>
T* find_by_id(std::vector<T>& list, int id, int T::*field) {
  for (auto& x : list) {
    if (x.*field == id) return &x;
  }
  return nullptr;
}

template <typename T>
const T* find_by_id(const std::vector<T>& list, int id, int T::*field) {
  for (const auto& x : list) {
    if (x.*field == id) return &x;
  }
  return nullptr;
}

inline const VnpuTemplate* find_template(const std::vector<VnpuTemplate>& list, std::string_view name) {
  for (const auto& t : list) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// Cards in order, each with its chips' phy ids in chip-index order.
inline std::vector<std::vector<int>> cards_of(const std::vector<Chip>& chips) {
  std::map<int, std::vector<std::pair<int, int>>> by_card;
  for (const auto& c : chips) by_card[c.card_id].emplace_back(c.chip_index, c.phy_id);
  std::vector<std::vector<int>> out;
  for (auto& [card, list] : by_card) {
    std::sort(list.begin(), list.end());
    std::vector<int> phys;
    for (auto& p : list) phys.push_back(p.second);
    out.push_back(std::move(phys));
  }
  return out;
}

inline bool holds_vnpus(const std::vector<Vnpu>& vnpus, int phy_id) {
  return std::any_of(vnpus.begin(), vnpus.end(), [&](const Vnpu& v) { return v.phy_id == phy_id; });
}

}  // namespace ascend::npu::detail
