#include "ascend/plugin/preferred.h"

#include <algorithm>
#include <map>
#include <set>

#include "ascend/topology/choose.h"

namespace ascend::plugin {

namespace {

bool by_position(const DeviceEntry* a, const DeviceEntry* b) {
  return std::tie(a->phy, a->vnpu_id, a->core) < std::tie(b->phy, b->vnpu_id, b->core);
}

// Tokens: one chip that has at least `size` of the available tokens (and the must-include ones), the
// tightest such chip first; else the must-include tokens and then the lowest.
std::vector<const DeviceEntry*> prefer_cores(const npu::DeviceSnapshot& host, const Ledger& ledger,
                                             const std::vector<const DeviceEntry*>& avail,
                                             const std::vector<const DeviceEntry*>& must, int size) {
  std::map<int, std::vector<const DeviceEntry*>> by_chip;
  for (const auto* e : avail) by_chip[e->phy].push_back(e);
  std::set<int> must_chips;
  for (const auto* e : must) must_chips.insert(e->phy);
  int best = -1;
  int best_left = 0;
  for (const auto& [phy, tokens] : by_chip) {
    if (must_chips.size() > 1 || (must_chips.size() == 1 && *must_chips.begin() != phy)) continue;
    if (static_cast<int>(tokens.size()) < size) continue;
    int left = host.vnpu_capacity.aicore - ledger.load(host, phy).aicore;
    if (best < 0 || left < best_left) {
      best = phy;
      best_left = left;
    }
  }
  std::vector<const DeviceEntry*> out = must;
  auto take_from = [&](const std::vector<const DeviceEntry*>& pool) {
    for (const auto* e : pool) {
      if (static_cast<int>(out.size()) >= size) break;
      if (std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
    }
  };
  if (best >= 0) take_from(by_chip[best]);
  take_from(avail);
  return out;
}

}  // namespace

Result<std::vector<std::string>> preferred_allocation(const npu::DeviceSnapshot& host,
                                                      const ResourceSpec& res, const Ledger& ledger,
                                                      const std::vector<std::string>& available,
                                                      const std::vector<std::string>& must_include,
                                                      int size) {
  const std::string what = "preferred allocation of " + std::to_string(size) + " " + res.name;
  const auto table = device_table(host, res, ledger);
  std::vector<std::string> unknown;
  auto lookup = [&](const std::vector<std::string>& ids) {
    std::vector<const DeviceEntry*> out;
    for (const auto& id : ids) {
      auto it = std::find_if(table.begin(), table.end(), [&](const DeviceEntry& e) { return e.id == id; });
      if (it == table.end()) {
        unknown.push_back(id);
      } else if (std::find(out.begin(), out.end(), &*it) == out.end()) {
        out.push_back(&*it);
      }
    }
    std::sort(out.begin(), out.end(), by_position);
    return out;
  };
  auto avail = lookup(available);
  auto must = lookup(must_include);
  if (!unknown.empty()) return Error::invalid(what + ": " + name_ids("unknown device ids", unknown));
  for (const auto* m : must) {
    if (std::find(avail.begin(), avail.end(), m) == avail.end()) {
      return Error::invalid(what + ": must-include id " + m->id + " is not among the available ids");
    }
  }
  if (size <= 0 || size > static_cast<int>(avail.size()) || static_cast<int>(must.size()) > size) {
    return Error::invalid(what + ": cannot pick " + std::to_string(size) + " of " +
                          std::to_string(avail.size()) + " available ids with " +
                          std::to_string(must.size()) + " that must be included");
  }

  std::vector<const DeviceEntry*> picked;
  switch (res.kind) {
    case DeviceKind::kChip: {
      std::vector<int> free;
      std::vector<int> need;
      free.reserve(avail.size());
      need.reserve(must.size());
      for (const auto* e : avail) free.push_back(e->phy);
      for (const auto* e : must) need.push_back(e->phy);
      ASCEND_ASSIGN(std::vector<int> chosen, topology::choose(host, free, need, size), what);
      for (int phy : chosen) {
        auto it =
            std::find_if(avail.begin(), avail.end(), [phy](const DeviceEntry* e) { return e->phy == phy; });
        if (it == avail.end()) {
          return Error(EPROTO, what + ": the allocator chose chip " + std::to_string(phy) +
                                   ", which is not available");
        }
        picked.push_back(*it);
      }
      break;
    }
    case DeviceKind::kVnpu:
      picked = must;
      for (const auto* e : avail) {
        if (static_cast<int>(picked.size()) >= size) break;
        if (std::find(picked.begin(), picked.end(), e) == picked.end()) picked.push_back(e);
      }
      break;
    case DeviceKind::kCore:
      picked = prefer_cores(host, ledger, avail, must, size);
      break;
  }
  std::sort(picked.begin(), picked.end(), by_position);
  std::vector<std::string> out;
  out.reserve(picked.size());
  for (const auto* e : picked) out.push_back(e->id);
  return out;
}

}  // namespace ascend::plugin
