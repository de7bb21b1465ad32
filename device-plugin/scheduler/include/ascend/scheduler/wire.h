// The JSON of the extender protocol (k8s.io/kube-scheduler/extender/v1: Go field names as keys, matched in
// any letter case on input, as Go's decoder does) and of the device plugins' calls, converted in one place
// each way. Pure functions; thread-safe. Every parse failure is an EINVAL naming the field.
#pragma once

#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ascend/common/error.h"
#include "ascend/scheduler/extender.h"
#include "ascend/scheduler/pod.h"

namespace ascend::scheduler {

// ExtenderArgs: {"Pod": {...}, "Nodes": {"items": [...]}} or {"Pod": ..., "NodeNames": [...]}. Every name is
// checked against Kubernetes' limits (pod.h); more than `max_nodes` nodes (the cluster file's count: a
// longer list cannot be real) is refused before any is read.
struct ExtenderArgs {
  PodInfo pod;
  std::vector<std::string> node_names;
  bool full_nodes = false;            // the caller sent Nodes (full objects), not NodeNames
  std::vector<nlohmann::json> nodes;  // the Node objects, in order, when full_nodes
};
Result<ExtenderArgs> parse_extender_args(const nlohmann::json& body,
                                         std::size_t max_nodes = std::numeric_limits<std::size_t>::max());

// The same ExtenderArgs straight from the request's text (extender_read.cc: simdjson, no tree of the node
// names): for a body that parses and reads without error, exactly what parse_extender_args of
// json::parse(text) gives; nullopt for anything else (invalid JSON, any error, full Node objects, a Pod with
// a fractional number, nesting deeper than 64), which the caller then reads the long way for its exact
// answer or error.
std::optional<ExtenderArgs> read_extender_args_fast(
    std::string_view text, std::size_t max_nodes = std::numeric_limits<std::size_t>::max());

// ExtenderFilterResult: passed nodes in the form they came in (Nodes or NodeNames).
nlohmann::json filter_result_json(const ExtenderArgs& args, const FilterResult& r);
// The same answers as text, byte for byte what filter_result_json(...).dump() and priorities_json(...).dump()
// give, written without building the tree (5 000 nodes: a map entry per failed node, then its copy).
std::string filter_result_text(const ExtenderArgs& args, const FilterResult& r);
std::string priorities_text(const std::vector<NodeScore>& scores);
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
