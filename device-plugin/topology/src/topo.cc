// The topo policy (see README, "How topo places a job").
//
// 1. Units. A pod is atomic (one node). When a TP group spans g pods (tp = g x pod size) and fits a node,
//    g pods form one unit, placed as one chip set; otherwise a unit is a pod.
// 2. Slots. Each node offers chip sets for units, taken one after the other with the node-level rules
//    (choose). A quality tier says how close the chips of each TP block must be: all on one card (SIO), in
//    one HCCS domain, or anywhere on the node. Tiers are tried best first.
// 3. Targets. Every kind of group (TP, DP, PP) that spans units gets a target level: node, leaf, spine or
//    core. A combination of targets turns into nested components (units that must share a node, a leaf, a
//    spine), and an upper bound of the cost. Combinations are tried cheapest bound first.
// 4. Packing. Components are packed top-down (spine, leaf, node), best fit, preferring the domain the
//    previous component used, with backtracking over spines and leaves.
// 5. Layout. Ranks of a unit go onto its chips in (domain, card, chip) order, the parallel dimensions taken
//    in each of their six orders of significance.
// 6. Every candidate is scored with the exact cost model; the best by (TP groups outside HCCS, total cost)
//    wins, first-fit's placement included. A bounded local search (swap and move ranks and pods) polishes
//    the winner of jobs up to 256 NPUs.
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

enum Quality : int { kSioQ = 0, kHccsQ = 1, kAnyQ = 2 };

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

// A chip set of u chips for one unit whose TP blocks meet quality q, or 0.
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

// Where units go: a node, or one HCCS domain of a node when the clean tiers split multi-domain nodes (an
// Ascend 910 ring) so that a group can be asked to stay inside one ring.
struct Bin {
  int node = 0;
  std::uint64_t allowed = 0;        // chips of the node this bin may use
  int count = 0;                    // units it can take
  std::vector<std::uint64_t> sets;  // their chip sets (filled by materialize)
};

struct Slots {
  std::vector<Bin> bins;
  std::vector<std::vector<int>> leaf_bins;  // bins of each leaf, in node order
  std::vector<char> spread;                 // per node: two units on it talk slower than over the leaf
  int total = 0;
  int u = 0;
  int block = 0;
  Quality q = kAnyQ;
};

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

struct UnitGroups {
  std::array<std::vector<std::vector<int>>, 3> sets;  // distinct unit sets of groups spanning 2+ units
  std::array<int, 3> max_k{};                         // ranks in the largest such group
};

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

bool better(const Evaluation& a, const Evaluation& b) {
  if (a.tp_groups_outside_hccs != b.tp_groups_outside_hccs)
    return a.tp_groups_outside_hccs < b.tp_groups_outside_hccs;
  return a.cost.total < b.cost.total * (1 - 1e-12);
}

// The six orders of significance of (t, d, p) used to lay ranks onto chips, most significant first.
// {p, d, t} is rank order for tp-dp-pp, {d, p, t} for tp-pp-dp.
constexpr int kLayouts[6][3] = {{2, 1, 0}, {1, 2, 0}, {2, 0, 1}, {0, 2, 1}, {1, 0, 2}, {0, 1, 2}};

// Every rank's (t, d, p), computed once per job.
std::vector<std::array<int, 3>> coords_of(const Job& job) {
  std::vector<std::array<int, 3>> out(static_cast<std::size_t>(job.npus));
  for (int r = 0; r < job.npus; ++r) {
    Coord c = coord_of(job, r);
    out[static_cast<std::size_t>(r)] = {c.t, c.d, c.p};
  }
  return out;
}

// A set of ranks and the chips they share out among themselves, chips in canonical order.
struct Share {
  std::vector<int> ranks;  // ascending
  std::vector<ChipRef> chips;
};

// Lays every share's ranks onto its chips in the order `sig`.
void lay_out(const std::vector<std::array<int, 3>>& coords, const std::vector<Share>& shares,
             const int (&sig)[3], std::vector<ChipRef>& chips) {
  std::vector<std::pair<std::array<int, 3>, int>> rs;
  for (const auto& sh : shares) {
    rs.clear();
    for (int r : sh.ranks) {
      const auto& v = coords[static_cast<std::size_t>(r)];
      rs.push_back({{v[static_cast<std::size_t>(sig[0])], v[static_cast<std::size_t>(sig[1])],
                     v[static_cast<std::size_t>(sig[2])]},
                    r});
    }
    std::sort(rs.begin(), rs.end());
    for (std::size_t i = 0; i < rs.size(); ++i) chips[static_cast<std::size_t>(rs[i].second)] = sh.chips[i];
  }
}

// Shares of one scope: every unit alone (0), every bin (1) or every node (2).
std::vector<Share> shares_of(const Cluster& c, const Slots& slots, const std::vector<std::pair<int, int>>& at,
                             int u, int scope) {
  std::map<int, std::pair<std::vector<int>, std::uint64_t>> by;  // key -> ranks, chip mask
  std::map<int, int> node_of_key;
  for (std::size_t x = 0; x < at.size(); ++x) {
    auto [bin, set] = at[x];
    const Bin& b = slots.bins[static_cast<std::size_t>(bin)];
    int key = scope == 0 ? static_cast<int>(x) : scope == 1 ? bin : b.node;
    auto& e = by[key];
    for (int k = 0; k < u; ++k) e.first.push_back(static_cast<int>(x) * u + k);
    e.second |= b.sets[static_cast<std::size_t>(set)];
    node_of_key[key] = b.node;
  }
  std::vector<Share> out;
  std::vector<int> order;
  for (auto& [key, e] : by) {
    Share sh;
    sh.ranks = std::move(e.first);
    int node = node_of_key[key];
    chips_in_order(c.type_of(node), e.second, true, order);
    for (int slot : order) sh.chips.push_back({node, slot});
    out.push_back(std::move(sh));
  }
  return out;
}

bool uniform_links(const NodeType& t) {
  for (int a = 0; a < t.size; ++a) {
    for (int b = a + 1; b < t.size; ++b) {
      if (t.level_of(a, b) != t.level_of(0, std::min(1, t.size - 1))) return false;
    }
  }
  return true;
}

// Bounded local search: swap ranks on a node, move a rank to a free chip of its node, swap two pods, move a
// pod (in each layout) to another node of a leaf the job uses. A change is kept when the placement gets
// better.
void improve(const Cluster& c, const ClusterState& s, const Job& job, const Groups& g, Placement& p) {
  if (job.npus > 256) return;
  const auto coords = coords_of(job);
  int budget = 3000;
  const int n = p.pod_size;
  const int pods = job.npus / n;
  std::vector<std::uint64_t> free = s.free;
  for (const auto& ch : p.chips) free[static_cast<std::size_t>(ch.node)] &= ~(1ULL << ch.slot);
  std::vector<char> uniform;
  for (const auto& t : c.types) uniform.push_back(uniform_links(t) ? 1 : 0);
  auto keep = [&]() {
    --budget;
    Evaluation e = evaluate(c, job, g, p.chips);
    if (!better(e, p.eval)) return false;
    p.eval = e;
    return true;
  };
  auto is_uniform = [&](int node) {
    return uniform[static_cast<std::size_t>(c.nodes[static_cast<std::size_t>(node)].type)] != 0;
  };
  std::vector<int> order;
  bool improved = true;
  while (improved && budget > 0) {
    improved = false;
    std::map<int, std::vector<int>> on;
    for (int r = 0; r < job.npus; ++r) on[p.chips[static_cast<std::size_t>(r)].node].push_back(r);
    for (auto& [node, rs] : on) {
      if (is_uniform(node)) continue;
      for (std::size_t i = 0; i < rs.size() && budget > 0; ++i) {
        for (std::size_t j = i + 1; j < rs.size() && budget > 0; ++j) {
          std::swap(p.chips[static_cast<std::size_t>(rs[i])], p.chips[static_cast<std::size_t>(rs[j])]);
          if (keep()) {
            improved = true;
          } else {
            std::swap(p.chips[static_cast<std::size_t>(rs[i])], p.chips[static_cast<std::size_t>(rs[j])]);
          }
        }
      }
      for (int r : rs) {
        ChipRef& ch = p.chips[static_cast<std::size_t>(r)];
        for (std::uint64_t f = free[static_cast<std::size_t>(node)]; f != 0 && budget > 0; f &= f - 1) {
          int old = ch.slot;
          ch.slot = lowest_slot(f);
          if (keep()) {
            free[static_cast<std::size_t>(node)] =
                (free[static_cast<std::size_t>(node)] | (1ULL << old)) & ~(1ULL << ch.slot);
            improved = true;
            break;
          }
          ch.slot = old;
        }
      }
    }
    for (int a = 0; a < pods && budget > 0; ++a) {
      for (int b = a + 1; b < pods && budget > 0; ++b) {
        if (p.chips[idx(a * n)].node == p.chips[idx(b * n)].node) continue;
        for (int k = 0; k < n; ++k) std::swap(p.chips[idx(a * n + k)], p.chips[idx(b * n + k)]);
        if (keep()) {
          improved = true;
        } else {
          for (int k = 0; k < n; ++k) std::swap(p.chips[idx(a * n + k)], p.chips[idx(b * n + k)]);
        }
      }
    }
    // Pods may move to nodes of the leaves the job uses; a job of one or two pods also to any node whose
    // chips are not all alike (one node per kind of free chips).
    std::vector<int> targets;
    std::set<int> leaves;
    for (const auto& ch : p.chips) leaves.insert(c.nodes[static_cast<std::size_t>(ch.node)].leaf);
    for (int leaf : leaves) {
      for (int to : c.leaf_nodes[static_cast<std::size_t>(leaf)]) targets.push_back(to);
    }
    if (pods <= 2) {
      std::set<std::pair<int, std::uint64_t>> kinds;
      for (std::size_t to = 0; to < c.nodes.size() && kinds.size() < 64; ++to) {
        if (is_uniform(static_cast<int>(to)) || leaves.count(c.nodes[to].leaf) != 0) continue;
        if (std::popcount(free[to]) < n || !kinds.insert({c.nodes[to].type, free[to]}).second) continue;
        targets.push_back(static_cast<int>(to));
      }
    }
    for (int a = 0; a < pods && budget > 0; ++a) {
      {
        for (int to : targets) {
          int from = p.chips[idx(a * n)].node;
          if (to == from || std::popcount(free[static_cast<std::size_t>(to)]) < n || budget <= 0) continue;
          const NodeType& t = c.type_of(to);
          MaskChoice m = choose_mask(t, free[static_cast<std::size_t>(to)], 0, n);
          std::uint64_t mask =
              m.mask != 0 ? m.mask : first_canonical(t, free[static_cast<std::size_t>(to)], n);
          chips_in_order(t, mask, true, order);
          Share sh;
          for (int k = 0; k < n; ++k) {
            sh.ranks.push_back(a * n + k);
            sh.chips.push_back({to, order[static_cast<std::size_t>(k)]});
          }
          std::vector<ChipRef> old(p.chips.begin() + static_cast<std::ptrdiff_t>(a) * n,
                                   p.chips.begin() + static_cast<std::ptrdiff_t>(a + 1) * n);
          bool moved = false;
          for (const auto& sig : kLayouts) {
            lay_out(coords, {sh}, sig, p.chips);
            if (keep()) {
              moved = true;
              break;
            }
          }
          if (moved) {
            for (const auto& ch : old) free[static_cast<std::size_t>(ch.node)] |= 1ULL << ch.slot;
            free[static_cast<std::size_t>(to)] &= ~mask;
            improved = true;
          } else {
            std::copy(old.begin(), old.end(), p.chips.begin() + static_cast<std::ptrdiff_t>(a) * n);
          }
        }
      }
    }
  }
}

}  // namespace

Result<Placement> topo(const Cluster& c, const ClusterState& state, const Job& job, const Groups& groups) {
  const int n = pod_size_of(job, c);
  const int pods = job.npus / n;
  std::vector<int> pods_per_unit;
  if (job.tp > n && job.tp % n == 0 && job.tp <= c.max_node_size()) pods_per_unit.push_back(job.tp / n);
  pods_per_unit.push_back(1);
  int max_card = 0;
  for (const auto& t : c.types) {
    for (auto m : t.card_masks) max_card = std::max(max_card, std::popcount(m));
  }

  const std::array<double, 3> bytes = {job.comm.tp, job.comm.dp, job.comm.pp};
  std::array<double, 4> target_bw = {c.bw.bytes_per_s(Level::kHccs), c.bw.bytes_per_s(Level::kLeaf),
                                     c.bw.bytes_per_s(Level::kSpine), c.bw.bytes_per_s(Level::kCore)};

  // Rank layouts matter only on nodes whose chips are not all alike (rings, cards).
  bool all_uniform = true;
  for (const auto& t : c.types) all_uniform = all_uniform && uniform_links(t);
  const auto coords = coords_of(job);

  Placement best;
  bool have = false;
  int capacity = 0;
  for (Quality q : {kSioQ, kHccsQ, kAnyQ}) {
    if (q == kAnyQ && have && best.eval.tp_groups_outside_hccs == 0) break;
    for (int g : pods_per_unit) {
      if (pods % g != 0) continue;
      const int u = n * g;
      const int units = pods / g;
      const int block = std::min(job.tp, u);
      if (q == kSioQ && (block < 2 || block > max_card)) continue;
      if (q == kHccsQ && block < 2) continue;  // the same as kAnyQ
      Slots slots = compute_slots(c, state, u, block, q);
      if (q == kAnyQ && g == 1) capacity = slots.total;
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
        if (q != kAnyQ && ty == kTp) allowed = {kNodeT};
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
      const bool small = units <= 64;
      bool any_spread = false;
      for (char sp : slots.spread) any_spread = any_spread || sp != 0;
      const int variants = !small ? 2 : any_spread ? 8 : 4;
      double round_best = std::numeric_limits<double>::infinity();
      std::vector<std::vector<std::pair<int, int>>> tried;  // packings already scored
      for (const auto& cb : combos) {
        if (cb.bound >= round_best) break;
        for (int variant = 0; variant < variants; ++variant) {
          bool by_size = (variant & 1) != 0;
          bool roomy = (variant & 2) != 0;
          bool colocate = (variant & 4) != 0;
          auto comps = components(units, ug, cb.target, by_size);
          Packer packer(c, slots, units, roomy, colocate);
          if (!packer.pack(comps)) continue;
          if (std::find(tried.begin(), tried.end(), packer.at()) != tried.end()) continue;
          tried.push_back(packer.at());
          for (std::size_t x = 0; x < packer.at().size(); ++x) {
            auto [bin, set] = packer.at()[x];
            materialize(c, state, slots, bin, set + 1);
          }
          Placement p;
          p.job = job.name;
          p.policy = Policy::kTopo;
          p.pod_size = n;
          p.chips.resize(static_cast<std::size_t>(job.npus));
          std::vector<std::vector<ChipRef>> seen;
          for (int scope = 0; scope < (all_uniform ? 1 : 3); ++scope) {
            auto shares = shares_of(c, slots, packer.at(), u, scope);
            if (scope > 0 && shares.size() == static_cast<std::size_t>(units)) continue;  // same as per unit
            for (const auto& sig : kLayouts) {
              lay_out(coords, shares, sig, p.chips);
              if (std::find(seen.begin(), seen.end(), p.chips) != seen.end()) continue;
              seen.push_back(p.chips);
              p.eval = evaluate(c, job, groups, p.chips);
              round_best = std::min(round_best, p.eval.cost.total);
              if (!have || better(p.eval, best.eval)) {
                best = p;
                have = true;
              }
              if (all_uniform) break;  // every layout costs the same
            }
          }
        }
      }
    }
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
  improve(c, state, job, groups, best);
  return best;
}

}  // namespace ascend::topology::detail
