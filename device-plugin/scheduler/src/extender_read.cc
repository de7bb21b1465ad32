// ExtenderArgs read from the request's text with simdjson: at 5 000 nodes a /filter body is about 60 KB of
// node names, and nlohmann's parser (a tree with one allocation per name) took most of a call. simdjson
// validates the whole text as nlohmann does; the names are copied straight out of its document; the Pod (a
// few KB) becomes the nlohmann tree read_pod reads. Anything unusual is left to the long way (the caller's
// json::parse + parse_extender_args), which gives the exact answer or error: the fast way only ever
// returns what the long way would.
#include <simdjson.h>

#include "ascend/scheduler/wire.h"

namespace ascend::scheduler {

using nlohmann::json;

namespace {

// The nlohmann tree of a simdjson element, as nlohmann's own parser builds it from the same text: a
// repeated key keeps its last value, a non-negative integer is unsigned, a negative one signed. False for a
// number with a fraction or an exponent: its text is not kept, and nlohmann could read it otherwise. ("-0"
// comes as the integer 0, which nlohmann keeps as a signed 0: the same count to every reader of a pod.)
bool to_nlohmann(simdjson::dom::element e, json& out) {
  switch (e.type()) {
    case simdjson::dom::element_type::OBJECT: {
      out = json::object();
      for (auto [key, value] : simdjson::dom::object(e)) {
        if (!to_nlohmann(value, out[std::string(key)])) return false;
      }
      return true;
    }
    case simdjson::dom::element_type::ARRAY: {
      out = json::array();
      for (auto value : simdjson::dom::array(e)) {
        out.push_back(nullptr);
        if (!to_nlohmann(value, out.back())) return false;
      }
      return true;
    }
    case simdjson::dom::element_type::STRING:
      out = std::string(std::string_view(e));
      return true;
    case simdjson::dom::element_type::INT64: {
      std::int64_t v = std::int64_t(e);
      if (v >= 0) {
        out = static_cast<std::uint64_t>(v);
      } else {
        out = v;
      }
      return true;
    }
    case simdjson::dom::element_type::UINT64:
      out = std::uint64_t(e);
      return true;
    case simdjson::dom::element_type::BOOL:
      out = bool(e);
      return true;
    case simdjson::dom::element_type::NULL_VALUE:
      out = nullptr;
      return true;
    case simdjson::dom::element_type::DOUBLE:
      return false;
  }
  return false;
}

}  // namespace

std::optional<ExtenderArgs> read_extender_args_fast(std::string_view text, std::size_t max_nodes) {
  // One parser per thread: it keeps its buffers between calls (the server answers on a pool of threads). It
  // refuses a body nesting deeper than kMaxNesting (a Pod nests about ten deep), which the long way then
  // reads or refuses (the server's limit is 128): so a body too deep for the long way never gets here, and
  // the server need not scan the text for it first.
  constexpr std::size_t kMaxNesting = 64;
  thread_local simdjson::dom::parser parser;
  if (parser.max_depth() != kMaxNesting && parser.allocate(text.size(), kMaxNesting) != simdjson::SUCCESS)
    return std::nullopt;
  // No text is no JSON; the check also keeps an empty view's null data() away from simdjson's copy (memcpy
  // from a null pointer is undefined even for zero bytes; UBSan found it).
  if (text.empty()) return std::nullopt;
  simdjson::dom::element doc;
  if (parser.parse(text.data(), text.size()).get(doc) != simdjson::SUCCESS) return std::nullopt;
  simdjson::dom::object top;
  if (doc.get(top) != simdjson::SUCCESS) return std::nullopt;
  // Which member find_field would take, decided by find_field itself on the member names: each name maps to
  // the place of its last occurrence, as in the tree nlohmann builds.
  std::vector<simdjson::dom::element> values;
  json names = json::object();
  for (auto [key, value] : top) {
    names[std::string(key)] = values.size();
    values.push_back(value);
  }
  auto member = [&](std::string_view key) -> std::optional<simdjson::dom::element> {
    const json* at = find_field(names, key);
    if (at == nullptr) return std::nullopt;
    return values[at->get<std::size_t>()];
  };
  auto pod = member("Pod");
  auto nodes = member("Nodes");
  auto node_names = member("NodeNames");
  if (!pod || pod->is_null()) return std::nullopt;
  if (nodes && !nodes->is_null()) return std::nullopt;  // full Node objects: kept as trees, the long way
  simdjson::dom::array list;
  if (!node_names || node_names->get(list) != simdjson::SUCCESS || list.size() > max_nodes)
    return std::nullopt;
  json pod_tree;
  if (!to_nlohmann(*pod, pod_tree)) return std::nullopt;
  auto info = read_pod(pod_tree);
  if (!info.ok()) return std::nullopt;
  ExtenderArgs a;
  a.pod = std::move(*info);
  a.node_names.reserve(list.size());
  for (auto e : list) {
    std::string_view name;
    if (e.get(name) != simdjson::SUCCESS) return std::nullopt;
    if (!is_dns1123_subdomain(name)) return std::nullopt;
    a.node_names.emplace_back(name);
  }
  return a;
}

}  // namespace ascend::scheduler
