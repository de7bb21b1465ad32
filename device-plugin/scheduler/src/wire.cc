#include "ascend/scheduler/wire.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

namespace ascend::scheduler {

using nlohmann::json;

namespace {

Result<std::string> required_string(const json& obj, const char* key, const std::string& where) {
  const json* v = find_field(obj, key);
  if (v == nullptr || v->is_null()) return Error::invalid(where + "." + key + ": missing");
  if (!v->is_string()) return Error::invalid(where + "." + key + ": not a string");
  return v->get<std::string>();
}

Result<std::string> optional_string(const json& obj, const char* key, const std::string& where) {
  const json* v = find_field(obj, key);
  if (v == nullptr || v->is_null()) return std::string();
  if (!v->is_string()) return Error::invalid(where + "." + key + ": not a string");
  return v->get<std::string>();
}

Result<bool> optional_bool(const json& obj, const char* key, const std::string& where, bool dflt) {
  const json* v = find_field(obj, key);
  if (v == nullptr || v->is_null()) return dflt;
  if (!v->is_boolean()) return Error::invalid(where + "." + key + ": not true or false");
  return v->get<bool>();
}

// An optional whole number within [lo, hi]; -1 when absent (or null).
Result<long long> optional_count(const json& obj, const char* key, const std::string& where, long long lo,
                                 long long hi) {
  const json* v = find_field(obj, key);
  if (v == nullptr || v->is_null()) return -1;
  if (!v->is_number_integer() || v->get<long long>() < lo || v->get<long long>() > hi)
    return Error::invalid(fmt::format("{}.{}: not a whole number {}-{}", where, key, lo, hi));
  return v->get<long long>();
}

Error too_many(const std::string& field, std::size_t n, std::size_t max) {
  return Error::invalid(field + ": " + std::to_string(n) + " nodes, more than the " + std::to_string(max) +
                        " of the scheduler's cluster file");
}

Result<int> phy_id(const json& v, const std::string& where) {
  if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > 4095) {
    return Error::invalid(where + ": " + v.dump() + " is not a chip id");
  }
  return v.get<int>();
}

}  // namespace

Result<ExtenderArgs> parse_extender_args(const json& body, std::size_t max_nodes) {
  if (!body.is_object()) return Error::invalid("ExtenderArgs: not a JSON object");
  ExtenderArgs a;
  const json* pod = find_field(body, "Pod");
  if (pod == nullptr || pod->is_null()) return Error::invalid("ExtenderArgs.Pod: missing");
  ASCEND_ASSIGN(a.pod, read_pod(*pod), "ExtenderArgs");
  const json* nodes = find_field(body, "Nodes");
  const json* names = find_field(body, "NodeNames");
  if (nodes != nullptr && !nodes->is_null()) {
    if (!nodes->is_object()) return Error::invalid("ExtenderArgs.Nodes: not a NodeList object");
    const json* items = find_field(*nodes, "items");
    if (items != nullptr && !items->is_null() && !items->is_array()) {
      return Error::invalid("ExtenderArgs.Nodes.items: not an array");
    }
    a.full_nodes = true;
    if (items != nullptr && items->is_array()) {
      if (items->size() > max_nodes) return too_many("ExtenderArgs.Nodes.items", items->size(), max_nodes);
      for (std::size_t i = 0; i < items->size(); ++i) {
        std::string where = "ExtenderArgs.Nodes.items[" + std::to_string(i) + "]";
        const json& n = (*items)[i];
        const json* meta = find_field(n, "metadata");
        if (meta == nullptr || !meta->is_object()) return Error::invalid(where + ".metadata: missing");
        ASCEND_ASSIGN(std::string name, required_string(*meta, "name", where + ".metadata"), "");
        ASCEND_CHECK(check_dns1123_subdomain(name, where + ".metadata.name"), "");
        a.node_names.push_back(std::move(name));
        a.nodes.push_back(n);
      }
    }
  } else if (names != nullptr && !names->is_null()) {
    if (!names->is_array()) return Error::invalid("ExtenderArgs.NodeNames: not an array");
    if (names->size() > max_nodes) return too_many("ExtenderArgs.NodeNames", names->size(), max_nodes);
    for (std::size_t i = 0; i < names->size(); ++i) {
      std::string where = "ExtenderArgs.NodeNames[" + std::to_string(i) + "]";
      if (!(*names)[i].is_string()) return Error::invalid(where + ": not a string");
      const auto& name = (*names)[i].get_ref<const std::string&>();
      ASCEND_CHECK(check_dns1123_subdomain(name, where), "");
      a.node_names.push_back(name);
    }
  } else {
    return Error::invalid("ExtenderArgs: neither Nodes nor NodeNames is given");
  }
  return a;
}

json filter_result_json(const ExtenderArgs& args, const FilterResult& r) {
  json out = json::object();
  if (args.full_nodes) {
    std::set<std::string> pass(r.passed.begin(), r.passed.end());
    json items = json::array();
    for (std::size_t i = 0; i < args.nodes.size(); ++i) {
      if (pass.count(args.node_names[i]) != 0) items.push_back(args.nodes[i]);
    }
    out["Nodes"] = {{"metadata", json::object()}, {"items", std::move(items)}};
    out["NodeNames"] = nullptr;
  } else {
    out["Nodes"] = nullptr;
    out["NodeNames"] = r.passed;
  }
  out["FailedNodes"] = r.failed;
  out["FailedAndUnresolvableNodes"] = r.unresolvable;
  out["Error"] = "";
  return out;
}

namespace {

// A JSON string as nlohmann's dump() writes it: plain printable ASCII is copied; anything else goes through
// nlohmann's own serialiser (escapes, UTF-8 checks and all).
void append_string(std::string& out, const std::string& s) {
  bool plain =
      std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; });
  if (plain) {
    out += '"';
    out += s;
    out += '"';
  } else {
    out += json(s).dump();
  }
}

void append_map(std::string& out, const std::map<std::string, std::string>& m) {
  out += '{';
  bool first = true;
  const std::string* last_reason = nullptr;
  std::string last_text;
  for (const auto& [k, v] : m) {
    if (!first) out += ',';
    first = false;
    append_string(out, k);
    out += ':';
    // A job pod's failed nodes share one reason: its text is made once.
    if (last_reason == nullptr || *last_reason != v) {
      last_text.clear();
      append_string(last_text, v);
      last_reason = &v;
    }
    out += last_text;
  }
  out += '}';
}

}  // namespace

std::string filter_result_text(const ExtenderArgs& args, const FilterResult& r) {
  if (args.full_nodes) return filter_result_json(args, r).dump();
  // nlohmann's object keys are sorted: Error, FailedAndUnresolvableNodes, FailedNodes, NodeNames, Nodes.
  std::string out;
  std::size_t size = 128;
  for (const auto& n : r.passed) size += n.size() + 3;
  for (const auto* m : {&r.failed, &r.unresolvable}) {
    for (const auto& [k, v] : *m) size += k.size() + 4;
    if (!m->empty()) size += m->begin()->second.size() * m->size();
  }
  out.reserve(size);
  out += R"({"Error":"","FailedAndUnresolvableNodes":)";
  append_map(out, r.unresolvable);
  out += R"(,"FailedNodes":)";
  append_map(out, r.failed);
  out += R"(,"NodeNames":[)";
  for (std::size_t i = 0; i < r.passed.size(); ++i) {
    if (i > 0) out += ',';
    append_string(out, r.passed[i]);
  }
  out += R"(],"Nodes":null})";
  return out;
}

std::string priorities_text(const std::vector<NodeScore>& scores) {
  std::string out;
  out.reserve(scores.size() * 32 + 2);
  out += '[';
  for (std::size_t i = 0; i < scores.size(); ++i) {
    if (i > 0) out += ',';
    out += R"({"Host":)";
    append_string(out, scores[i].host);
    out += R"(,"Score":)";
    out += std::to_string(scores[i].score);
    out += '}';
  }
  out += ']';
  return out;
}

json filter_error_json(const std::string& error) {
  return {{"Nodes", nullptr},
          {"NodeNames", nullptr},
          {"FailedNodes", json::object()},
          {"FailedAndUnresolvableNodes", json::object()},
          {"Error", error}};
}

json priorities_json(const std::vector<NodeScore>& scores) {
  json out = json::array();
  for (const auto& s : scores) out.push_back({{"Host", s.host}, {"Score", s.score}});
  return out;
}

Result<BindingArgs> parse_binding_args(const json& body) {
  if (!body.is_object()) return Error::invalid("ExtenderBindingArgs: not a JSON object");
  BindingArgs b;
  ASCEND_ASSIGN(b.pod_name, required_string(body, "PodName", "ExtenderBindingArgs"), "");
  ASCEND_ASSIGN(b.pod_namespace, optional_string(body, "PodNamespace", "ExtenderBindingArgs"), "");
  if (b.pod_namespace.empty()) b.pod_namespace = "default";
  ASCEND_ASSIGN(b.pod_uid, optional_string(body, "PodUID", "ExtenderBindingArgs"), "");
  ASCEND_ASSIGN(b.node, required_string(body, "Node", "ExtenderBindingArgs"), "");
  if (b.pod_name.empty() || b.node.empty())
    return Error::invalid("ExtenderBindingArgs: PodName and Node must not be empty");
  // These become path segments of the API server URL (KubeBinder) as well as keys of the state.
  ASCEND_CHECK(check_dns1123_subdomain(b.pod_name, "ExtenderBindingArgs.PodName"), "");
  ASCEND_CHECK(check_dns1123_label(b.pod_namespace, "ExtenderBindingArgs.PodNamespace"), "");
  ASCEND_CHECK(check_uid(b.pod_uid, "ExtenderBindingArgs.PodUID"), "");
  ASCEND_CHECK(check_dns1123_subdomain(b.node, "ExtenderBindingArgs.Node"), "");
  return b;
}

json binding_result_json(const std::string& error) {
  return {{"Error", error}};
}

Result<Inventory> parse_inventory(const json& body) {
  if (!body.is_object()) return Error::invalid("inventory: not a JSON object");
  Inventory inv;
  ASCEND_ASSIGN(inv.resource, optional_string(body, "resource", "inventory"), "");
  if (inv.resource.size() > kDns1123SubdomainMax + 1 + kDns1123LabelMax) {
    return Error::invalid("inventory.resource: longer than a Kubernetes resource name can be");
  }
  const json* chips = find_field(body, "chips");
  if (chips == nullptr || !chips->is_array())
    return Error::invalid("inventory.chips: missing or not an array");
  for (std::size_t i = 0; i < chips->size(); ++i) {
    std::string where = "inventory.chips[" + std::to_string(i) + "]";
    const json& c = (*chips)[i];
    if (!c.is_object()) return Error::invalid(where + ": not an object");
    const json* id = find_field(c, "phy_id");
    if (id == nullptr) return Error::invalid(where + ".phy_id: missing");
    ChipReport r;
    ASCEND_ASSIGN(r.phy_id, phy_id(*id, where + ".phy_id"), "");
    ASCEND_ASSIGN(r.healthy, optional_bool(c, "healthy", where, true), "");
    ASCEND_ASSIGN(r.in_use, optional_bool(c, "in_use", where, false), "");
    // Telemetry for the dashboard (optional): AICore use in percent, on-chip memory in MB (at most 1 TiB).
    ASCEND_ASSIGN(long long pct, optional_count(c, "aicore_pct", where, 0, 100), "");
    r.aicore_pct = static_cast<int>(pct);
    ASCEND_ASSIGN(r.hbm_used_mb, optional_count(c, "hbm_used_mb", where, 0, 1LL << 20), "");
    ASCEND_ASSIGN(r.hbm_total_mb, optional_count(c, "hbm_total_mb", where, 0, 1LL << 20), "");
    if (r.hbm_used_mb > r.hbm_total_mb && r.hbm_total_mb >= 0)
      return Error::invalid(where + ".hbm_used_mb: more than hbm_total_mb");
    inv.chips.push_back(r);
  }
  return inv;
}

Result<std::vector<int>> parse_allocation(const json& body) {
  if (!body.is_object()) return Error::invalid("allocation: not a JSON object");
  const json* chips = find_field(body, "chips");
  if (chips == nullptr || !chips->is_array() || chips->empty()) {
    return Error::invalid("allocation.chips: missing, empty or not an array");
  }
  std::vector<int> out;
  std::set<int> seen;
  for (std::size_t i = 0; i < chips->size(); ++i) {
    ASCEND_ASSIGN(int p, phy_id((*chips)[i], "allocation.chips[" + std::to_string(i) + "]"), "");
    if (!seen.insert(p).second)
      return Error::invalid("allocation.chips: chip " + std::to_string(p) + " given twice");
    out.push_back(p);
  }
  return out;
}

json reservations_json(const std::string& node, const std::vector<Reservation>& rs) {
  json list = json::array();
  for (const auto& r : rs) {
    list.push_back({{"namespace", r.ns}, {"pod", r.pod}, {"job", r.job}, {"chips", r.chips}});
  }
  return {{"node", node}, {"reservations", std::move(list)}};
}

nlohmann::ordered_json grant_json(const Grant& g) {
  nlohmann::ordered_json out = {{"namespace", g.ns}, {"pod", g.pod}, {"job", g.job}, {"env", g.env}};
  if (g.ranktable) {
    out["ranktable_path"] = kRankTablePath;
    out["ranktable"] = *g.ranktable;
  }
  return out;
}

json binding_object(const BindingArgs& b) {
  json meta = {{"name", b.pod_name}, {"namespace", b.pod_namespace}};
  if (!b.pod_uid.empty()) meta["uid"] = b.pod_uid;
  return {{"apiVersion", "v1"},
          {"kind", "Binding"},
          {"metadata", std::move(meta)},
          {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", b.node}}}};
}

}  // namespace ascend::scheduler
