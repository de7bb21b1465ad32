// The JSON of the extender protocol (k8s.io/kube-scheduler/extender/v1: Go field names as keys, matched in
// any letter case on input, as Go's decoder does) and of the device plugins' calls, converted in one place
// each way. Pure functions; thread-safe. Every parse failure is an EINVAL naming the field.
#pragma once

#include <atomic>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ascend/common/error.h"
#include "ascend/scheduler/extender.h"
#include "ascend/scheduler/pod.h"

namespace ascend::scheduler {

// The node names of a request: views into text the list owns, shared by its copies. A list read from the
// same bytes as the last one a thread read shares that one's (read_extender_args_fast): kube-scheduler sends
// every /filter the same 5 000 names.
class NodeNameList {
 public:
  NodeNameList() = default;
  NodeNameList(std::vector<std::string> names);  // NOLINT(google-explicit-constructor): a list of names
  NodeNameList(std::initializer_list<std::string> names) : NodeNameList(std::vector<std::string>(names)) {}
  // `text` holds the names; `views` point into it.
  NodeNameList(std::shared_ptr<const std::string> text, std::vector<std::string_view> views);

  std::span<const std::string_view> view() const { return store_ ? std::span(store_->views) : kNone; }
  operator std::span<const std::string_view>() const { return view(); }  // NOLINT: a list is a span of names
  std::size_t size() const { return view().size(); }
  bool empty() const { return view().empty(); }
  std::string_view operator[](std::size_t i) const { return view()[i]; }
  auto begin() const { return view().begin(); }
  auto end() const { return view().end(); }
  std::vector<std::string> strings() const { return {begin(), end()}; }
  // The same names in the same order (a list shares its storage with its copies: compared at once).
  bool operator==(const NodeNameList& o) const;
  bool operator==(const std::vector<std::string>& o) const;
  // Every name is printable ASCII without '"' or '\\' (as a checked node name always is), so an answer
  // writes it as it is: worked out on the first call and kept with the list, which every request of the
  // same bytes shares.
  bool all_plain() const;

 private:
  struct Store {
    std::shared_ptr<const std::string> text;  // for views into a request's text
    std::vector<std::string> owned;           // for a list built from strings
    std::vector<std::string_view> views;
    mutable std::atomic<signed char> plain{-1};  // all_plain(): -1 not known yet, else 0 or 1
  };
  static constexpr std::span<const std::string_view> kNone{};
  std::shared_ptr<const Store> store_;
};

// ExtenderArgs: {"Pod": {...}, "Nodes": {"items": [...]}} or {"Pod": ..., "NodeNames": [...]}. Every name is
// checked against Kubernetes' limits (pod.h); more than `max_nodes` nodes (the cluster file's count: a
// longer list cannot be real) is refused before any is read.
struct ExtenderArgs {
  PodInfo pod;
  NodeNameList node_names;
  bool full_nodes = false;            // the caller sent Nodes (full objects), not NodeNames
  std::vector<nlohmann::json> nodes;  // the Node objects, in order, when full_nodes
};
Result<ExtenderArgs> parse_extender_args(const nlohmann::json& body,
                                         std::size_t max_nodes = std::numeric_limits<std::size_t>::max());

// The same ExtenderArgs straight from the request's text (extender_read.cc: simdjson's On-Demand API, no
// tree of the node names): for a body that parses and reads without error, exactly what
// parse_extender_args of json::parse(text) gives; nullopt for anything else (invalid JSON, any error, full
// Node objects, a name with an escape, nesting deeper than 64), which the caller then reads the long way
// for its exact answer or error. A NodeNames array whose bytes are those of the last one this thread read
// shares that one's list: it was checked then, so it is neither read nor checked again.
std::optional<ExtenderArgs> read_extender_args_fast(
    std::string_view text, std::size_t max_nodes = std::numeric_limits<std::size_t>::max());

// ExtenderFilterResult: passed nodes in the form they came in (Nodes or NodeNames).
nlohmann::json filter_result_json(const ExtenderArgs& args, const FilterResult& r);
// The same answers as text, byte for byte what filter_result_json(...).dump() and priorities_json(...).dump()
// give, written without building the tree (5 000 nodes: a map entry per failed node, then its copy).
std::string filter_result_text(const ExtenderArgs& args, const FilterResult& r);
// The server's: `r` is what Scheduler::filter gave for args.node_names, so every name in it is one of those;
// when that list is all_plain() no name is checked again (the same text; a result with any other name would
// be written unescaped: use the form above for it).
struct NamesOfArgs {};
std::string filter_result_text(const ExtenderArgs& args, const FilterResult& r, NamesOfArgs);
std::string priorities_text(const std::vector<NodeScore>& scores);
// The same answer from the hosts and their scores apart (the same length, else std::invalid_argument;
// Scheduler::scores), as priorities_text of the NodeScores they make. The server's: the request's names,
// not copied, each written without a check when the list is all_plain().
std::string priorities_text(const NodeNameList& hosts, std::span<const int> scores);
// An ExtenderFilterResult carrying only an error.
nlohmann::json filter_error_json(const std::string& error);
// HostPriorityList: [{"Host": ..., "Score": ...}].
nlohmann::json priorities_json(const std::vector<NodeScore>& scores);

// ExtenderBindingArgs; the names are checked as in parse_extender_args.
struct BindingArgs {
  std::string pod_name;
  std::string pod_namespace;
  std::string pod_uid;
  std::string node;
};
Result<BindingArgs> parse_binding_args(const nlohmann::json& body);
// ExtenderBindingResult: {"Error": ""}.
nlohmann::json binding_result_json(const std::string& error);

// PUT /v1/nodes/{name}: {"resource": ..., "chips": [{"phy_id", "healthy", "in_use"}]}.
Result<Inventory> parse_inventory(const nlohmann::json& body);
// POST /v1/nodes/{name}/allocations: {"chips": [phy ids]}.
Result<std::vector<int>> parse_allocation(const nlohmann::json& body);
nlohmann::json reservations_json(const std::string& node, const std::vector<Reservation>& r);
nlohmann::ordered_json grant_json(const Grant& g);

// The Binding object kube-scheduler creates for a pod.
nlohmann::json binding_object(const BindingArgs& b);

}  // namespace ascend::scheduler
