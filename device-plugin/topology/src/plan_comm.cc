#include "plan_comm.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace ascend::topology::detail {

namespace {

constexpr double kBf16 = 2;

std::tuple<int, Level, Level, int> weight(const GroupSpan& g) {
  return {g.nodes, g.inter, g.intra, g.per_node};
}

// Levels form a hierarchy, so the slowest level of a group is the slowest from its first member; the same
// holds for its servers from the first one.
GroupSpan span_of(const Cluster& c, const std::vector<int>& ranks, const std::vector<ChipRef>& chips) {
  GroupSpan g;
  const ChipRef& first = chips[static_cast<std::size_t>(ranks.front())];
  std::map<int, int> per_node;
  std::map<int, const ChipRef*> node_first;
  g.intra = Level::kSio;
  g.inter = Level::kLeaf;
  for (int r : ranks) {
    const ChipRef& ch = chips[static_cast<std::size_t>(r)];
    ++per_node[ch.node];
    auto [it, fresh] = node_first.emplace(ch.node, &ch);
    if (!fresh) g.intra = std::max(g.intra, c.level(ch.node, it->second->slot, ch.node, ch.slot));
    if (ch.node != first.node) g.inter = std::max(g.inter, c.level(first.node, first.slot, ch.node, ch.slot));
  }
  g.nodes = static_cast<int>(per_node.size());
  for (const auto& [node, k] : per_node) g.per_node = std::max(g.per_node, k);
  return g;
}

GroupSpan widest(const Cluster& c, const std::vector<std::vector<int>>& groups,
                 const std::vector<ChipRef>& chips) {
  GroupSpan best;
  best.per_node = 0;
  for (const auto& g : groups) {
    if (g.size() < 2) continue;
    GroupSpan s = span_of(c, g, chips);
    if (best.per_node == 0 || weight(s) > weight(best)) best = s;
  }
  if (best.per_node == 0) best.per_node = 1;
  return best;
}

}  // namespace

Spans spans_of(const Cluster& c, const Job& job, const Placement& p) {
  Groups groups = groups_of(job);
  Spans s;
  s.tp = widest(c, groups.tp, p.chips);
  s.dp = widest(c, groups.dp, p.chips);
  for (const auto& [a, b] : groups.pp) {
    const ChipRef& x = p.chips[static_cast<std::size_t>(a)];
    const ChipRef& y = p.chips[static_cast<std::size_t>(b)];
    s.pp = std::max(s.pp, c.level(x.node, x.slot, y.node, y.slot));
  }
  return s;
}

namespace {

// One TP collective of M bytes: an all-reduce, or with sequence parallelism a reduce-scatter and an
// all-gather of the same M [Korthikanti §4.2.2].
CollectiveCost tp_collective(const TrainOptions& o, const GroupSpan& g, double bytes, const Interconnect& ic,
                             const Bandwidth& fallback) {
  if (!o.sequence_parallel) return collective(Op::kAllReduce, g, bytes, ic, fallback);
  CollectiveCost rs = collective(Op::kReduceScatter, g, bytes, ic, fallback);
  rs.seconds += collective(Op::kAllGather, g, bytes, ic, fallback).seconds;
  return rs;
}

}  // namespace

PlannedComm comm_time(const ModelShape& m, const TrainOptions& o, const Layout& l, const Spans& s,
                      const Interconnect& ic, const Bandwidth& fallback) {
  PlannedComm out;
  CommTime& t = out.time;
  PlannedComm& algos = out;
  double micro = micro_batches(m, l);
  double activation = kBf16 * m.seq_len * static_cast<double>(m.micro_batch) * m.hidden;
  int layers = stage_layers(m.layers, l.pp, 0);
  if (l.tp > 1) {
    int per_layer = o.recompute == Recompute::kFull ? 6 : 4;
    algos.tp = tp_collective(o, s.tp, activation, ic, fallback);
    t.tp = per_layer * layers * micro * algos.tp.seconds;
  }
  if (l.pp > 1) {
    double sends = 2 * (micro * l.v + l.pp - 1);
    t.pp = sends * send_time(activation / l.tp, link_at(ic, s.pp, fallback));
  }
  if (l.dp > 1) {
    // One bucket per layer of the largest stage, as the exposure model assumes.
    double grads = kBf16 * std::max(stage_params(m, l, 0), stage_params(m, l, l.pp - 1));
    int buckets = std::max(1, layers);
    double bucket = grads / buckets;
    algos.dp = collective(Op::kAllReduce, s.dp, bucket, ic, fallback);
    t.dp = buckets * algos.dp.seconds;
    if (o.optimizer_parallel) {
      CollectiveCost rs = collective(Op::kReduceScatter, s.dp, bucket, ic, fallback);
      double ag = collective(Op::kAllGather, s.dp, bucket, ic, fallback).seconds;
      out.zero = ZeroComm{buckets * rs.seconds, buckets * ag};
      algos.dp = rs;
    }
  }
  return out;
}

}  // namespace ascend::topology::detail
