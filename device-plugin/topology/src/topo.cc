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

namespace {

// A target level for each kind of group (kTp, kDp, kPp) and the cost bound it gives.
struct Combo {
  std::array<int, 3> target{kCoreT, kCoreT, kCoreT};
  double bound = 0;
};

// Every combination of targets for the kinds of group that span units, cheapest bound first. In the clean
// tiers a TP group must stay on one node.
std::vector<Combo> target_combos(const Cluster& c, const Job& job, const UnitGroups& ug, Quality q) {
  const std::array<double, 3> bytes = {job.comm.tp, job.comm.dp, job.comm.pp};
  const std::array<double, 4> target_bw = {c.bw.bytes_per_s(Level::kHccs), c.bw.bytes_per_s(Level::kLeaf),
                                           c.bw.bytes_per_s(Level::kSpine), c.bw.bytes_per_s(Level::kCore)};
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
  return combos;
}

// One run of the policy: the rounds (a quality tier and a unit size each), then first-fit's placement and
// the local search. Keeps the best placement seen.
class Search {
 public:
  Search(const Cluster& c, const ClusterState& state, const Job& job, const Groups& groups)
      : c_(c), state_(state), job_(job), groups_(groups), n_(pod_size_of(job, c)), coords_(coords_of(job)) {
    for (const auto& t : c.types) {
      for (auto m : t.card_masks) max_card_ = std::max(max_card_, std::popcount(m));
      // Rank layouts matter only on nodes whose chips are not all alike (rings, cards).
      all_uniform_ = all_uniform_ && uniform_links(t);
    }
  }

  Result<Placement> run();

 private:
  void round(Quality q, int g);
  double score(Slots& slots, const Packing& at, int u, int units);
  void keep(const Placement& p) {
    if (!have_ || better(p.eval, best_.eval)) {
      best_ = p;
      have_ = true;
    }
  }

  const Cluster& c_;
  const ClusterState& state_;
  const Job& job_;
  const Groups& groups_;
  const int n_;  // pod size
  const std::vector<std::array<int, 3>> coords_;
  int max_card_ = 0;
  bool all_uniform_ = true;
  int capacity_ = 0;  // pods the free chips hold
  Placement best_;
  bool have_ = false;
};

Result<Placement> Search::run() {
  const int pods = job_.npus / n_;
  std::vector<int> pods_per_unit;
  if (job_.tp > n_ && job_.tp % n_ == 0 && job_.tp <= c_.max_node_size())
    pods_per_unit.push_back(job_.tp / n_);
  pods_per_unit.push_back(1);
  for (Quality q : {kSioQ, kHccsQ, kAnyQ}) {
    if (q == kAnyQ && have_ && best_.eval.tp_groups_outside_hccs == 0) break;
    for (int g : pods_per_unit) round(q, g);
  }
  auto ff = first_fit(c_, state_, job_, groups_);
  if (ff.ok() && (!have_ || better(ff->eval, best_.eval))) {
    best_ = std::move(ff).value();
    best_.policy = Policy::kTopo;
    have_ = true;
  }
  if (!have_) {
    return Error(ENOSPC, "needs " + std::to_string(pods) + " pods of " + std::to_string(n_) +
                             " NPUs, each on one node; the free chips hold " + std::to_string(capacity_));
  }
  improve(c_, state_, job_, groups_, best_);
  return std::move(best_);
}

// Units of g pods whose TP blocks meet quality q: their slots, then each combination of targets (cheapest
// bound first, until the bound reaches the round's best cost) packed in up to 8 variants, each new packing
// scored.
void Search::round(Quality q, int g) {
  const int pods = job_.npus / n_;
  if (pods % g != 0) return;
  const int u = n_ * g;
  const int units = pods / g;
  const int block = std::min(job_.tp, u);
  if (q == kSioQ && (block < 2 || block > max_card_)) return;
  if (q == kHccsQ && block < 2) return;  // the same as kAnyQ
  Slots slots = compute_slots(c_, state_, u, block, q);
  if (q == kAnyQ && g == 1) capacity_ = slots.total;
  if (slots.total < units) return;
  const UnitGroups ug = unit_groups(groups_, u);
  bool any_spread = false;
  for (char sp : slots.spread) any_spread = any_spread || sp != 0;
  const int variants = units > 64 ? 2 : any_spread ? 8 : 4;
  double round_best = std::numeric_limits<double>::infinity();
  std::vector<Packing> tried;
  for (const auto& cb : target_combos(c_, job_, ug, q)) {
    if (cb.bound >= round_best) break;
    for (int variant = 0; variant < variants; ++variant) {
      const bool by_size = (variant & 1) != 0;
      const bool roomy = (variant & 2) != 0;
      const bool colocate = (variant & 4) != 0;
      auto at = pack(c_, slots, components(units, ug, cb.target, by_size), units, roomy, colocate);
      if (!at || std::find(tried.begin(), tried.end(), *at) != tried.end()) continue;
      tried.push_back(*at);
      round_best = std::min(round_best, score(slots, *at, u, units));
    }
  }
}

// Lays the ranks onto a packing's chips in each order that can cost differently (per unit, per bin, per
// node; six orders of significance each), keeps the best placement and returns the lowest total cost.
double Search::score(Slots& slots, const Packing& at, int u, int units) {
  for (auto [bin, set] : at) materialize(c_, state_, slots, bin, set + 1);
  Placement p;
  p.job = job_.name;
  p.policy = Policy::kTopo;
  p.pod_size = n_;
  p.chips.resize(static_cast<std::size_t>(job_.npus));
  double lowest = std::numeric_limits<double>::infinity();
  std::vector<std::vector<ChipRef>> seen;
  for (int scope = 0; scope < (all_uniform_ ? 1 : 3); ++scope) {
    auto shares = shares_of(c_, slots, at, u, scope);
    if (scope > 0 && shares.size() == static_cast<std::size_t>(units)) continue;  // same as per unit
    for (const auto& sig : kLayouts) {
      lay_out(coords_, shares, sig, p.chips);
      if (std::find(seen.begin(), seen.end(), p.chips) != seen.end()) continue;
      seen.push_back(p.chips);
      p.eval = evaluate(c_, job_, groups_, p.chips);
      lowest = std::min(lowest, p.eval.cost.total);
      keep(p);
      if (all_uniform_) break;  // every layout costs the same
    }
  }
  return lowest;
}

}  // namespace

Result<Placement> topo(const Cluster& c, const ClusterState& state, const Job& job, const Groups& groups) {
  return Search(c, state, job, groups).run();
}

}  // namespace ascend::topology::detail
