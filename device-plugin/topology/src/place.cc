#include "ascend/topology/place.h"

#include <algorithm>
#include <bit>
#include <cerrno>

#include <nlohmann/json.hpp>

#include "internal.h"
#include "place_internal.h"

namespace ascend::topology {

using nlohmann::json;
using nlohmann::ordered_json;

std::string_view to_string(Policy p) {
  switch (p) {
    case Policy::kTopo:
      return "topo";
    case Policy::kFirstFit:
      return "first-fit";
    case Policy::kVolcano:
      return "volcano";
  }
  return "topo";
}

Result<Policy> parse_policy(std::string_view s) {
  if (s == "topo") return Policy::kTopo;
  if (s == "first-fit") return Policy::kFirstFit;
  if (s == "volcano") return Policy::kVolcano;
  return Error::invalid("unknown policy '" + std::string(s) + "' (use topo, first-fit or volcano)");
}

int pod_size_of(const Job& job, const Cluster& c) {
  if (job.npus_per_pod > 0) return job.npus_per_pod;
  return std::min(job.npus, c.max_node_size());
}

namespace detail {

Status check_pod_size(const Cluster& c, const Job& job, int n) {
  if (job.npus % n != 0) {
    return Error::invalid("npus_per_pod " + std::to_string(n) + " does not divide npus " +
                          std::to_string(job.npus));
  }
  if (n > c.max_node_size()) {
    return Error(ENOSPC, "a pod of " + std::to_string(n) + " NPUs is larger than any node (" +
                             std::to_string(c.max_node_size()) + " chips)");
  }
  return ok_status();
}

void chips_in_order(const NodeType& t, std::uint64_t mask, bool canonical, std::vector<int>& out) {
  out.clear();
  if (canonical) {
    for (int s : t.canonical) {
      if ((mask >> s & 1) != 0) out.push_back(s);
    }
  } else {
    for (; mask != 0; mask &= mask - 1) out.push_back(lowest_slot(mask));
  }
}

Status first_fit_pods(const Cluster& c, std::vector<std::uint64_t>& free, int n, const std::vector<int>& pods,
                      std::vector<ChipRef>& chips) {
  std::vector<int> order;
  std::size_t start = 0;  // nodes before `start` cannot take a pod any more
  for (std::size_t done = 0; done < pods.size(); ++done) {
    const int pod = pods[done];
    bool placed = false;
    for (std::size_t node = start; node < c.nodes.size(); ++node) {
      if (std::popcount(free[node]) < n) {
        if (node == start) ++start;
        continue;
      }
      std::uint64_t m = lowest_bits(free[node], n);
      free[node] &= ~m;
      chips_in_order(c.type_of(static_cast<int>(node)), m, false, order);
      for (int k = 0; k < n; ++k)
        chips[idx(pod * n + k)] = {static_cast<int>(node), order[static_cast<std::size_t>(k)]};
      placed = true;
      break;
    }
    if (!placed) {
      return Error(ENOSPC, "first-fit: pod " + std::to_string(pod) + " of " + std::to_string(n) +
                               " NPUs finds no node with room (" + std::to_string(done) + " of " +
                               std::to_string(pods.size()) + " pods placed)");
    }
  }
  return ok_status();
}

std::vector<int> all_pods(int pods) {
  std::vector<int> out(static_cast<std::size_t>(pods));
  for (int i = 0; i < pods; ++i) out[idx(i)] = i;
  return out;
}

Result<Placement> first_fit(const Cluster& c, const ClusterState& state, const Job& job,
                            const Groups& groups) {
  int n = pod_size_of(job, c);
  std::vector<std::uint64_t> free = state.free;
  Placement p;
  p.job = job.name;
  p.policy = Policy::kFirstFit;
  p.pod_size = n;
  p.chips.resize(static_cast<std::size_t>(job.npus));
  if (auto st = first_fit_pods(c, free, n, all_pods(job.npus / n), p.chips); !st.ok()) return st.error();
  p.eval = evaluate(c, job, groups, p.chips);
  return p;
}

namespace {

// Volcano's module910x8 affinity table: [task NPUs - 1][free chips in the HCCS ring - 1]; 4 = unusable.
constexpr int kA1Aff[4][4] = {{0, 2, 1, 3}, {4, 0, 2, 1}, {4, 4, 4, 4}, {4, 4, 4, 0}};

// Volcano's score of `node` for a pod of n chips, or -1 when Volcano's predicate rejects the node.
double volcano_score(const Cluster& c, int node, std::uint64_t usable, int n) {
  const NodeType& t = c.type_of(node);
  int healthy = std::popcount(t.all() & ~c.nodes[static_cast<std::size_t>(node)].unhealthy);
  if (t.family == npu::Family::k910 && t.domain_masks.size() == 2) {
    if (n == t.size) return usable == t.all() ? 8.0 * (healthy * 4 - 0) : -1;
    if (n > 4) return -1;
    int best = 4;
    for (auto ring : t.domain_masks) {
      int f = std::popcount(usable & ring);
      if (f > 0 && f <= 4) best = std::min(best, kA1Aff[n - 1][f - 1]);
    }
    if (best == 4) return -1;
    return 8.0 * (healthy * 4 - best);
  }
  // module910bx8 (and, as an approximation, the other families): best score = free - n.
  if (n == t.size) return usable == t.all() ? static_cast<double>(t.size) * healthy : -1;
  int f = std::popcount(usable);
  if (f < n) return -1;
  return static_cast<double>(t.size) * (healthy - (f - n));
}

std::uint64_t volcano_select(const NodeType& t, std::uint64_t usable, int n) {
  if (n == t.size) return usable;
  if (t.family == npu::Family::k910 && t.domain_masks.size() == 2) {
    std::vector<int> prio;
    if (n == 1) prio = {1, 3, 2, 4};
    if (n == 2) prio = {2, 4, 3};
    if (n == 4) prio = {4};
    for (int pr : prio) {
      for (auto ring : t.domain_masks) {  // left ring first, then right
        if (std::popcount(usable & ring) == pr) return lowest_bits(usable & ring, n);
      }
    }
    return 0;
  }
  return lowest_bits(usable, n);
}

}  // namespace

Status volcano_check(const Cluster& c, int n, int pods) {
  bool has_a1 = false;
  for (const auto& t : c.types) has_a1 = has_a1 || t.family == npu::Family::k910;
  if (n != 1 && n != 2 && n != 4 && n != 8 && n != c.max_node_size()) {
    return Error::invalid("volcano: a pod takes 1, 2, 4 or 8 NPUs (or a whole node), not " +
                          std::to_string(n));
  }
  if (has_a1 && pods > 1 && n != 8) {
    return Error::invalid("volcano: a distributed Ascend 910 job must use pods of 8 NPUs (8 x N), not " +
                          std::to_string(n));
  }
  return ok_status();
}

Status volcano_pods(const Cluster& c, std::vector<std::uint64_t>& free, int n, const std::vector<int>& pods,
                    std::vector<ChipRef>& chips) {
  std::vector<int> order;
  for (std::size_t done = 0; done < pods.size(); ++done) {
    const int pod = pods[done];
    int best = -1;
    double best_score = -1;
    for (std::size_t node = 0; node < c.nodes.size(); ++node) {
      double s = volcano_score(c, static_cast<int>(node), free[node], n);
      if (s > best_score) {  // ties: the first node in order (Volcano picks one of them at random)
        best_score = s;
        best = static_cast<int>(node);
      }
    }
    std::uint64_t m = best < 0 ? 0 : volcano_select(c.type_of(best), free[static_cast<std::size_t>(best)], n);
    if (m == 0) {
      return Error(ENOSPC, "volcano: pod " + std::to_string(pod) + " of " + std::to_string(n) +
                               " NPUs passes no node's affinity check (" + std::to_string(done) + " of " +
                               std::to_string(pods.size()) + " pods placed)");
    }
    free[static_cast<std::size_t>(best)] &= ~m;
    chips_in_order(c.type_of(best), m, false, order);
    for (int k = 0; k < n; ++k) chips[idx(pod * n + k)] = {best, order[static_cast<std::size_t>(k)]};
  }
  return ok_status();
}

Result<Placement> volcano(const Cluster& c, const ClusterState& state, const Job& job, const Groups& groups) {
  int n = pod_size_of(job, c);
  int pods = job.npus / n;
  if (auto st = volcano_check(c, n, pods); !st.ok()) return st.error();
  std::vector<std::uint64_t> free = state.free;
  Placement p;
  p.job = job.name;
  p.policy = Policy::kVolcano;
  p.pod_size = n;
  p.chips.resize(static_cast<std::size_t>(job.npus));
  if (auto st = volcano_pods(c, free, n, all_pods(pods), p.chips); !st.ok()) return st.error();
  p.eval = evaluate(c, job, groups, p.chips);
  return p;
}

}  // namespace detail

Result<Placement> place(const Cluster& c, const ClusterState& state, const Job& job, Policy policy) {
  ASCEND_CHECK(validate(job), "job " + job.name);
  int n = pod_size_of(job, c);
  ASCEND_CHECK(detail::check_pod_size(c, job, n), "job " + job.name);
  if (state.free_chips() < job.npus) {
    return Error(ENOSPC, "job " + job.name + " needs " + std::to_string(job.npus) + " NPUs; " +
                             std::to_string(state.free_chips()) + " are free");
  }
  Groups groups = groups_of(job);
  Result<Placement> r = Error::invalid("unknown policy");
  switch (policy) {
    case Policy::kTopo:
      r = detail::topo(c, state, job, groups);
      break;
    case Policy::kFirstFit:
      r = detail::first_fit(c, state, job, groups);
      break;
    case Policy::kVolcano:
      r = detail::volcano(c, state, job, groups);
      break;
  }
  return std::move(r).context("job " + job.name);
}

void occupy(ClusterState& state, const Placement& p) {
  for (const auto& ch : p.chips) state.free[static_cast<std::size_t>(ch.node)] &= ~(1ULL << ch.slot);
}

void release(ClusterState& state, const Placement& p) {
  for (const auto& ch : p.chips) state.free[static_cast<std::size_t>(ch.node)] |= 1ULL << ch.slot;
}

std::vector<int> nodes_of(const Placement& p) {
  std::vector<int> out;
  for (const auto& ch : p.chips) {
    if (std::find(out.begin(), out.end(), ch.node) == out.end()) out.push_back(ch.node);
  }
  return out;
}

ordered_json to_json(const Cluster& c, const Placement& p) {
  ordered_json ranks = ordered_json::array();
  for (std::size_t r = 0; r < p.chips.size(); ++r) {
    const ChipRef& ch = p.chips[r];
    ranks.push_back({{"rank", r},
                     {"pod", static_cast<int>(r) / p.pod_size},
                     {"node", c.nodes[static_cast<std::size_t>(ch.node)].name},
                     {"device_id", c.type_of(ch.node).phy[static_cast<std::size_t>(ch.slot)]}});
  }
  return {{"job", p.job},
          {"policy", to_string(p.policy)},
          {"ranks", std::move(ranks)},
          {"cost",
           {{"tp", p.eval.cost.tp},
            {"pp", p.eval.cost.pp},
            {"dp", p.eval.cost.dp},
            {"total", p.eval.cost.total}}},
          {"tp_groups_outside_hccs", p.eval.tp_groups_outside_hccs}};
}

}  // namespace ascend::topology
