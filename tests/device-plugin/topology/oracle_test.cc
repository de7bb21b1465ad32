// An exhaustive-search oracle for small instances (up to 4 nodes, up to 16 ranks): the best placement of all,
// by (TP groups outside HCCS, total cost). topo must be within 2% of it on average and never worse than
// first-fit.
//
// The oracle is independent of the placer: a depth-first search that gives rank after rank a chip, keeping
// every pod on one node. Chips that no cost can tell apart (same node and HCCS domain; same card on A3) form
// one class, and untouched nodes / classes that are alike are tried once. Partial costs (groups already
// complete) bound the search.
//
// ORACLE_SEED and ORACLE_N pick other random instances; ORACLE_DEBUG=1 prints every instance where topo is
// more than 5% off, with both placements.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <random>

#include "ascend/topology/cost.h"
#include "ascend/topology/place.h"
#include "test_util.h"

namespace ascend::topology {
namespace {

using testing::make;
using testing::node;

struct Class {
  int node = 0;
  std::vector<int> slots;  // free chips of the class
  int key = 0;             // classes with equal keys on one node are alike when untouched
};

struct Score {
  int outside = 0;
  double total = 0;
  bool operator<(const Score& o) const {
    if (outside != o.outside) return outside < o.outside;
    return total < o.total * (1 - 1e-12);
  }
};

class Oracle {
 public:
  Oracle(const Cluster& c, const ClusterState& s, const Job& j, int pod)
      : c_(c), j_(j), pod_(pod), g_(groups_of(j)) {
    for (std::size_t n = 0; n < c.nodes.size(); ++n) {
      const NodeType& t = c.type_of(static_cast<int>(n));
      std::map<std::pair<int, int>, Class> by;
      for (int slot = 0; slot < t.size; ++slot) {
        if ((s.free[n] >> slot & 1) == 0) continue;
        bool cards =
            std::popcount(t.card_masks[static_cast<std::size_t>(t.card[static_cast<std::size_t>(slot)])]) > 1;
        std::pair<int, int> k{t.domain[static_cast<std::size_t>(slot)] >= 0
                                  ? t.domain[static_cast<std::size_t>(slot)]
                                  : 1000 + slot,
                              cards ? t.card[static_cast<std::size_t>(slot)] : -1};
        auto& cl = by[k];
        cl.node = static_cast<int>(n);
        cl.slots.push_back(slot);
      }
      std::vector<int> ids;
      for (auto& [k, cl] : by) {
        // Untouched classes are alike when they hold as many chips and are the same kind (card or domain).
        cl.key = static_cast<int>(cl.slots.size()) * 2 + (k.second >= 0 ? 1 : 0);
        ids.push_back(static_cast<int>(classes_.size()));
        classes_.push_back(cl);
      }
      node_classes_.push_back(ids);
    }
    used_.assign(classes_.size(), 0);
    chips_.assign(static_cast<std::size_t>(j.npus), {});
    // Groups that complete at each rank.
    tp_at_.resize(static_cast<std::size_t>(j.npus));
    dp_at_.resize(static_cast<std::size_t>(j.npus));
    pp_at_.resize(static_cast<std::size_t>(j.npus));
    for (std::size_t i = 0; i < g_.tp.size(); ++i)
      tp_at_[static_cast<std::size_t>(g_.tp[i].back())].push_back(i);
    for (std::size_t i = 0; i < g_.dp.size(); ++i)
      dp_at_[static_cast<std::size_t>(g_.dp[i].back())].push_back(i);
    for (std::size_t i = 0; i < g_.pp.size(); ++i)
      pp_at_[static_cast<std::size_t>(g_.pp[i].second)].push_back(i);
  }

  // The best score, starting from an upper bound (a known placement's score). nodes_ visited for reporting.
  Score solve(Score bound) {
    best_ = bound;
    dfs(0, 0, 0, 0, 0);
    return best_;
  }
  long long visited() const { return visited_; }
  const std::vector<ChipRef>& best_chips() const { return best_chips_; }

 private:
  double ring_bw(const std::vector<int>& ranks) const {
    double bw = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      const ChipRef& a = chips_[static_cast<std::size_t>(ranks[i])];
      const ChipRef& b = chips_[static_cast<std::size_t>(ranks[(i + 1) % ranks.size()])];
      bw = std::min(bw, c_.bw.bytes_per_s(c_.level(a.node, a.slot, b.node, b.slot)));
    }
    return bw;
  }

  bool outside(const std::vector<int>& ranks) const {
    const ChipRef& f = chips_[static_cast<std::size_t>(ranks.front())];
    for (int r : ranks) {
      const ChipRef& m = chips_[static_cast<std::size_t>(r)];
      if (m.node != f.node) return true;
      Level l = c_.type_of(f.node).level_of(f.slot, m.slot);
      if (l != Level::kSio && l != Level::kHccs) return true;
    }
    return false;
  }

  void dfs(int r, int outside_n, double tp, double dp, double pp) {
    ++visited_;
    if (!(Score{outside_n, tp + dp + pp} < best_)) return;  // cannot improve
    if (r == j_.npus) {
      best_ = {outside_n, tp + dp + pp};
      best_chips_ = chips_;
      return;
    }
    int pod = r / pod_;
    std::vector<int> nodes;
    if (r % pod_ == 0) {
      // A new pod: any node with room; untouched alike nodes (same type, leaf, free classes) once.
      std::vector<std::string> seen;
      for (std::size_t n = 0; n < c_.nodes.size(); ++n) {
        int room = 0;
        bool touched = false;
        std::string sig = std::to_string(c_.nodes[n].type) + "/" + std::to_string(c_.nodes[n].leaf);
        for (int id : node_classes_[n]) {
          room += static_cast<int>(classes_[static_cast<std::size_t>(id)].slots.size()) -
                  used_[static_cast<std::size_t>(id)];
          touched = touched || used_[static_cast<std::size_t>(id)] > 0;
          sig += std::string("/") + std::to_string(classes_[static_cast<std::size_t>(id)].key);
        }
        if (room < pod_) continue;
        if (!touched) {
          if (std::find(seen.begin(), seen.end(), sig) != seen.end()) continue;
          seen.push_back(sig);
        }
        nodes.push_back(static_cast<int>(n));
      }
    } else {
      nodes.push_back(chips_[static_cast<std::size_t>(pod) * static_cast<std::size_t>(pod_)].node);
    }
    for (int n : nodes) {
      std::vector<int> seen_keys;
      for (int id : node_classes_[static_cast<std::size_t>(n)]) {
        Class& cl = classes_[static_cast<std::size_t>(id)];
        int& u = used_[static_cast<std::size_t>(id)];
        if (u >= static_cast<int>(cl.slots.size())) continue;
        if (u == 0) {
          if (std::find(seen_keys.begin(), seen_keys.end(), cl.key) != seen_keys.end()) continue;
          seen_keys.push_back(cl.key);
        }
        chips_[static_cast<std::size_t>(r)] = {n, cl.slots[static_cast<std::size_t>(u)]};
        ++u;
        int o = outside_n;
        double t = tp, d = dp, p = pp;
        for (auto i : tp_at_[static_cast<std::size_t>(r)]) {
          const auto& grp = g_.tp[i];
          if (grp.size() < 2) continue;
          t = std::max(t, ring_cost(static_cast<int>(grp.size()), j_.comm.tp, ring_bw(grp)));
          o += outside(grp) ? 1 : 0;
        }
        for (auto i : dp_at_[static_cast<std::size_t>(r)]) {
          const auto& grp = g_.dp[i];
          if (grp.size() >= 2)
            d = std::max(d, ring_cost(static_cast<int>(grp.size()), j_.comm.dp, ring_bw(grp)));
        }
        for (auto i : pp_at_[static_cast<std::size_t>(r)]) {
          const auto& [a, b] = g_.pp[i];
          const ChipRef& x = chips_[static_cast<std::size_t>(a)];
          const ChipRef& y = chips_[static_cast<std::size_t>(b)];
          if (j_.comm.pp > 0)
            p = std::max(p, j_.comm.pp / c_.bw.bytes_per_s(c_.level(x.node, x.slot, y.node, y.slot)));
        }
        dfs(r + 1, o, t, d, p);
        --u;
      }
    }
  }

  const Cluster& c_;
  const Job& j_;
  int pod_;
  Groups g_;
  std::vector<Class> classes_;
  std::vector<std::vector<int>> node_classes_;
  std::vector<int> used_;
  std::vector<ChipRef> chips_;
  std::vector<std::vector<std::size_t>> tp_at_, dp_at_, pp_at_;
  Score best_;
  std::vector<ChipRef> best_chips_;
  long long visited_ = 0;
};

Score score(const Placement& p) {
  return {p.eval.tp_groups_outside_hccs, p.eval.cost.total};
}

// The oracle agrees with the cost model on a case small enough to check by hand.
TEST(Oracle, FindsTheObviousOptimum) {
  Cluster c = make({node("a", "atlas800t-a2", "l0", "s0", {0, 1, 2, 3}),
                    node("b", "atlas800t-a2", "l1", "s1"), node("c", "atlas800t-a2", "l1", "s1")});
  ClusterState s = ClusterState::initial(c);
  Job j = testing::job(16, 8, 1, 2, 8, {1e9, 0, 4e9});
  Oracle o(c, s, j, 8);
  Score best = o.solve({1 << 20, std::numeric_limits<double>::infinity()});
  EXPECT_EQ(best.outside, 0);
  EXPECT_DOUBLE_EQ(best.total, ring_cost(8, 1e9, 56e9) + ring_cost(2, 4e9, 25e9));
}

TEST(Oracle, TopoIsNearOptimalOnSmallInstances) {
  std::mt19937 rng(std::getenv("ORACLE_SEED") ? std::atoi(std::getenv("ORACLE_SEED")) : 11);
  const char* profiles[] = {"atlas800t-a2", "atlas800t-a2", "atlas800t-a2", "atlas800-9000", "atlas800t-a3"};
  struct Shape {
    int npus, tp, pp, dp;
  };
  const Shape shapes[] = {{8, 2, 2, 2},  {8, 4, 2, 1},  {8, 2, 1, 4},  {16, 4, 2, 2},
                          {16, 8, 2, 1}, {16, 4, 1, 4}, {16, 2, 2, 4}, {12, 4, 3, 1},
                          {12, 2, 3, 2}, {16, 8, 1, 2}, {8, 1, 2, 4},  {16, 2, 4, 2}};
  const CommBytes volumes[] = {{1e9, 2e8, 4.4e9}, {6e9, 1e9, 2e9}, {3e8, 3e8, 8e9}, {2e10, 5e8, 1e9}};
  double ratio_sum = 0;
  int instances = 0, exact = 0, worse_lexicographic = 0;
  double worst = 1;
  long long visited = 0;
  while (instances < (std::getenv("ORACLE_N") ? std::atoi(std::getenv("ORACLE_N")) : 300)) {
    int nodes = 2 + static_cast<int>(rng() % 3);
    const char* prof = profiles[rng() % 5];
    bool a3 = std::string(prof) == "atlas800t-a3";
    std::vector<NodeSpec> specs;
    int leaves = 1 + static_cast<int>(rng() % 2);
    bool two_spines = leaves == 2 && rng() % 2 == 0;
    for (int i = 0; i < nodes; ++i) {
      std::vector<int> busy;
      int size = a3 ? 16 : 8;
      int p_busy = static_cast<int>(rng() % 3);  // 0, 1/4 or 1/2 of the chips
      for (int k = 0; k < size; ++k) {
        if (p_busy > 0 && static_cast<int>(rng() % 4) < p_busy) busy.push_back(k);
      }
      int leaf = i % leaves;
      specs.push_back(node(std::string("n") + std::to_string(i), prof,
                           std::string("l") + std::to_string(leaf),
                           two_spines ? std::string("s") + std::to_string(leaf) : "s0", busy));
    }
    Cluster c = make(specs);
    ClusterState s = ClusterState::initial(c);
    Shape sh = shapes[rng() % (sizeof shapes / sizeof shapes[0])];
    if (a3 && sh.npus > 8) continue;  // 8 classes per A3 node: keep the search small
    int pods[] = {2, 4, 8};
    int pod = pods[rng() % 3];
    if (sh.npus % pod != 0 || (pod == 2 && sh.npus > 12)) continue;
    Job j = testing::job(sh.npus, sh.tp, sh.pp, sh.dp, pod, volumes[rng() % 4],
                         rng() % 2 == 0 ? RankOrder::kTpDpPp : RankOrder::kTpPpDp);
    auto topo = place(c, s, j, Policy::kTopo);
    auto ff = place(c, s, j, Policy::kFirstFit);
    if (!ff.ok()) {
      EXPECT_FALSE(topo.ok()) << "topo fails where first-fit places";
      continue;
    }
    ASSERT_TRUE(topo.ok()) << topo.error().message();
    Oracle o(c, s, j, pod);
    Score best = o.solve(score(*topo));
    visited += o.visited();
    Score t = score(*topo);
    Score f = score(*ff);
    EXPECT_FALSE(f < t) << "topo worse than first-fit: " << t.outside << "/" << t.total << " vs " << f.outside
                        << "/" << f.total;
    if (best.outside < t.outside) {
      ++worse_lexicographic;
      ADD_FAILURE() << "topo leaves " << t.outside << " TP groups outside HCCS; the optimum " << best.outside;
      continue;
    }
    double ratio = best.total > 0 ? t.total / best.total : 1.0;
    if (ratio > 1.05 && std::getenv("ORACLE_DEBUG") != nullptr) {
      std::printf("--- ratio %.3f job npus %d tp %d pp %d dp %d pod %d order %s comm %g %g %g\n", ratio,
                  j.npus, j.tp, j.pp, j.dp, pod, std::string(to_string(j.order)).c_str(), j.comm.tp,
                  j.comm.pp, j.comm.dp);
      for (std::size_t n = 0; n < c.nodes.size(); ++n) {
        std::printf("  node %zu %s leaf %d spine %d free %02llx\n", n,
                    c.type_names[static_cast<std::size_t>(c.nodes[n].type)].c_str(), c.nodes[n].leaf,
                    c.nodes[n].spine, static_cast<unsigned long long>(s.free[n]));
      }
      auto show = [](const char* what, const std::vector<ChipRef>& ch, const Evaluation& e) {
        std::printf("  %s tp %.4f pp %.4f dp %.4f total %.4f out %d:", what, e.cost.tp, e.cost.pp, e.cost.dp,
                    e.cost.total, e.tp_groups_outside_hccs);
        for (auto& x : ch) std::printf(" %d.%d", x.node, x.slot);
        std::printf("\n");
      };
      show("topo", topo->chips, topo->eval);
      show("opt ", o.best_chips(), evaluate(c, j, groups_of(j), o.best_chips()));
    }
    ratio_sum += ratio;
    worst = std::max(worst, ratio);
    exact += ratio <= 1 + 1e-9 ? 1 : 0;
    ++instances;
  }
  double mean = ratio_sum / instances;
  std::printf(
      "oracle: %d instances, topo optimal on %d, mean topo/optimum %.4f, worst %.4f, %lld search nodes\n",
      instances, exact, mean, worst, visited);
  EXPECT_EQ(worse_lexicographic, 0);
  EXPECT_LE(mean, 1.02);
}

}  // namespace
}  // namespace ascend::topology
