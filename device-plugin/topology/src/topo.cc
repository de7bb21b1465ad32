// The topo policy (see docs/scheduler.md, "How topo places a job").
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
#include <limits>

#include "topo_internal.h"

namespace ascend::topology::detail {

using namespace topo_parts;  // NOLINT(google-build-using-namespace): the policy's own parts

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
      std::vector<Packing> tried;  // packings already scored
      for (const auto& cb : combos) {
        if (cb.bound >= round_best) break;
        for (int variant = 0; variant < variants; ++variant) {
          bool by_size = (variant & 1) != 0;
          bool roomy = (variant & 2) != 0;
          bool colocate = (variant & 4) != 0;
          auto at = pack(c, slots, components(units, ug, cb.target, by_size), units, roomy, colocate);
          if (!at) continue;
          if (std::find(tried.begin(), tried.end(), *at) != tried.end()) continue;
          tried.push_back(*at);
          for (std::size_t x = 0; x < at->size(); ++x) {
            auto [bin, set] = (*at)[x];
            materialize(c, state, slots, bin, set + 1);
          }
          Placement p;
          p.job = job.name;
          p.policy = Policy::kTopo;
          p.pod_size = n;
          p.chips.resize(static_cast<std::size_t>(job.npus));
          std::vector<std::vector<ChipRef>> seen;
          for (int scope = 0; scope < (all_uniform ? 1 : 3); ++scope) {
            auto shares = shares_of(c, slots, *at, u, scope);
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
