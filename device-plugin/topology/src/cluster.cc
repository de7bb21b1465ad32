#include "ascend/topology/cluster.h"

#include <algorithm>
#include <bit>
#include <map>
#include <set>

#include "internal.h"
#include "reader.h"

namespace ascend::topology {

using nlohmann::json;

std::string_view to_string(Level l) {
  switch (l) {
    case Level::kSio:
      return "sio";
    case Level::kHccs:
      return "hccs";
    case Level::kPcie:
      return "pcie";
    case Level::kLeaf:
      return "leaf";
    case Level::kSpine:
      return "spine";
    case Level::kCore:
      return "core";
  }
  return "core";
}

int NodeType::slot_of_phy(int phy_id) const {
  auto it = std::lower_bound(phy.begin(), phy.end(), phy_id);
  if (it == phy.end() || *it != phy_id) return -1;
  return static_cast<int>(it - phy.begin());
}

namespace detail {

Result<NodeType> make_node_type(const npu::DeviceSnapshot& host, bool with_links, const std::string& name) {
  NodeType t;
  t.family = host.family;
  t.size = static_cast<int>(host.chips.size());
  if (t.size == 0) return Error::invalid(name + " has no chips");
  if (t.size > 64) return Error::invalid(name + " has more than 64 chips");
  std::vector<int> chip_index(static_cast<std::size_t>(t.size));
  for (const auto& c : host.chips) {
    t.phy.push_back(c.phy_id);
    t.domain.push_back(c.hccs_domain);
    t.numa.push_back(c.numa_node);
  }
  if (!std::is_sorted(t.phy.begin(), t.phy.end())) std::sort(t.phy.begin(), t.phy.end());
  t.card.assign(static_cast<std::size_t>(t.size), 0);
  auto cards = host.cards();
  for (std::size_t ci = 0; ci < cards.size(); ++ci) {
    std::uint64_t mask = 0;
    for (std::size_t k = 0; k < cards[ci].size(); ++k) {
      int s = t.slot_of_phy(cards[ci][k]);
      t.card[static_cast<std::size_t>(s)] = static_cast<int>(ci);
      chip_index[static_cast<std::size_t>(s)] = static_cast<int>(k);
      mask |= 1ULL << s;
    }
    t.card_masks.push_back(mask);
  }
  for (int s = 0; s < t.size; ++s) t.canonical.push_back(s);
  auto dom_key = [&](int s) { return t.domain[s] >= 0 ? t.domain[s] : 1000000 + s; };
  std::stable_sort(t.canonical.begin(), t.canonical.end(), [&](int a, int b) {
    return std::tuple(dom_key(a), t.card[a], chip_index[a], t.phy[a]) <
           std::tuple(dom_key(b), t.card[b], chip_index[b], t.phy[b]);
  });
  std::map<int, std::uint64_t> doms;
  for (int s = 0; s < t.size; ++s) doms[dom_key(s)] |= 1ULL << s;
  for (auto& [k, m] : doms) t.domain_masks.push_back(m);
  if (!with_links) return t;
  t.level.resize(static_cast<std::size_t>(t.size) * static_cast<std::size_t>(t.size));
  for (int a = 0; a < t.size; ++a) {
    for (int b = 0; b < t.size; ++b) {
      Level l = Level::kSio;
      if (a != b) {
        switch (npu::level_of(host.link(t.phy[a], t.phy[b]))) {
          case npu::LinkLevel::kSio:
            l = Level::kSio;
            break;
          case npu::LinkLevel::kHccs:
            l = Level::kHccs;
            break;
          case npu::LinkLevel::kPcie:
            l = Level::kPcie;
            break;
        }
      }
      t.level[static_cast<std::size_t>(a) * static_cast<std::size_t>(t.size) + static_cast<std::size_t>(b)] =
          l;
    }
  }
  return t;
}

}  // namespace detail

Result<NodeType> make_node_type(const npu::HostModel& model) {
  ASCEND_ASSIGN(NodeType t, detail::make_node_type(model.host, true, "profile " + model.profile),
                "node type");
  t.profile = model.profile;
  t.host = model.host;
  return t;
}

Level Cluster::level(int node_a, int slot_a, int node_b, int slot_b) const {
  if (node_a == node_b) return type_of(node_a).level_of(slot_a, slot_b);
  const Node& a = nodes[static_cast<std::size_t>(node_a)];
  const Node& b = nodes[static_cast<std::size_t>(node_b)];
  if (a.leaf == b.leaf) return Level::kLeaf;
  if (a.spine == b.spine) return Level::kSpine;
  return Level::kCore;
}

std::uint64_t Cluster::initially_free(int node) const {
  const Node& n = nodes[static_cast<std::size_t>(node)];
  return type_of(node).all() & ~n.busy & ~n.unhealthy;
}

int Cluster::max_node_size() const {
  int m = 0;
  for (const auto& t : types) m = std::max(m, t.size);
  return m;
}

int Cluster::node_index(std::string_view name) const {
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

ClusterState ClusterState::initial(const Cluster& c) {
  ClusterState s;
  s.free.reserve(c.nodes.size());
  for (std::size_t i = 0; i < c.nodes.size(); ++i) s.free.push_back(c.initially_free(static_cast<int>(i)));
  return s;
}

int ClusterState::free_chips() const {
  int n = 0;
  for (auto m : free) n += std::popcount(m);
  return n;
}

ProfileSource builtin_profiles() {
  return [](const std::string& name) { return npu::builtin_host_model(name); };
}

std::vector<NodeSpec> generate_nodes(const std::string& profile, int count, int nodes_per_leaf,
                                     int leaves_per_spine, const std::string& prefix, int first_leaf,
                                     int first_spine) {
  std::vector<NodeSpec> out;
  int width = std::max(3, static_cast<int>(std::to_string(std::max(count - 1, 0)).size()));
  char buf[32];
  for (int i = 0; i < count; ++i) {
    NodeSpec n;
    std::string num = std::to_string(i);
    n.name = prefix;
    n.name.append(static_cast<std::size_t>(std::max(0, width - static_cast<int>(num.size()))), '0');
    n.name += num;
    n.profile = profile;
    int leaf = first_leaf + i / nodes_per_leaf;
    std::snprintf(buf, sizeof buf, "leaf-%02d", leaf);
    n.leaf = buf;
    n.spine = "spine-" + std::to_string(first_spine + (i / nodes_per_leaf) / leaves_per_spine);
    out.push_back(std::move(n));
  }
  return out;
}

namespace {

using detail::fail;
using detail::FieldError;

std::string phy_range(const NodeType& t) {
  return "phy ids " + std::to_string(t.phy.front()) + "-" + std::to_string(t.phy.back());
}

// Builds the cluster; every error is thrown with the path of the spec that caused it.
Cluster build(std::string name, const Bandwidth& bw, const std::vector<NodeSpec>& specs,
              const std::vector<FieldPath>& paths, const ProfileSource& profiles) {
  Cluster c;
  c.name = std::move(name);
  c.bw = bw;
  if (specs.empty()) fail({}, "no nodes: give `nodes` or `generate`");
  std::map<std::string, int> type_index;
  std::map<std::string, int> leaf_index;
  std::map<std::string, int> spine_index;
  std::map<std::string, std::size_t> seen_names;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const NodeSpec& s = specs[i];
    const FieldPath& path = paths[i];
    if (s.name.empty()) fail(path.key("name"), "a node needs a name");
    if (auto [it, fresh] = seen_names.emplace(s.name, i); !fresh) {
      fail(path.key("name"),
           "duplicate node name " + s.name + " (also node " + std::to_string(it->second) + ")");
    }
    Node n;
    n.name = s.name;
    auto ti = type_index.find(s.profile);
    if (ti == type_index.end()) {
      auto host = profiles(s.profile);
      if (!host.ok()) fail(path.key("profile"), host.error().message());
      auto type = make_node_type(*host);
      if (!type.ok()) fail(path.key("profile"), type.error().message());
      c.types.push_back(std::move(type).value());
      c.type_names.push_back(s.profile);
      ti = type_index.emplace(s.profile, static_cast<int>(c.types.size() - 1)).first;
    }
    n.type = ti->second;
    const NodeType& t = c.types[static_cast<std::size_t>(n.type)];
    if (s.leaf.empty()) fail(path.key("leaf"), "a node needs a leaf switch");
    if (s.spine.empty()) fail(path.key("spine"), "empty spine name");
    auto si = spine_index.find(s.spine);
    if (si == spine_index.end()) {
      c.spines.push_back(s.spine);
      c.spine_leaves.emplace_back();
      si = spine_index.emplace(s.spine, static_cast<int>(c.spines.size() - 1)).first;
    }
    n.spine = si->second;
    auto li = leaf_index.find(s.leaf);
    if (li == leaf_index.end()) {
      c.leaves.push_back(s.leaf);
      c.leaf_spine.push_back(n.spine);
      c.leaf_nodes.emplace_back();
      c.spine_leaves[static_cast<std::size_t>(n.spine)].push_back(static_cast<int>(c.leaves.size() - 1));
      li = leaf_index.emplace(s.leaf, static_cast<int>(c.leaves.size() - 1)).first;
    } else if (c.leaf_spine[static_cast<std::size_t>(li->second)] != n.spine) {
      fail(path.key("spine"),
           "leaf " + s.leaf + " is under " +
               c.spines[static_cast<std::size_t>(c.leaf_spine[static_cast<std::size_t>(li->second)])] +
               " already; a leaf switch has one spine");
    }
    n.leaf = li->second;
    auto to_mask = [&](const std::vector<int>& ids, const char* field) {
      std::uint64_t m = 0;
      for (std::size_t k = 0; k < ids.size(); ++k) {
        int slot = t.slot_of_phy(ids[k]);
        if (slot < 0) {
          fail(path.key(field).index(static_cast<int>(k)),
               "chip " + std::to_string(ids[k]) + " is not on " + s.profile + " (" + phy_range(t) + ")");
        }
        m |= 1ULL << slot;
      }
      return m;
    };
    n.busy = to_mask(s.busy, "busy");
    n.unhealthy = to_mask(s.unhealthy, "unhealthy");
    c.leaf_nodes[static_cast<std::size_t>(n.leaf)].push_back(static_cast<int>(c.nodes.size()));
    c.nodes.push_back(std::move(n));
  }
  return c;
}

std::vector<int> id_list(const json* v, const FieldPath& path) {
  std::vector<int> out;
  if (v == nullptr) return out;
  if (!v->is_array()) fail(path, "expected a list of chip ids, found " + detail::type_name(*v));
  for (std::size_t i = 0; i < v->size(); ++i) {
    out.push_back(static_cast<int>(detail::as_integer((*v)[i], path.index(static_cast<int>(i)), 0, 4095)));
  }
  return out;
}

}  // namespace

Result<Cluster> make_cluster(std::string name, const Bandwidth& bw, const std::vector<NodeSpec>& specs,
                             const ProfileSource& profiles) {
  std::vector<FieldPath> paths;
  for (std::size_t i = 0; i < specs.size(); ++i)
    paths.push_back(FieldPath{}.key("nodes").index(static_cast<int>(i)));
  try {
    return build(std::move(name), bw, specs, paths, profiles);
  } catch (const FieldError& e) {
    return detail::to_error(e, {});
  }
}

Result<Cluster> cluster_from_json(const json& j, const ProfileSource& profiles, const LineLocator& where) {
  try {
    detail::ObjectReader r(j, {});
    std::string name = r.string("name", std::string("cluster"));
    Bandwidth bw;
    if (const json* b = r.find("bandwidth_gbps")) {
      detail::ObjectReader br(*b, r.path("bandwidth_gbps"));
      static constexpr std::array<const char*, kLevelCount> kKeys = {"sio",  "hccs",  "pcie",
                                                                     "leaf", "spine", "core"};
      for (int i = 0; i < kLevelCount; ++i)
        bw.gbps[static_cast<std::size_t>(i)] =
            br.positive(kKeys[static_cast<std::size_t>(i)], bw.gbps[static_cast<std::size_t>(i)]);
      br.done();
    }
    std::vector<NodeSpec> specs;
    std::vector<FieldPath> paths;
    if (const json* nodes = r.find("nodes")) {
      if (!nodes->is_array())
        fail(r.path("nodes"), "expected a list of nodes, found " + detail::type_name(*nodes));
      for (std::size_t i = 0; i < nodes->size(); ++i) {
        FieldPath p = r.path("nodes").index(static_cast<int>(i));
        detail::ObjectReader nr((*nodes)[i], p);
        NodeSpec s;
        s.name = nr.string("name");
        s.profile = nr.string("profile");
        s.leaf = nr.string("leaf");
        s.spine = nr.string("spine", std::string("spine-0"));
        s.busy = id_list(nr.find("busy"), p.key("busy"));
        s.unhealthy = id_list(nr.find("unhealthy"), p.key("unhealthy"));
        nr.done();
        specs.push_back(std::move(s));
        paths.push_back(p);
      }
    }
    if (const json* gen = r.find("generate")) {
      if (!gen->is_array()) fail(r.path("generate"), "expected a list, found " + detail::type_name(*gen));
      for (std::size_t i = 0; i < gen->size(); ++i) {
        FieldPath p = r.path("generate").index(static_cast<int>(i));
        detail::ObjectReader gr((*gen)[i], p);
        std::string profile = gr.string("profile");
        int count = static_cast<int>(gr.integer("count", 1, 100000));
        int per_leaf = static_cast<int>(gr.integer("nodes_per_leaf", 1, 100000, 16));
        int per_spine = static_cast<int>(gr.integer("leaves_per_spine", 1, 100000, 4));
        std::string prefix = gr.string("prefix", std::string("node-"));
        gr.done();
        std::set<std::string> leaves;
        std::set<std::string> spines;
        for (const auto& s : specs) {
          leaves.insert(s.leaf);
          spines.insert(s.spine);
        }
        for (auto& s : generate_nodes(profile, count, per_leaf, per_spine, prefix,
                                      static_cast<int>(leaves.size()), static_cast<int>(spines.size()))) {
          specs.push_back(std::move(s));
          paths.push_back(p);
        }
      }
    }
    r.done();
    return build(std::move(name), bw, specs, paths, profiles);
  } catch (const FieldError& e) {
    return detail::to_error(e, where);
  }
}

}  // namespace ascend::topology
