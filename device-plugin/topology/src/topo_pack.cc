// The topo policy's components and their packing into slots (topo_internal.h).
#include <algorithm>
#include <map>
#include <tuple>

#include "topo_internal.h"

namespace ascend::topology::detail::topo_parts {
namespace {

struct UnionFind {
  std::vector<int> parent;
  explicit UnionFind(int n) : parent(static_cast<std::size_t>(n)) {
    for (int i = 0; i < n; ++i) parent[static_cast<std::size_t>(i)] = i;
  }
  int find(int x) {
    while (parent[static_cast<std::size_t>(x)] != x) {
      parent[static_cast<std::size_t>(x)] =
          parent[static_cast<std::size_t>(parent[static_cast<std::size_t>(x)])];
      x = parent[static_cast<std::size_t>(x)];
    }
    return x;
  }
  void unite(int a, int b) {
    a = find(a);
    b = find(b);
    if (a != b) parent[static_cast<std::size_t>(std::max(a, b))] = std::min(a, b);
  }
};

// Packs components into the bins of the cluster, top-down (spine, leaf, bin), best fit (or roomiest
// first) with locality: the spine, leaf and bin of the previous component first. Inside one leaf component,
// units go to the same node when its links are faster than the leaf's, to other nodes when slower.
class Packer {
 public:
  Packer(const Cluster& c, const Slots& slots, int units, bool roomy, bool colocate)
      : c_(c),
        slots_(slots),
        roomy_(roomy),
        colocate_(colocate),
        used_(slots.bins.size(), 0),
        leaf_cap_(c.leaves.size(), 0),
        spine_cap_(c.spines.size(), 0),
        at_(static_cast<std::size_t>(units), {-1, -1}) {
    for (const auto& b : slots.bins) {
      leaf_cap_[static_cast<std::size_t>(c.nodes[static_cast<std::size_t>(b.node)].leaf)] += b.count;
      spine_cap_[static_cast<std::size_t>(c.nodes[static_cast<std::size_t>(b.node)].spine)] += b.count;
    }
    for (std::size_t s = 0; s < c_.spines.size(); ++s) all_spines_.push_back(static_cast<int>(s));
  }

  bool pack(const std::vector<SpineComp>& comps) {
    for (const auto& sc : comps) {
      if (!pack_spine(sc)) return false;
    }
    return true;
  }

  // (bin, set index) of each unit.
  const std::vector<std::pair<int, int>>& at() const { return at_; }

 private:
  int bin_free(int b) const {
    return slots_.bins[static_cast<std::size_t>(b)].count - used_[static_cast<std::size_t>(b)];
  }
  int node_of(int b) const { return slots_.bins[static_cast<std::size_t>(b)].node; }

  void put(int unit, int bin) {
    at_[static_cast<std::size_t>(unit)] = {bin, used_[static_cast<std::size_t>(bin)]++};
    const Node& n = c_.nodes[static_cast<std::size_t>(node_of(bin))];
    --leaf_cap_[static_cast<std::size_t>(n.leaf)];
    --spine_cap_[static_cast<std::size_t>(n.spine)];
    journal_.push_back(unit);
  }

  void undo_to(std::size_t mark) {
    while (journal_.size() > mark) {
      int unit = journal_.back();
      journal_.pop_back();
      int bin = at_[static_cast<std::size_t>(unit)].first;
      --used_[static_cast<std::size_t>(bin)];
      const Node& n = c_.nodes[static_cast<std::size_t>(node_of(bin))];
      ++leaf_cap_[static_cast<std::size_t>(n.leaf)];
      ++spine_cap_[static_cast<std::size_t>(n.spine)];
      at_[static_cast<std::size_t>(unit)] = {-1, -1};
    }
  }

  // Candidates that fit `need`: the last used one first, then best fit (least room) or roomiest, then index.
  std::vector<int> order(const std::vector<int>& ids, const std::vector<int>& cap, int need, int last) const {
    std::vector<int> out;
    for (int id : ids) {
      if (cap[static_cast<std::size_t>(id)] >= need) out.push_back(id);
    }
    std::stable_sort(out.begin(), out.end(), [&](int a, int b) {
      if ((a == last) != (b == last)) return a == last;
      int ca = cap[static_cast<std::size_t>(a)];
      int cb = cap[static_cast<std::size_t>(b)];
      return roomy_ ? ca > cb : ca < cb;
    });
    return out;
  }

  bool pack_bin(const std::vector<int>& units, int leaf) {
    int need = static_cast<int>(units.size());
    int best = -1;
    auto rank = [&](int b) {
      // Lower is better: [locality class, room].
      int node = node_of(b);
      bool fresh = std::find(comp_nodes_.begin(), comp_nodes_.end(), node) == comp_nodes_.end();
      int cls = 2;
      if (!colocate_ && slots_.spread[static_cast<std::size_t>(node)] != 0) {
        cls = fresh ? 0 : 2;
      } else if (b == last_bin_) {
        cls = 0;
      } else if (!fresh) {
        cls = 1;
      }
      int room = roomy_ ? -bin_free(b) : bin_free(b);
      return std::pair(cls, room);
    };
    for (int b : slots_.leaf_bins[static_cast<std::size_t>(leaf)]) {
      if (bin_free(b) < need) continue;
      if (best < 0 || rank(b) < rank(best)) best = b;
    }
    if (best < 0) return false;
    for (int u : units) put(u, best);
    last_bin_ = best;
    comp_nodes_.push_back(node_of(best));
    return true;
  }

  bool pack_leaf(const LeafComp& lc, int spine) {
    for (int leaf : order(c_.spine_leaves[static_cast<std::size_t>(spine)], leaf_cap_, lc.size, last_leaf_)) {
      std::size_t mark = journal_.size();
      comp_nodes_.clear();
      bool ok = true;
      for (const auto& nc : lc.nodes) {
        if (!pack_bin(nc, leaf)) {
          ok = false;
          break;
        }
      }
      if (ok) {
        last_leaf_ = leaf;
        return true;
      }
      undo_to(mark);
    }
    return false;
  }

  bool pack_spine(const SpineComp& sc) {
    for (int spine : order(all_spines_, spine_cap_, sc.size, last_spine_)) {
      std::size_t mark = journal_.size();
      bool ok = true;
      for (const auto& lc : sc.leaves) {
        if (!pack_leaf(lc, spine)) {
          ok = false;
          break;
        }
      }
      if (ok) {
        last_spine_ = spine;
        return true;
      }
      undo_to(mark);
    }
    return false;
  }

  const Cluster& c_;
  const Slots& slots_;
  bool roomy_;
  bool colocate_;
  std::vector<int> used_;
  std::vector<int> leaf_cap_;
  std::vector<int> spine_cap_;
  std::vector<std::pair<int, int>> at_;
  std::vector<int> journal_;
  std::vector<int> all_spines_;
  std::vector<int> comp_nodes_;
  int last_bin_ = -1;
  int last_leaf_ = -1;
  int last_spine_ = -1;
};

}  // namespace

std::vector<SpineComp> components(int units, const UnitGroups& ug, const std::array<int, 3>& target,
                                  bool by_size) {
  UnionFind uf(units);
  std::array<std::vector<int>, 3> root;
  for (int level = kNodeT; level <= kSpineT; ++level) {
    for (int ty = 0; ty < 3; ++ty) {
      if (target[static_cast<std::size_t>(ty)] != level) continue;
      for (const auto& set : ug.sets[static_cast<std::size_t>(ty)]) {
        for (std::size_t i = 1; i < set.size(); ++i) uf.unite(set[0], set[i]);
      }
    }
    auto& r = root[static_cast<std::size_t>(level)];
    r.resize(static_cast<std::size_t>(units));
    for (int x = 0; x < units; ++x) r[static_cast<std::size_t>(x)] = uf.find(x);
  }
  // Roots are the smallest unit of each component, so components come out in rank order.
  std::vector<SpineComp> out;
  std::map<int, std::size_t> spine_at;
  std::map<int, std::pair<std::size_t, std::size_t>> leaf_at;
  std::map<int, std::tuple<std::size_t, std::size_t, std::size_t>> node_at;
  for (int x = 0; x < units; ++x) {
    int sr = root[kSpineT][static_cast<std::size_t>(x)];
    int lr = root[kLeafT][static_cast<std::size_t>(x)];
    int nr = root[kNodeT][static_cast<std::size_t>(x)];
    auto si = spine_at.find(sr);
    if (si == spine_at.end()) {
      out.emplace_back();
      si = spine_at.emplace(sr, out.size() - 1).first;
    }
    SpineComp& sc = out[si->second];
    auto li = leaf_at.find(lr);
    if (li == leaf_at.end()) {
      sc.leaves.emplace_back();
      li = leaf_at.emplace(lr, std::pair(si->second, sc.leaves.size() - 1)).first;
    }
    LeafComp& lc = sc.leaves[li->second.second];
    auto ni = node_at.find(nr);
    if (ni == node_at.end()) {
      lc.nodes.emplace_back();
      ni = node_at.emplace(nr, std::tuple(si->second, li->second.second, lc.nodes.size() - 1)).first;
    }
    lc.nodes[std::get<2>(ni->second)].push_back(x);
    ++lc.size;
    ++sc.size;
  }
  if (by_size) {
    auto bigger = [](const auto& a, const auto& b) { return a.size > b.size; };
    for (auto& sc : out) {
      for (auto& lc : sc.leaves) {
        std::stable_sort(lc.nodes.begin(), lc.nodes.end(),
                         [](const auto& a, const auto& b) { return a.size() > b.size(); });
      }
      std::stable_sort(sc.leaves.begin(), sc.leaves.end(), bigger);
    }
    std::stable_sort(out.begin(), out.end(), bigger);
  }
  return out;
}

std::optional<Packing> pack(const Cluster& c, const Slots& slots, const std::vector<SpineComp>& comps,
                            int units, bool roomy, bool colocate) {
  Packer packer(c, slots, units, roomy, colocate);
  if (!packer.pack(comps)) return std::nullopt;
  return packer.at();
}

}  // namespace ascend::topology::detail::topo_parts
