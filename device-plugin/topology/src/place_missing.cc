// place_missing() (place.h): the pods of a placed job that lost their chips, placed again around the pods
// that kept theirs.
//
// The topo policy here is greedy, then local. The missing pods go one by one, in pod order (the pods of a TP
// group that is missing whole together, as one unit of topo), to the node, chip set and rank layout that
// make the partial placement cheapest: the kept pods and those placed so far, the rest left out by
// evaluate(), so that each pod is judged by how it talks to the pods that have chips. Nodes that are alike
// for the job (same type and free chips, same place relative to the job's leaves and spines) are tried once.
// A unit that fits no node goes pod by pod, its first pod looking ahead. A second greedy pass takes first the
// pods that join a kept pod's TP group; first-fit's answer for the same pods competes, as it does in place();
// the winner is polished by topo's local search with the kept pods fixed.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <set>
#include <tuple>

#include "topo_internal.h"

namespace ascend::topology {
namespace {

using detail::idx;
using namespace detail::topo_parts;  // NOLINT(google-build-using-namespace): the topo policy's parts

std::string str(std::size_t v) {
  return std::to_string(v);
}

// Checks one kept pod's chips: chips of the cluster, all on one node, none used before (`seen`).
Status check_kept(const Cluster& c, const Placement& current, int pod, int n,
                  std::set<std::pair<int, int>>& seen) {
  const int node = current.chips[idx(pod * n)].node;
  for (int r = pod * n; r < (pod + 1) * n; ++r) {
    const ChipRef& ch = current.chips[idx(r)];
    if (ch.node < 0 || ch.node >= static_cast<int>(c.nodes.size()) || ch.slot < 0 ||
        ch.slot >= c.type_of(ch.node).size) {
      return Error::invalid("kept pod " + std::to_string(pod) + ": rank " + std::to_string(r) +
                            " has no chip of the cluster (node " + std::to_string(ch.node) + ", slot " +
                            std::to_string(ch.slot) + ")");
    }
    if (ch.node != node) {
      return Error::invalid("kept pod " + std::to_string(pod) + " spans nodes " + c.nodes[idx(node)].name +
                            " and " + c.nodes[idx(ch.node)].name + "; a pod lives on one node");
    }
    if (!seen.insert({ch.node, ch.slot}).second) {
      return Error::invalid("kept pod " + std::to_string(pod) + ": chip slot " + std::to_string(ch.slot) +
                            " of " + c.nodes[idx(ch.node)].name + " is used twice");
    }
  }
  return ok_status();
}

// Checks `current` and `keep` against the job; the pods to place again, in order.
Result<std::vector<int>> missing_pods(const Cluster& c, const ClusterState& state, const Job& job, int n,
                                      const Placement& current, const std::vector<bool>& keep) {
  const int pods = job.npus / n;
  if (state.free.size() != c.nodes.size()) {
    return Error::invalid("the cluster state has " + str(state.free.size()) + " nodes; the cluster has " +
                          str(c.nodes.size()));
  }
  if (current.chips.size() != idx(job.npus)) {
    return Error::invalid("the current placement has " + str(current.chips.size()) + " ranks; the job has " +
                          std::to_string(job.npus));
  }
  if (current.pod_size != n) {
    return Error::invalid("the current placement's pods have " + std::to_string(current.pod_size) +
                          " NPUs; the job's have " + std::to_string(n));
  }
  if (keep.size() != idx(pods)) {
    return Error::invalid("keep_pod has " + str(keep.size()) + " flags; the job has " + std::to_string(pods) +
                          " pods");
  }
  std::vector<int> out;
  std::set<std::pair<int, int>> seen;
  for (int pod = 0; pod < pods; ++pod) {
    if (!keep[idx(pod)]) {
      out.push_back(pod);
      continue;
    }
    if (auto st = check_kept(c, current, pod, n, seen); !st.ok()) return st.error();
  }
  return out;
}

// The free chips of `state` without the kept pods' chips.
std::vector<std::uint64_t> free_around(const ClusterState& state, const Placement& current,
                                       const std::vector<bool>& keep) {
  std::vector<std::uint64_t> free = state.free;
  for (std::size_t r = 0; r < current.chips.size(); ++r) {
    const ChipRef& ch = current.chips[r];
    if (keep[r / idx(current.pod_size)]) free[idx(ch.node)] &= ~(1ULL << ch.slot);
  }
  return free;
}

// Nodes with room for `n` chips, one of each kind alike for the job: a node holding a chip of the job is its
// own kind; other nodes are alike when they share type and free chips (their number, on a type whose chips
// are all joined alike) and their place as the job sees it (the same leaf when the job uses that leaf, the
// same spine when it uses that spine, or elsewhere).
std::vector<int> distinct_nodes(const Cluster& c, const std::vector<std::uint64_t>& free,
                                const std::vector<ChipRef>& chips, int n) {
  std::set<int> nodes, leaves, spines;
  for (const auto& ch : chips) {
    if (ch.node < 0) continue;
    nodes.insert(ch.node);
    leaves.insert(c.nodes[idx(ch.node)].leaf);
    spines.insert(c.nodes[idx(ch.node)].spine);
  }
  std::vector<char> uniform;
  for (const auto& t : c.types) uniform.push_back(uniform_links(t) ? 1 : 0);
  std::set<std::tuple<int, int, int, std::uint64_t>> kinds;
  std::vector<int> out;
  for (std::size_t i = 0; i < c.nodes.size(); ++i) {
    const int count = std::popcount(free[i]);
    if (count < n) continue;
    const Node& nd = c.nodes[i];
    const int node = static_cast<int>(i);
    const std::uint64_t chip_kind = uniform[idx(nd.type)] != 0 ? static_cast<std::uint64_t>(count) : free[i];
    auto key = nodes.count(node) != 0        ? std::make_tuple(0, node, 0, std::uint64_t{0})
               : leaves.count(nd.leaf) != 0  ? std::make_tuple(1, nd.leaf, nd.type, chip_kind)
               : spines.count(nd.spine) != 0 ? std::make_tuple(2, nd.spine, nd.type, chip_kind)
                                             : std::make_tuple(3, 0, nd.type, chip_kind);
    if (kinds.insert(key).second) out.push_back(node);
  }
  return out;
}

// The chip sets a pod may take on a node: the node-level choice, and the sets whose TP blocks of `block`
// chips stay on one card (SIO) or in one HCCS domain, when they differ.
std::vector<std::uint64_t> pod_sets(const NodeType& t, std::uint64_t free, int n, int block) {
  detail::MaskChoice m = detail::choose_mask(t, free, 0, n);
  std::vector<std::uint64_t> out = {m.mask != 0 ? m.mask : first_canonical(t, free, n)};
  if (block < 2) return out;
  for (Quality q : {kSioQ, kHccsQ}) {
    std::uint64_t s = select_unit(t, free, n, block, q);
    if (s != 0 && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  }
  return out;
}

struct Choice {
  Evaluation eval;
  int node = -1;
  std::uint64_t mask = 0;
  int left = 0;                // free chips the node keeps
  std::vector<ChipRef> chips;  // the unit's, by rank
};

// Consecutive missing pods placed together on one node: the pods of one TP group when all of them are
// missing (as topo's units), otherwise one pod. `joins`: the pod's TP group has a kept pod to join.
struct Unit {
  int first = 0;
  int pods = 1;
  bool joins = false;
};

std::vector<Unit> units_of(const Cluster& c, const Job& job, int n, const std::vector<bool>& keep) {
  const int pods = job.npus / n;
  int g = 1;
  if (job.tp > n && job.tp % n == 0 && job.tp <= c.max_node_size()) g = job.tp / n;
  std::vector<Unit> out;
  for (int b = 0; b < pods; b += g) {
    int kept = 0;
    for (int p = b; p < b + g; ++p) kept += keep[idx(p)] ? 1 : 0;
    if (kept == 0) {
      out.push_back({b, g, false});
      continue;
    }
    for (int p = b; p < b + g; ++p) {
      if (!keep[idx(p)]) out.push_back({p, 1, true});
    }
  }
  return out;
}

// Lays the ranks of `unit` onto every chip set of every node kind with room for it, in every rank layout
// that can cost differently, and calls visit(node, mask, left) with `chips` so laid (`left`: the free chips
// the node keeps). The unit's chips are unset again at the end.
template <class Visit>
void for_each_spot(const Cluster& c, const Job& job, const std::vector<std::array<int, 3>>& coords,
                   const std::vector<std::uint64_t>& free, Unit unit, int n, std::vector<ChipRef>& chips,
                   Visit&& visit) {
  const int u = unit.pods * n;
  const int block = std::min(job.tp, u);
  std::vector<Share> shares(1);
  for (int k = 0; k < u; ++k) shares[0].ranks.push_back(unit.first * n + k);
  std::vector<int> order;
  for (int node : distinct_nodes(c, free, chips, u)) {
    const NodeType& t = c.type_of(node);
    const bool uniform = uniform_links(t);
    const int left = std::popcount(free[idx(node)]) - u;
    for (std::uint64_t mask : pod_sets(t, free[idx(node)], u, block)) {
      detail::chips_in_order(t, mask, true, order);
      shares[0].chips.clear();
      for (int slot : order) shares[0].chips.push_back({node, slot});
      for (const auto& sig : kLayouts) {
        lay_out(coords, shares, sig, chips);
        visit(node, mask, left);
        if (uniform) break;  // every layout costs the same
      }
    }
  }
  const auto first = chips.begin() + static_cast<std::ptrdiff_t>(unit.first) * n;
  std::fill(first, first + u, ChipRef{});
}

// Whether a candidate of cost `e` leaving `left` chips on its node beats `best` (ties: fewer chips left,
// then the first candidate).
bool wins(const Evaluation& e, int left, const Choice& best) {
  return best.node < 0 || better(e, best.eval) || (!better(best.eval, e) && left < best.left);
}

// Puts `unit` where the partial placement `chips` costs least and takes its chips from `free`; false when no
// node has room for it.
bool place_unit(const Cluster& c, const Job& job, const Groups& g,
                const std::vector<std::array<int, 3>>& coords, std::vector<std::uint64_t>& free, Unit unit,
                int n, std::vector<ChipRef>& chips) {
  const auto first = chips.begin() + static_cast<std::ptrdiff_t>(unit.first) * n;
  const int u = unit.pods * n;
  Choice best;
  for_each_spot(c, job, coords, free, unit, n, chips, [&](int node, std::uint64_t mask, int left) {
    Evaluation e = evaluate(c, job, g, chips);
    if (wins(e, left, best)) best = {e, node, mask, left, std::vector<ChipRef>(first, first + u)};
  });
  if (best.node < 0) return false;
  std::copy(best.chips.begin(), best.chips.end(), first);
  free[idx(best.node)] &= ~best.mask;
  return true;
}

// A unit that fits no node goes pod by pod. Its first pod's place is judged with the others placed greedily
// after it (its TP group is one ring: a pod judged alone would take the place best for it and leave the
// others far), when the nodes to try are few; otherwise each pod is placed alone.
void place_split(const Cluster& c, const Job& job, const Groups& g,
                 const std::vector<std::array<int, 3>>& coords, std::vector<std::uint64_t>& free, Unit unit,
                 int n, std::vector<ChipRef>& chips) {
  constexpr std::size_t kLookahead = 64;  // node kinds up to which the first pod looks ahead
  auto rest = [&](std::vector<std::uint64_t>& f, std::vector<ChipRef>& ch) {
    for (int pod = unit.first + 1; pod < unit.first + unit.pods; ++pod)
      place_unit(c, job, g, coords, f, {pod, 1, unit.joins}, n, ch);
  };
  const Unit head{unit.first, 1, unit.joins};
  if (distinct_nodes(c, free, chips, n).size() > kLookahead) {
    place_unit(c, job, g, coords, free, head, n, chips);
    rest(free, chips);
    return;
  }
  Choice best;
  std::vector<ChipRef> best_chips;
  std::vector<std::uint64_t> best_free;
  for_each_spot(c, job, coords, free, head, n, chips, [&](int node, std::uint64_t mask, int left) {
    std::vector<ChipRef> trial = chips;
    std::vector<std::uint64_t> f = free;
    f[idx(node)] &= ~mask;
    rest(f, trial);
    Evaluation e = evaluate(c, job, g, trial);
    if (!wins(e, left, best)) return;
    best = {e, node, mask, left, {}};
    best_chips = std::move(trial);
    best_free = std::move(f);
  });
  if (best.node < 0) return;  // no node has room (the caller checked that none is missing)
  chips = std::move(best_chips);
  free = std::move(best_free);
}

// The units placed greedily in this order on `free` (the caller checked that the pods fit).
void greedy(const Cluster& c, std::vector<std::uint64_t> free, const Job& job, const Groups& g,
            const std::vector<Unit>& units, Placement& p) {
  const int n = p.pod_size;
  const auto coords = coords_of(job);
  for (Unit unit : units) {
    if (!place_unit(c, job, g, coords, free, unit, n, p.chips))
      place_split(c, job, g, coords, free, unit, n, p.chips);
  }
  p.eval = evaluate(c, job, g, p.chips);
}

// topo for the missing pods of `p` (their chips unset): greedy in pod order and with the pods that join a
// kept pod's TP group first (they have the fewest good places), first-fit competing, then the local search.
void topo_missing(const Cluster& c, const std::vector<std::uint64_t>& free, const Job& job, const Groups& g,
                  const std::vector<bool>& keep, const std::vector<int>& missing, Placement& p) {
  std::vector<Unit> units = units_of(c, job, p.pod_size, keep);
  std::vector<Placement> tries(1, p);
  greedy(c, free, job, g, units, tries.back());
  auto joins = [](const Unit& u) { return u.joins; };
  if (!std::is_partitioned(units.begin(), units.end(), joins)) {
    std::stable_partition(units.begin(), units.end(), joins);
    tries.push_back(p);
    greedy(c, free, job, g, units, tries.back());
  }
  std::vector<std::uint64_t> left = free;
  tries.push_back(p);
  if (detail::first_fit_pods(c, left, p.pod_size, missing, tries.back().chips).ok()) {
    tries.back().eval = evaluate(c, job, g, tries.back().chips);
  } else {
    tries.pop_back();
  }
  p = tries[0];
  for (const auto& t : tries) {
    if (better(t.eval, p.eval)) p = t;
  }
  improve(c, ClusterState{free}, job, g, p, keep);
}

// The missing pods placed around the kept ones by `policy` (some kept, some missing).
Result<Placement> place_around(const Cluster& c, const ClusterState& state, const Job& job,
                               const Placement& current, const std::vector<bool>& keep,
                               const std::vector<int>& missing, Policy policy) {
  const int n = current.pod_size;
  const std::vector<std::uint64_t> free = free_around(state, current, keep);
  int capacity = 0;
  for (auto f : free) capacity += std::popcount(f) / n;
  if (capacity < static_cast<int>(missing.size())) {
    return Error(ENOSPC, "needs " + str(missing.size()) + " more pods of " + std::to_string(n) +
                             " NPUs, each on one node, around the " + str(keep.size() - missing.size()) +
                             " kept; the free chips hold " + std::to_string(capacity));
  }
  const Groups groups = groups_of(job);
  Placement p = current;
  p.job = job.name;
  p.policy = policy;
  for (int pod : missing) std::fill_n(p.chips.begin() + static_cast<std::ptrdiff_t>(pod) * n, n, ChipRef{});
  std::vector<std::uint64_t> left = free;
  switch (policy) {
    case Policy::kTopo:
      topo_missing(c, free, job, groups, keep, missing, p);
      break;
    case Policy::kFirstFit:
      if (auto st = detail::first_fit_pods(c, left, n, missing, p.chips); !st.ok()) return st.error();
      break;
    case Policy::kVolcano:
      if (auto st = detail::volcano_check(c, n, job.npus / n); !st.ok()) return st.error();
      if (auto st = detail::volcano_pods(c, left, n, missing, p.chips); !st.ok()) return st.error();
      break;
  }
  p.eval = evaluate(c, job, groups, p.chips);
  return p;
}

}  // namespace

Result<Placement> place_missing(const Cluster& c, const ClusterState& state, const Job& job,
                                const Placement& current, const std::vector<bool>& keep_pod, Policy policy) {
  const std::string ctx = "job " + job.name;
  ASCEND_CHECK(validate(job), ctx);
  const int n = pod_size_of(job, c);
  ASCEND_CHECK(detail::check_pod_size(c, job, n), ctx);
  ASCEND_ASSIGN(const std::vector<int> missing, missing_pods(c, state, job, n, current, keep_pod), ctx);
  if (missing.empty()) {
    Placement p = current;
    p.eval = evaluate(c, job, groups_of(job), p.chips);
    return p;
  }
  if (missing.size() == keep_pod.size()) return place(c, state, job, policy);
  return place_around(c, state, job, current, keep_pod, missing, policy).context(ctx);
}

}  // namespace ascend::topology
