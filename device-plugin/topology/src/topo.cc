// The topo policy (see README, "How topo places a job").
//
// 1. Units. A pod is atomic (one node). When a TP group spans g pods (tp = g x pod size) and fits a node,
//    g pods form one unit, placed as one HCCS-clean chip set; otherwise a unit is a pod.
// 2. Slots. Each node offers chip sets for units, taken one after the other with the node-level rules
//    (choose), preferring sets whose TP blocks each sit inside one HCCS domain ("clean").
// 3. Targets. Every kind of group (TP, DP, PP) that spans units gets a target level: node, leaf, spine or
//    core. A combination of targets turns into nested components (units that must share a node, a leaf, a
//    spine), and an upper bound of the cost. Combinations are tried cheapest bound first.
// 4. Packing. Components are packed top-down (spine, leaf, node), best fit, preferring the domain the
//    previous component used, with backtracking over spines and leaves.
// 5. Every packing is scored with the exact cost model; the best by (TP groups outside HCCS, total cost)
// wins,
//    first-fit's placement included as one more candidate. Clean slots only are tried first.
#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "internal.h"
#include "place_internal.h"

namespace ascend::topology::detail {
namespace {

enum Target : int { kNodeT = 0, kLeafT = 1, kSpineT = 2, kCoreT = 3 };
constexpr int kTp = 0;
constexpr int kDp = 1;
constexpr int kPp = 2;

// Consecutive `block` chips of the canonical order share one HCCS domain.
bool unit_clean(const NodeType& t, std::uint64_t mask, int block) {
  if (block <= 1) return true;
  int i = 0;
  int dom = -2;
  for (int s : t.canonical) {
    if ((mask >> s & 1) == 0) continue;
    if (i % block == 0) dom = t.domain[static_cast<std::size_t>(s)];
    if (t.domain[static_cast<std::size_t>(s)] < 0 || t.domain[static_cast<std::size_t>(s)] != dom)
      return false;
    ++i;
  }
  return true;
}

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

struct Unit {
  std::uint64_t mask = 0;
  bool clean = false;
};

Unit select_unit(const NodeType& t, std::uint64_t free, int u, int block) {
  if (std::popcount(free) < u) return {};
  MaskChoice c = choose_mask(t, free, 0, u);
  if (c.mask != 0 && unit_clean(t, c.mask, block)) return {c.mask, true};
  if (block > 1 && u % block == 0) {
    std::uint64_t sel = 0;
    bool ok = true;
    for (int b = 0; b < u / block && ok; ++b) {
      std::uint64_t best = 0;
      int best_free = std::numeric_limits<int>::max();
      for (auto d : t.domain_masks) {
        int f = std::popcount(free & ~sel & d);
        if (f >= block && f < best_free) {
          best = d;
          best_free = f;
        }
      }
      if (best == 0) {
        ok = false;
      } else {
        sel |= first_canonical(t, free & ~sel & best, block);
      }
    }
    if (ok && unit_clean(t, sel, block)) return {sel, true};
  }
  if (c.mask != 0) return {c.mask, false};
  return {first_canonical(t, free, u), false};
}

struct Slots {
  std::vector<int> count;                      // per node: units it can take
  std::vector<std::vector<std::uint64_t>> at;  // per node: their chip sets (filled by materialize)
  int total = 0;
  int u = 0;
  int block = 0;
};

// True when every chip set of a node type is clean and select_unit never fails while u chips are free:
// one HCCS domain holds the whole node (910B, A3).
bool single_domain(const NodeType& t) {
  return t.domain_masks.size() == 1 && t.domain.front() >= 0;
}

std::vector<std::uint64_t> unit_sets(const NodeType& t, std::uint64_t free, int u, int block, bool clean_only,
                                     int limit) {
  std::vector<std::uint64_t> out;
  while (static_cast<int>(out.size()) < limit && std::popcount(free) >= u) {
    Unit unit = select_unit(t, free, u, block);
    if (unit.mask == 0 || (clean_only && !unit.clean)) break;
    out.push_back(unit.mask);
    free &= ~unit.mask;
  }
  return out;
}

Slots compute_slots(const Cluster& c, const ClusterState& s, int u, int block, bool clean_only) {
  Slots out;
  out.u = u;
  out.block = block;
  out.count.resize(c.nodes.size());
  out.at.resize(c.nodes.size());
  for (std::size_t node = 0; node < c.nodes.size(); ++node) {
    const NodeType& t = c.type_of(static_cast<int>(node));
    if (single_domain(t)) {
      out.count[node] = std::popcount(s.free[node]) / u;  // chip sets are picked when used
    } else {
      out.at[node] = unit_sets(t, s.free[node], u, block, clean_only, t.size);
      out.count[node] = static_cast<int>(out.at[node].size());
    }
    out.total += out.count[node];
  }
  return out;
}

// Fills the chip sets of the first `used` units of a single-domain node.
void materialize(const Cluster& c, const ClusterState& s, Slots& slots, int node, int used) {
  auto& at = slots.at[static_cast<std::size_t>(node)];
  if (static_cast<int>(at.size()) >= used) return;
  at = unit_sets(c.type_of(node), s.free[static_cast<std::size_t>(node)], slots.u, slots.block, false, used);
}

struct UnitGroups {
  std::array<std::vector<std::vector<int>>, 3> sets;  // distinct unit sets of groups spanning 2+ units
  std::array<int, 3> max_k{};                         // ranks in the largest such group
};

UnitGroups unit_groups(const Groups& g, int u) {
  UnitGroups ug;
  std::array<std::set<std::vector<int>>, 3> seen;
  auto add = [&](int ty, const std::vector<int>& ranks) {
    std::vector<int> units;
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

struct LeafComp {
  std::vector<std::vector<int>> nodes;  // node components: units that share a node
  int size = 0;
};
struct SpineComp {
  std::vector<LeafComp> leaves;
  int size = 0;
};

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

// Packs components into the slots of the cluster, top-down, best fit with locality.
class Packer {
 public:
  Packer(const Cluster& c, const Slots& slots, int units)
      : c_(c),
        slots_(slots),
        used_(c.nodes.size(), 0),
        leaf_cap_(c.leaves.size(), 0),
        spine_cap_(c.spines.size(), 0),
        at_(static_cast<std::size_t>(units), {-1, -1}) {
    for (std::size_t n = 0; n < c.nodes.size(); ++n) {
      int k = slots.count[n];
      leaf_cap_[static_cast<std::size_t>(c.nodes[n].leaf)] += k;
      spine_cap_[static_cast<std::size_t>(c.nodes[n].spine)] += k;
    }
  }

  bool pack(const std::vector<SpineComp>& comps) {
    for (const auto& sc : comps) {
      if (!pack_spine(sc)) return false;
    }
    return true;
  }

  // (node, slot index) of each unit.
  const std::vector<std::pair<int, int>>& at() const { return at_; }

 private:
  int node_free(int n) const {
    return slots_.count[static_cast<std::size_t>(n)] - used_[static_cast<std::size_t>(n)];
  }

  void put(int unit, int node) {
    at_[static_cast<std::size_t>(unit)] = {node, used_[static_cast<std::size_t>(node)]++};
    --leaf_cap_[static_cast<std::size_t>(c_.nodes[static_cast<std::size_t>(node)].leaf)];
    --spine_cap_[static_cast<std::size_t>(c_.nodes[static_cast<std::size_t>(node)].spine)];
    journal_.push_back(unit);
  }

  void undo_to(std::size_t mark) {
    while (journal_.size() > mark) {
      int unit = journal_.back();
      journal_.pop_back();
      int node = at_[static_cast<std::size_t>(unit)].first;
      --used_[static_cast<std::size_t>(node)];
      ++leaf_cap_[static_cast<std::size_t>(c_.nodes[static_cast<std::size_t>(node)].leaf)];
      ++spine_cap_[static_cast<std::size_t>(c_.nodes[static_cast<std::size_t>(node)].spine)];
      at_[static_cast<std::size_t>(unit)] = {-1, -1};
    }
  }

  // Candidates that fit `need`: the last used one first, then best fit (least room), then index.
  static std::vector<int> order(const std::vector<int>& ids, const std::vector<int>& cap, int need,
                                int last) {
    std::vector<int> out;
    for (int id : ids) {
      if (cap[static_cast<std::size_t>(id)] >= need) out.push_back(id);
    }
    std::stable_sort(out.begin(), out.end(), [&](int a, int b) {
      if ((a == last) != (b == last)) return a == last;
      return cap[static_cast<std::size_t>(a)] < cap[static_cast<std::size_t>(b)];
    });
    return out;
  }

  bool pack_node(const std::vector<int>& units, int leaf) {
    int need = static_cast<int>(units.size());
    int best = -1;
    for (int n : c_.leaf_nodes[static_cast<std::size_t>(leaf)]) {
      int f = node_free(n);
      if (f < need) continue;
      if (n == last_node_) {
        best = n;
        break;
      }
      if (best < 0 || f < node_free(best)) best = n;
    }
    if (best < 0) return false;
    for (int u : units) put(u, best);
    last_node_ = best;
    return true;
  }

  bool pack_leaf(const LeafComp& lc, int spine) {
    for (int leaf : order(c_.spine_leaves[static_cast<std::size_t>(spine)], leaf_cap_, lc.size, last_leaf_)) {
      std::size_t mark = journal_.size();
      bool ok = true;
      for (const auto& nc : lc.nodes) {
        if (!pack_node(nc, leaf)) {
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
    if (all_spines_.empty()) {
      for (std::size_t s = 0; s < c_.spines.size(); ++s) all_spines_.push_back(static_cast<int>(s));
    }
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
  std::vector<int> used_;
  std::vector<int> leaf_cap_;
  std::vector<int> spine_cap_;
  std::vector<std::pair<int, int>> at_;
  std::vector<int> journal_;
  std::vector<int> all_spines_;
  int last_node_ = -1;
  int last_leaf_ = -1;
  int last_spine_ = -1;
};

// Slowest link between two chips of one node, over the cluster's node types.
double slowest_intra_node(const Cluster& c) {
  double bw = std::numeric_limits<double>::infinity();
  for (const auto& t : c.types) {
    for (int a = 0; a < t.size; ++a) {
      for (int b = a + 1; b < t.size; ++b) bw = std::min(bw, c.bw.bytes_per_s(t.level_of(a, b)));
    }
  }
  return std::isfinite(bw) ? bw : c.bw.bytes_per_s(Level::kPcie);
}

bool better(const Evaluation& a, const Evaluation& b) {
  if (a.tp_groups_outside_hccs != b.tp_groups_outside_hccs)
    return a.tp_groups_outside_hccs < b.tp_groups_outside_hccs;
  return a.cost.total < b.cost.total * (1 - 1e-12);
}

}  // namespace

Result<Placement> topo(const Cluster& c, const ClusterState& state, const Job& job, const Groups& groups) {
  const int n = pod_size_of(job, c);
  const int pods = job.npus / n;
  std::vector<int> pods_per_unit;
  if (job.tp > n && job.tp % n == 0 && job.tp <= c.max_node_size()) pods_per_unit.push_back(job.tp / n);
  pods_per_unit.push_back(1);

  const std::array<double, 3> bytes = {job.comm.tp, job.comm.dp, job.comm.pp};
  std::array<double, 4> target_bw = {slowest_intra_node(c), c.bw.bytes_per_s(Level::kLeaf),
                                     c.bw.bytes_per_s(Level::kSpine), c.bw.bytes_per_s(Level::kCore)};

  Placement best;
  bool have = false;
  int capacity = 0;
  std::vector<int> order;
  for (bool clean : {true, false}) {
    for (int g : pods_per_unit) {
      if (pods % g != 0) continue;
      const int u = n * g;
      const int units = pods / g;
      Slots slots = compute_slots(c, state, u, std::min(job.tp, u), clean);
      if (!clean && g == 1) capacity = slots.total;
      if (slots.total < units) continue;
      UnitGroups ug = unit_groups(groups, u);
      struct Combo {
        std::array<int, 3> target{kCoreT, kCoreT, kCoreT};
        double bound = 0;
      };
      std::vector<Combo> combos(1);
      for (int ty = 0; ty < 3; ++ty) {
        if (ug.sets[static_cast<std::size_t>(ty)].empty()) continue;
        std::vector<int> allowed = {kNodeT, kLeafT, kSpineT, kCoreT};
        if (clean && ty == kTp) allowed = {kNodeT};
        std::vector<Combo> next;
        for (const auto& cb : combos) {
          for (int t : allowed) {
            Combo x = cb;
            x.target[static_cast<std::size_t>(ty)] = t;
            double bw = target_bw[static_cast<std::size_t>(t)];
            int k = ug.max_k[static_cast<std::size_t>(ty)];
            x.bound += ty == kPp ? bytes[kPp] / bw : ring_cost(k, bytes[static_cast<std::size_t>(ty)], bw);
            next.push_back(x);
          }
        }
        combos = std::move(next);
      }
      std::stable_sort(combos.begin(), combos.end(),
                       [](const Combo& a, const Combo& b) { return a.bound < b.bound; });
      double round_best = std::numeric_limits<double>::infinity();
      for (const auto& cb : combos) {
        if (cb.bound >= round_best) break;
        for (bool by_size : {false, true}) {
          auto comps = components(units, ug, cb.target, by_size);
          Packer packer(c, slots, units);
          if (!packer.pack(comps)) continue;
          Placement p;
          p.job = job.name;
          p.policy = Policy::kTopo;
          p.pod_size = n;
          p.chips.resize(static_cast<std::size_t>(job.npus));
          for (int x = 0; x < units; ++x) {
            auto [node, slot] = packer.at()[static_cast<std::size_t>(x)];
            materialize(c, state, slots, node, slot + 1);
            chips_in_order(c.type_of(node),
                           slots.at[static_cast<std::size_t>(node)][static_cast<std::size_t>(slot)], true,
                           order);
            for (int k = 0; k < u; ++k)
              p.chips[static_cast<std::size_t>(x * u + k)] = {node, order[static_cast<std::size_t>(k)]};
          }
          p.eval = evaluate(c, job, groups, p.chips);
          round_best = std::min(round_best, p.eval.cost.total);
          if (!have || better(p.eval, best.eval)) {
            best = std::move(p);
            have = true;
          }
        }
      }
    }
    if (have && best.eval.tp_groups_outside_hccs == 0) break;
  }
  auto ff = first_fit(c, state, job, groups);
  if (ff.ok() && (!have || better(ff->eval, best.eval))) {
    best = std::move(ff).value();
    best.policy = Policy::kTopo;
    have = true;
  }
  if (!have) {
    return Error(ENOSPC, "needs " + std::to_string(pods) + " pods of " + std::to_string(n) +
                             " NPUs, each on one node; the free chips hold " + std::to_string(capacity));
  }
  return best;
}

}  // namespace ascend::topology::detail
