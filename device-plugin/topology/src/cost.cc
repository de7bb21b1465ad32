#include "ascend/topology/cost.h"

#include <algorithm>
#include <limits>

namespace ascend::topology {

double ring_cost(int k, double bytes, double bytes_per_s) {
  if (k < 2 || bytes <= 0) return 0;
  return 2.0 * (k - 1) / k * bytes / bytes_per_s;
}

namespace {

double bw_between(const Cluster& c, const ChipRef& a, const ChipRef& b) {
  return c.bw.bytes_per_s(c.level(a.node, a.slot, b.node, b.slot));
}

// Slowest hop of the ring r_0 -> r_1 -> ... -> r_(k-1) -> r_0.
double ring_bw(const Cluster& c, const std::vector<int>& ranks, const std::vector<ChipRef>& chips) {
  double bw = std::numeric_limits<double>::infinity();
  std::size_t k = ranks.size();
  if (k < 2) return bw;
  // A ring of two has one link, used both ways.
  std::size_t hops = k == 2 ? 1 : k;
  for (std::size_t i = 0; i < hops; ++i) {
    const ChipRef& a = chips[static_cast<std::size_t>(ranks[i])];
    const ChipRef& b = chips[static_cast<std::size_t>(ranks[(i + 1) % k])];
    bw = std::min(bw, bw_between(c, a, b));
  }
  return bw;
}

bool inside_hccs(const Cluster& c, const std::vector<int>& ranks, const std::vector<ChipRef>& chips) {
  const ChipRef& first = chips[static_cast<std::size_t>(ranks.front())];
  const NodeType& t = c.type_of(first.node);
  for (std::size_t i = 1; i < ranks.size(); ++i) {
    const ChipRef& m = chips[static_cast<std::size_t>(ranks[i])];
    if (m.node != first.node) return false;
    Level l = t.level_of(first.slot, m.slot);
    if (l != Level::kSio && l != Level::kHccs) return false;
  }
  return true;
}

}  // namespace

Evaluation evaluate(const Cluster& c, const Job& job, const Groups& groups,
                    const std::vector<ChipRef>& chips) {
  Evaluation e;
  for (const auto& g : groups.tp) {
    if (g.size() < 2) continue;
    e.cost.tp = std::max(e.cost.tp, ring_cost(static_cast<int>(g.size()), job.comm.tp, ring_bw(c, g, chips)));
    if (!inside_hccs(c, g, chips)) ++e.tp_groups_outside_hccs;
  }
  for (const auto& g : groups.dp) {
    if (g.size() < 2) continue;
    e.cost.dp = std::max(e.cost.dp, ring_cost(static_cast<int>(g.size()), job.comm.dp, ring_bw(c, g, chips)));
  }
  if (job.comm.pp > 0) {
    for (const auto& [a, b] : groups.pp) {
      double bw = bw_between(c, chips[static_cast<std::size_t>(a)], chips[static_cast<std::size_t>(b)]);
      e.cost.pp = std::max(e.cost.pp, job.comm.pp / bw);
    }
  }
  e.cost.total = e.cost.tp + e.cost.dp + e.cost.pp;
  return e;
}

}  // namespace ascend::topology
