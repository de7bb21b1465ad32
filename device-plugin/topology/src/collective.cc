#include "ascend/topology/collective.h"

#include <algorithm>
#include <cmath>

namespace ascend::topology {

std::string_view to_string(Algorithm a) {
  switch (a) {
    case Algorithm::kNone:
      return "none";
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kMesh:
      return "mesh";
    case Algorithm::kDoubleBinaryTree:
      return "double-binary-tree";
    case Algorithm::kHalvingDoubling:
      return "halving-doubling";
    case Algorithm::kHierarchical:
      return "hierarchical";
  }
  return "none";
}

namespace {

// Steps of all-reduce (2) or of one of its halves (1).
double phases(Op op) {
  return op == Op::kAllReduce ? 2 : 1;
}

bool power_of_two(int n) {
  return n > 0 && (n & (n - 1)) == 0;
}

double log2_ceil(int n) {
  return std::ceil(std::log2(static_cast<double>(n)));
}

}  // namespace

double ring_time(Op op, int n, double bytes, const Link& l) {
  if (n < 2 || bytes <= 0) return 0;
  return phases(op) * (n - 1) * (l.alpha_s + bytes / (n * l.bytes_per_s));
}

double mesh_time(Op op, int n, double bytes, const Link& l) {
  if (n < 2 || bytes <= 0) return 0;
  int used = std::min(l.links, n - 1);
  return phases(op) * (l.alpha_s + (n - 1.0) / n * bytes / (used * l.link_bytes_per_s));
}

double halving_doubling_time(Op op, int n, double bytes, const Link& l) {
  if (n < 2 || bytes <= 0) return 0;
  return phases(op) * (std::log2(static_cast<double>(n)) * l.alpha_s + (n - 1.0) / n * bytes / l.bytes_per_s);
}

double double_binary_tree_time(int n, double bytes, const Link& l) {
  if (n < 2 || bytes <= 0) return 0;
  return 2 * (log2_ceil(n) * l.alpha_s + bytes / l.bytes_per_s);
}

double send_time(double bytes, const Link& l) {
  if (bytes <= 0) return 0;
  // On a full mesh a peer is one link away; through a switch every link of the chip carries the send.
  double rate = l.fabric == Fabric::kFullMesh ? l.link_bytes_per_s : l.bytes_per_s;
  return l.alpha_s + bytes / rate;
}

namespace {

CollectiveCost cheapest(std::initializer_list<CollectiveCost> options) {
  CollectiveCost best = *options.begin();
  for (const auto& c : options) {
    if (c.algorithm != Algorithm::kNone && (best.algorithm == Algorithm::kNone || c.seconds < best.seconds)) {
      best = c;
    }
  }
  return best;
}

CollectiveCost inside_server(Op op, int n, double bytes, const Link& l, Library lib) {
  CollectiveCost ring{ring_time(op, n, bytes, l), Algorithm::kRing, Algorithm::kNone};
  if (lib == Library::kHccl) {
    if (l.fabric == Fabric::kFullMesh)
      return {mesh_time(op, n, bytes, l), Algorithm::kMesh, Algorithm::kNone};
    return ring;
  }
  if (op != Op::kAllReduce) return ring;  // NCCL's tree runs all-reduce only
  return cheapest(
      {ring, {double_binary_tree_time(n, bytes, l), Algorithm::kDoubleBinaryTree, Algorithm::kNone}});
}

CollectiveCost between_servers(Op op, int n, double bytes, const Link& l, Library lib) {
  CollectiveCost ring{ring_time(op, n, bytes, l), Algorithm::kRing, Algorithm::kNone};
  if (lib == Library::kHccl) {
    if (!power_of_two(n)) return ring;
    return cheapest(
        {ring, {halving_doubling_time(op, n, bytes, l), Algorithm::kHalvingDoubling, Algorithm::kNone}});
  }
  if (op != Op::kAllReduce) return ring;
  return cheapest(
      {ring, {double_binary_tree_time(n, bytes, l), Algorithm::kDoubleBinaryTree, Algorithm::kNone}});
}

}  // namespace

CollectiveCost collective(Op op, const GroupSpan& g, double bytes, const Interconnect& ic,
                          const Bandwidth& fallback) {
  if (g.ranks() < 2 || bytes <= 0) return {};
  Link intra = link_at(ic, g.intra, fallback);
  if (g.nodes == 1) return inside_server(op, g.per_node, bytes, intra, ic.library);
  Link inter = link_at(ic, g.inter, fallback);
  if (g.per_node == 1) return between_servers(op, g.nodes, bytes, inter, ic.library);
  // Hierarchical: each of the k ranks of a server owns M/k after the reduce-scatter inside and runs the
  // inter-server collective of its share with its peers of the other servers (k of them at once, each over
  // its own NIC share), then the all-gather inside.
  CollectiveCost across = between_servers(op, g.nodes, bytes / g.per_node, inter, ic.library);
  double inside = 0;
  if (op != Op::kAllGather)
    inside += inside_server(Op::kReduceScatter, g.per_node, bytes, intra, ic.library).seconds;
  if (op != Op::kReduceScatter)
    inside += inside_server(Op::kAllGather, g.per_node, bytes, intra, ic.library).seconds;
  return {inside + across.seconds, Algorithm::kHierarchical, across.algorithm};
}

}  // namespace ascend::topology
