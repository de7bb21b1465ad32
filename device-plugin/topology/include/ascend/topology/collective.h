// Collective cost by algorithm, alpha-beta (docs/planner-collectives.md gives every formula with its source):
// a collective over n ranks of M bytes per rank on links of bandwidth B (bytes/s per chip) and latency
// alpha per step. collective() prices a group spread over the levels of an interconnect with the algorithm
// its library would pick: the cheapest of those the library runs on that fabric and scale (HCCL selects
// "based on the product form, data size and number of servers", NCCL by its own cost model). Pure;
// thread-safe.
#pragma once

#include <string_view>

#include "ascend/topology/cluster.h"
#include "ascend/topology/interconnect.h"

namespace ascend::topology {

enum class Op { kAllReduce, kReduceScatter, kAllGather };

enum class Algorithm { kNone, kRing, kMesh, kDoubleBinaryTree, kHalvingDoubling, kHierarchical };
std::string_view to_string(Algorithm a);

// Ring: all-reduce 2(n-1)(alpha + M/(nB)); reduce-scatter and all-gather (n-1)(alpha + M/(nB)).
double ring_time(Op op, int n, double bytes, const Link& l);
// Full mesh (HCCL's Mesh): every chip sends its n-1 chunks of M/n at once over min(links, n-1) links:
// reduce-scatter alpha + (n-1)/n M/(min(links, n-1) b); all-reduce twice that.
double mesh_time(Op op, int n, double bytes, const Link& l);
// Recursive halving-doubling (n a power of two): all-reduce 2 log2(n) alpha + 2(n-1)/n M/B, the halves
// log2(n) alpha + (n-1)/n M/B.
double halving_doubling_time(Op op, int n, double bytes, const Link& l);
// Double binary tree (NCCL), all-reduce only: 2 ceil(log2 n) alpha + 2 M/B.
double double_binary_tree_time(int n, double bytes, const Link& l);
// One point-to-point send: alpha + M/B; on a full mesh alpha + M/b (one link reaches the peer).
double send_time(double bytes, const Link& l);

// Where a group's ranks are: `per_node` ranks on each of `nodes` servers; `intra` the slowest level between
// two of them on one server, `inter` the slowest level between servers.
struct GroupSpan {
  int per_node = 1;
  int nodes = 1;
  Level intra = Level::kHccs;
  Level inter = Level::kLeaf;
  int ranks() const { return per_node * nodes; }
};

struct CollectiveCost {
  double seconds = 0;
  Algorithm algorithm = Algorithm::kNone;  // kHierarchical when it spans servers with several ranks each
  Algorithm inter = Algorithm::kNone;      // the algorithm between servers
};

// The collective as `ic.library` runs it. Inside a server: HCCL mesh on a full mesh, ring otherwise; NCCL
// the cheaper of ring and tree. Across servers with one rank each: HCCL the cheaper of ring and
// halving-doubling (powers of two), NCCL of ring and double binary tree; with k > 1 ranks each,
// hierarchical: reduce-scatter inside, the inter-server collective of M/k, all-gather inside.
CollectiveCost collective(Op op, const GroupSpan& g, double bytes, const Interconnect& ic,
                          const Bandwidth& fallback);

}  // namespace ascend::topology
