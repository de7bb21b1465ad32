// The topo policy's units and slots (topo_internal.h).
#include <algorithm>
#include <array>
#include <bit>
#include <limits>
#include <set>

#include "topo_internal.h"

namespace ascend::topology::detail::topo_parts {
namespace {

// The slowest level inside any block of `block` consecutive chips of the canonical order of `mask`.
Level block_level(const NodeType& t, std::uint64_t mask, int block) {
  Level worst = Level::kSio;
  if (block <= 1) return worst;
  std::array<int, 64> chips{};
  int n = 0;
  for (int s : t.canonical) {
    if ((mask >> s & 1) != 0) chips[static_cast<std::size_t>(n++)] = s;
  }
  for (int b = 0; b < n; b += block) {
    for (int i = b; i < std::min(n, b + block); ++i) {
      for (int j = i + 1; j < std::min(n, b + block); ++j) {
        worst = std::max(worst,
                         t.level_of(chips[static_cast<std::size_t>(i)], chips[static_cast<std::size_t>(j)]));
      }
    }
  }
  return worst;
}

bool meets(Level l, Quality q) {
  if (q == kSioQ) return l == Level::kSio;
  if (q == kHccsQ) return l <= Level::kHccs;
  return true;
}

}  // namespace

std::uint64_t first_canonical(const NodeType& t, std::uint64_t m, int k) {
  std::uint64_t out = 0;
  for (int s : t.canonical) {
    if (k == 0) break;
    if ((m >> s & 1) != 0) {
      out |= 1ULL << s;
      --k;
    }
  }
  return out;
}

std::uint64_t select_unit(const NodeType& t, std::uint64_t free, int u, int block, Quality q) {
  if (std::popcount(free) < u) return 0;
  MaskChoice c = choose_mask(t, free, 0, u);
  if (c.mask != 0 && meets(block_level(t, c.mask, block), q)) return c.mask;
  if (q == kAnyQ) return c.mask != 0 ? c.mask : first_canonical(t, free, u);
  if (block <= 1 || u % block != 0) return 0;
  // Block by block, each from the fullest-used card (SIO) or domain (HCCS) that still holds a block.
  const auto& groups = q == kSioQ ? t.card_masks : t.domain_masks;
  std::uint64_t sel = 0;
  for (int b = 0; b < u / block; ++b) {
    std::uint64_t best = 0;
    int best_free = std::numeric_limits<int>::max();
    for (auto g : groups) {
      int f = std::popcount(free & ~sel & g);
      if (f >= block && f < best_free) {
        best = g;
        best_free = f;
      }
    }
    if (best == 0) return 0;
    sel |= first_canonical(t, free & ~sel & best, block);
  }
  return meets(block_level(t, sel, block), q) ? sel : 0;
}

namespace {

// True when any u free chips of the node make a unit of quality q: one HCCS domain holds the whole node
// (910B, A3) and q does not ask for SIO.
bool any_set_will_do(const NodeType& t, Quality q, int block) {
  if (q == kSioQ && block > 1) return false;
  return t.domain_masks.size() == 1 && t.domain.front() >= 0;
}

std::vector<std::uint64_t> unit_sets(const NodeType& t, std::uint64_t free, int u, int block, Quality q,
                                     int limit) {
  std::vector<std::uint64_t> out;
  while (static_cast<int>(out.size()) < limit && std::popcount(free) >= u) {
    std::uint64_t m = select_unit(t, free, u, block, q);
    if (m == 0) break;
    out.push_back(m);
    free &= ~m;
  }
  return out;
}

// Slowest link between two chips of one node type.
double slowest_link(const Cluster& c, const NodeType& t) {
  double bw = std::numeric_limits<double>::infinity();
  for (int a = 0; a < t.size; ++a) {
    for (int b = a + 1; b < t.size; ++b) bw = std::min(bw, c.bw.bytes_per_s(t.level_of(a, b)));
  }
  return bw;
}

}  // namespace

Slots compute_slots(const Cluster& c, const ClusterState& s, int u, int block, Quality q) {
  Slots out;
  out.u = u;
  out.block = block;
  out.q = q;
  out.leaf_bins.resize(c.leaves.size());
  out.spread.resize(c.nodes.size());
  std::vector<char> type_spreads;
  for (const auto& t : c.types)
    type_spreads.push_back(slowest_link(c, t) < c.bw.bytes_per_s(Level::kLeaf) ? 1 : 0);
  for (std::size_t node = 0; node < c.nodes.size(); ++node) {
    const NodeType& t = c.type_of(static_cast<int>(node));
    out.spread[node] = type_spreads[static_cast<std::size_t>(c.nodes[node].type)];
    bool by_domain = q != kAnyQ && t.domain_masks.size() > 1;
    for (auto d : t.domain_masks) by_domain = by_domain && std::popcount(d) >= u;
    std::vector<std::uint64_t> parts = by_domain ? t.domain_masks : std::vector<std::uint64_t>{t.all()};
    for (auto allowed : parts) {
      Bin b;
      b.node = static_cast<int>(node);
      b.allowed = allowed;
      std::uint64_t free = s.free[node] & allowed;
      if (any_set_will_do(t, q, block)) {
        b.count = std::popcount(free) / u;  // chip sets are picked when used
      } else {
        b.sets = unit_sets(t, free, u, block, q, t.size);
        b.count = static_cast<int>(b.sets.size());
      }
      if (b.count == 0) continue;
      out.total += b.count;
      out.leaf_bins[static_cast<std::size_t>(c.nodes[node].leaf)].push_back(
          static_cast<int>(out.bins.size()));
      out.bins.push_back(std::move(b));
    }
  }
  return out;
}

// Fills the chip sets of the first `used` units of a bin.
void materialize(const Cluster& c, const ClusterState& s, Slots& slots, int bin, int used) {
  Bin& b = slots.bins[static_cast<std::size_t>(bin)];
  if (static_cast<int>(b.sets.size()) >= used) return;
  b.sets = unit_sets(c.type_of(b.node), s.free[static_cast<std::size_t>(b.node)] & b.allowed, slots.u,
                     slots.block, slots.q, used);
}

UnitGroups unit_groups(const Groups& g, int u) {
  UnitGroups ug;
  std::array<std::set<std::vector<int>>, 3> seen;
  auto add = [&](int ty, const std::vector<int>& ranks) {
    std::vector<int> units;
    units.reserve(ranks.size());
    for (int r : ranks) units.push_back(r / u);
    std::sort(units.begin(), units.end());
    units.erase(std::unique(units.begin(), units.end()), units.end());
    if (units.size() < 2) return;
    ug.max_k[static_cast<std::size_t>(ty)] =
        std::max(ug.max_k[static_cast<std::size_t>(ty)], static_cast<int>(ranks.size()));
    if (seen[static_cast<std::size_t>(ty)].insert(units).second)
      ug.sets[static_cast<std::size_t>(ty)].push_back(std::move(units));
  };
  for (const auto& grp : g.tp) add(kTp, grp);
  for (const auto& grp : g.dp) add(kDp, grp);
  for (const auto& [a, b] : g.pp) add(kPp, {a, b});
  return ug;
}

}  // namespace ascend::topology::detail::topo_parts
