// The topo policy's rank layouts and its local search (topo_internal.h).
#include <algorithm>
#include <bit>
#include <map>
#include <set>

#include "topo_internal.h"

namespace ascend::topology::detail::topo_parts {

bool better(const Evaluation& a, const Evaluation& b) {
  if (a.tp_groups_outside_hccs != b.tp_groups_outside_hccs)
    return a.tp_groups_outside_hccs < b.tp_groups_outside_hccs;
  return a.cost.total < b.cost.total * (1 - 1e-12);
}

// Every rank's (t, d, p), computed once per job.
std::vector<std::array<int, 3>> coords_of(const Job& job) {
  std::vector<std::array<int, 3>> out(static_cast<std::size_t>(job.npus));
  for (int r = 0; r < job.npus; ++r) {
    Coord c = coord_of(job, r);
    out[static_cast<std::size_t>(r)] = {c.t, c.d, c.p};
  }
  return out;
}

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
std::vector<Share> shares_of(const Cluster& c, const Slots& slots, const Packing& at, int u, int scope) {
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
void improve(const Cluster& c, const ClusterState& s, const Job& job, const Groups& g, Placement& p,
             const std::vector<bool>& fixed) {
  if (job.npus > 256) return;
  const auto coords = coords_of(job);
  int budget = 3000;
  const int n = p.pod_size;
  const int pods = job.npus / n;
  auto pod_moves = [&](int pod) { return fixed.empty() || !fixed[static_cast<std::size_t>(pod)]; };
  auto rank_moves = [&](int rank) { return pod_moves(rank / n); };
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
        if (!rank_moves(rs[i])) continue;
        for (std::size_t j = i + 1; j < rs.size() && budget > 0; ++j) {
          if (!rank_moves(rs[j])) continue;
          std::swap(p.chips[static_cast<std::size_t>(rs[i])], p.chips[static_cast<std::size_t>(rs[j])]);
          if (keep()) {
            improved = true;
          } else {
            std::swap(p.chips[static_cast<std::size_t>(rs[i])], p.chips[static_cast<std::size_t>(rs[j])]);
          }
        }
      }
      for (int r : rs) {
        if (!rank_moves(r)) continue;
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
        if (!pod_moves(a) || !pod_moves(b)) continue;
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
      if (!pod_moves(a)) continue;
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

}  // namespace ascend::topology::detail::topo_parts
