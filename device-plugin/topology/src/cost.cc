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

bool placed(const ChipRef& ch) {
  return ch.node >= 0;
}

// Slowest hop of the ring r_0 -> r_1 -> ... -> r_(k-1) -> r_0 over the placed ranks (all of them, once a
// placement is complete).
double ring_bw(const Cluster& c, const std::vector<int>& ranks, const std::vector<ChipRef>& chips) {
  double bw = std::numeric_limits<double>::infinity();
  const ChipRef* first = nullptr;
  const ChipRef* prev = nullptr;
  int k = 0;
  for (int r : ranks) {
    const ChipRef& ch = chips[static_cast<std::size_t>(r)];
    if (!placed(ch)) continue;
    if (prev != nullptr) bw = std::min(bw, bw_between(c, *prev, ch));
    if (first == nullptr) first = &ch;
    prev = &ch;
    ++k;
  }
  // A ring of two has one link, used both ways: only longer rings close back to their first rank.
  if (k > 2) bw = std::min(bw, bw_between(c, *prev, *first));
  return bw;
}

bool inside_hccs(const Cluster& c, const std::vector<int>& ranks, const std::vector<ChipRef>& chips) {
  const ChipRef* first = nullptr;
  for (int r : ranks) {
    const ChipRef& m = chips[static_cast<std::size_t>(r)];
    if (!placed(m)) continue;
    if (first == nullptr) {
      first = &m;
      continue;
    }
    if (m.node != first->node) return false;
    Level l = c.type_of(first->node).level_of(first->slot, m.slot);
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
      if (!placed(chips[static_cast<std::size_t>(a)]) || !placed(chips[static_cast<std::size_t>(b)]))
        continue;
      double bw = bw_between(c, chips[static_cast<std::size_t>(a)], chips[static_cast<std::size_t>(b)]);
      e.cost.pp = std::max(e.cost.pp, job.comm.pp / bw);
    }
  }
  e.cost.total = e.cost.tp + e.cost.dp + e.cost.pp;
  return e;
}

}  // namespace ascend::topology
