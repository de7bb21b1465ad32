// The parts of the topo policy (topo.cc), one file each: units and their slots on the nodes
// (topo_slots.cc), components and their packing into the slots (topo_pack.cc), rank layouts and the local
// search (topo_layout.cc). Internal to the topology library.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "internal.h"
#include "place_internal.h"

namespace ascend::topology::detail::topo_parts {

enum Target : int { kNodeT = 0, kLeafT = 1, kSpineT = 2, kCoreT = 3 };
constexpr int kTp = 0;
constexpr int kDp = 1;
constexpr int kPp = 2;

enum Quality : int { kSioQ = 0, kHccsQ = 1, kAnyQ = 2 };

// ---- units and slots (topo_slots.cc) ----------------------------------------------------------------------

// Where units go: a node, or one HCCS domain of a node when the clean tiers split multi-domain nodes (an
// Ascend 910 ring) so that a group can be asked to stay inside one ring.
struct Bin {
  int node = 0;
  std::uint64_t allowed = 0;        // chips of the node this bin may use
  int count = 0;                    // units it can take
  std::vector<std::uint64_t> sets;  // their chip sets (filled by materialize)
};

struct Slots {
  std::vector<Bin> bins;
  std::vector<std::vector<int>> leaf_bins;  // bins of each leaf, in node order
  std::vector<char> spread;                 // per node: two units on it talk slower than over the leaf
  int total = 0;
  int u = 0;
  int block = 0;
  Quality q = kAnyQ;
};

// The first `k` chips of `m` in canonical order.
std::uint64_t first_canonical(const NodeType& t, std::uint64_t m, int k);
// A chip set of `u` chips of `free` for one unit whose TP blocks of `block` chips meet quality `q`, or 0.
std::uint64_t select_unit(const NodeType& t, std::uint64_t free, int u, int block, Quality q);
// The chip sets each node (or HCCS domain) offers for units of `u` chips whose TP blocks of `block` chips
// meet quality `q`.
Slots compute_slots(const Cluster& c, const ClusterState& s, int u, int block, Quality q);
// Fills the chip sets of the first `used` units of a bin.
void materialize(const Cluster& c, const ClusterState& s, Slots& slots, int bin, int used);

struct UnitGroups {
  std::array<std::vector<std::vector<int>>, 3> sets;  // distinct unit sets of groups spanning 2+ units
  std::array<int, 3> max_k{};                         // ranks in the largest such group
};
// The unit sets of the job's TP, DP and PP groups for units of `u` ranks.
UnitGroups unit_groups(const Groups& g, int u);

// ---- components and packing (topo_pack.cc)
// ------------------------------------------------------------------

struct LeafComp {
  std::vector<std::vector<int>> nodes;  // node components: units that share a node
  int size = 0;
};
struct SpineComp {
  std::vector<LeafComp> leaves;
  int size = 0;
};

// Units that must share a node, a leaf, a spine for the targets of each kind of group (kTp, kDp, kPp), in
// rank order or (by_size) largest first.
std::vector<SpineComp> components(int units, const UnitGroups& ug, const std::array<int, 3>& target,
                                  bool by_size);

using Packing = std::vector<std::pair<int, int>>;  // (bin, set index) of each unit
// Packs the components into the slots (see Packer in topo_pack.cc); nothing when they do not fit.
std::optional<Packing> pack(const Cluster& c, const Slots& slots, const std::vector<SpineComp>& comps,
                            int units, bool roomy, bool colocate);

// ---- rank layouts and the local search (topo_layout.cc)
// -----------------------------------------------------

// Whether `a` beats `b`: fewer TP groups outside HCCS, then a lower total cost.
bool better(const Evaluation& a, const Evaluation& b);

// The six orders of significance of (t, d, p) used to lay ranks onto chips, most significant first.
// {p, d, t} is rank order for tp-dp-pp, {d, p, t} for tp-pp-dp.
inline constexpr int kLayouts[6][3] = {{2, 1, 0}, {1, 2, 0}, {2, 0, 1}, {0, 2, 1}, {1, 0, 2}, {0, 1, 2}};

// Every rank's (t, d, p), computed once per job.
std::vector<std::array<int, 3>> coords_of(const Job& job);

// A set of ranks and the chips they share out among themselves, chips in canonical order.
struct Share {
  std::vector<int> ranks;  // ascending
  std::vector<ChipRef> chips;
};

// Lays every share's ranks onto its chips in the order `sig`.
void lay_out(const std::vector<std::array<int, 3>>& coords, const std::vector<Share>& shares,
             const int (&sig)[3], std::vector<ChipRef>& chips);
// Shares of one scope: every unit alone (0), every bin (1) or every node (2).
std::vector<Share> shares_of(const Cluster& c, const Slots& slots, const Packing& at, int u, int scope);
// Whether every two chips of the node type are joined alike (then rank layouts on it all cost the same).
bool uniform_links(const NodeType& t);
// Bounded local search over a placement (jobs up to 256 NPUs). The ranks of pods with `fixed[pod]` keep
// their chips (empty: every pod may move).
void improve(const Cluster& c, const ClusterState& s, const Job& job, const Groups& g, Placement& p,
             const std::vector<bool>& fixed = {});

}  // namespace ascend::topology::detail::topo_parts
