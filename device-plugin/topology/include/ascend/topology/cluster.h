// A training cluster as the placer sees it: nodes (each an emulated host profile), the leaf and spine
// switches above them, the link bandwidth of every level, and which chips are busy or unhealthy. A Cluster
// is immutable once built and may be shared read-only between threads; the changing part (which chips are
// free) is a separate ClusterState value.
//
// Chips of a node are addressed by slot: the index of the chip in the profile's chip list (ascending
// phy id), so that a node's chips fit one 64-bit mask.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ascend/common/error.h"
#include "ascend/npu/host_model.h"
#include "ascend/topology/fields.h"

namespace ascend::topology {

// The levels of the cost model, fastest first. Two chips share exactly one level: sio (two dies of one
// A3 card), hccs (same HCCS domain), pcie (same node, different domain), leaf (same leaf switch), spine
// (same spine switch), core (different spines).
enum class Level : std::uint8_t { kSio = 0, kHccs, kPcie, kLeaf, kSpine, kCore };
inline constexpr int kLevelCount = 6;
std::string_view to_string(Level l);

// GB/s of each level (1 GB = 1e9 bytes). Defaults are those of docs/scheduler.md.
struct Bandwidth {
  std::array<double, kLevelCount> gbps = {224, 56, 16, 25, 12.5, 6.25};
  double bytes_per_s(Level l) const { return gbps[static_cast<int>(l)] * 1e9; }
};

// Everything the placer needs to know about one host profile, derived once from its host model.
struct NodeType {
  std::string profile;  // the host model's profile name
  npu::DeviceSnapshot host;
  npu::Family family = npu::Family::k910B;
  int size = 0;                // chips (slots)
  std::vector<int> phy;        // slot -> phy id
  std::vector<int> domain;     // slot -> HCCS domain (-1: none)
  std::vector<int> card;       // slot -> card index (position in host.cards())
  std::vector<int> numa;       // slot -> NUMA node
  std::vector<int> canonical;  // slots ordered by (domain, card, chip index): the rank layout order
  std::vector<Level> level;    // size*size: level between two slots of one node
  std::vector<std::uint64_t> domain_masks;  // slots of each distinct domain (domain -1 chips: one each)
  std::vector<std::uint64_t> card_masks;    // slots of each card, in card order

  std::uint64_t all() const { return size == 64 ? ~0ULL : ((1ULL << size) - 1); }
  Level level_of(int a, int b) const {
    return level[static_cast<std::size_t>(a) * static_cast<std::size_t>(size) + static_cast<std::size_t>(b)];
  }
  int slot_of_phy(int phy_id) const;  // -1 when absent
};

// Builds a NodeType; fails (EINVAL) for more than 64 chips or an empty profile.
Result<NodeType> make_node_type(const npu::HostModel& model);

struct Node {
  std::string name;
  int type = 0;                 // index into Cluster::types
  int leaf = 0;                 // index into Cluster::leaves
  int spine = 0;                // index into Cluster::spines
  std::uint64_t busy = 0;       // slots in use by others
  std::uint64_t unhealthy = 0;  // slots that must not be used
};

struct Cluster {
  std::string name;
  Bandwidth bw;
  std::vector<NodeType> types;
  std::vector<std::string> type_names;  // profile name of each type
  std::vector<Node> nodes;              // in file order (after expansion): node index = position
  std::vector<std::string> leaves;      // names, in order of first appearance
  std::vector<std::string> spines;
  std::vector<int> leaf_spine;                 // spine of each leaf
  std::vector<std::vector<int>> leaf_nodes;    // nodes of each leaf, in node order
  std::vector<std::vector<int>> spine_leaves;  // leaves of each spine, in order

  const NodeType& type_of(int node) const { return types[static_cast<std::size_t>(nodes[node].type)]; }
  Level level(int node_a, int slot_a, int node_b, int slot_b) const;
  // Chips that are neither busy nor unhealthy at the start.
  std::uint64_t initially_free(int node) const;
  int max_node_size() const;
  int node_index(std::string_view name) const;  // -1 when absent
};

// The part of a cluster that changes while jobs come and go: the free chips of every node.
struct ClusterState {
  std::vector<std::uint64_t> free;  // per node, slot mask

  static ClusterState initial(const Cluster& c);
  int free_chips() const;
};

// One node as written in a cluster file (busy/unhealthy as phy ids).
struct NodeSpec {
  std::string name;
  std::string profile;
  std::string leaf;
  std::string spine = "spine-0";
  std::vector<int> busy;
  std::vector<int> unhealthy;
};

// Resolves a profile name (built-in, or a path the caller knows how to read) to a host.
using ProfileSource = std::function<Result<npu::HostModel>(const std::string& name)>;

// A source that knows only the built-in profiles (pure).
ProfileSource builtin_profiles();

// Builds a cluster from node specs. Errors name the node and field (EINVAL).
Result<Cluster> make_cluster(std::string name, const Bandwidth& bw, const std::vector<NodeSpec>& specs,
                             const ProfileSource& profiles);

// The cluster file format (see docs/scheduler.md, "Cluster file"): `name`, optional `bandwidth_gbps`,
// `nodes`, and optional `generate` entries expanded after the listed nodes. Unknown fields are rejected.
// Errors carry the field path and, with a locator, the line.
Result<Cluster> cluster_from_json(const nlohmann::json& j, const ProfileSource& profiles,
                                  const LineLocator& where = {});

// Generated nodes of one `generate` entry, as the file expansion does it (exposed for tests and benches).
// Leaf and spine indices start at first_leaf / first_spine.
std::vector<NodeSpec> generate_nodes(const std::string& profile, int count, int nodes_per_leaf,
                                     int leaves_per_spine, const std::string& prefix, int first_leaf = 0,
                                     int first_spine = 0);

}  // namespace ascend::topology
