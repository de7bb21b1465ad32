// ExtenderArgs read from the request's text with simdjson's On-Demand API: at 5 000 nodes a /filter body is
// about 60 KB of node names, and kube-scheduler sends the same names with every pod. The text is indexed once
// (simdjson's stage 1: its structure and UTF-8); the members are then walked without building a tree, the Pod
// (a few KB) is parsed by nlohmann as the long way parses it, and the NodeNames array is compared, as bytes,
// with the last arrays this thread read: the same bytes are the same names, checked then, and their list is
// shared. Another array's names become views into a copy of its text, each checked as a DNS-1123 subdomain
// (or found, in order, in the last list: kube-scheduler's /prioritize gets the names /filter passed).
// When the text holds one of those arrays' bytes where it was last, or just before the closing brace (where
// kube-scheduler's encoder puts NodeNames), the text is indexed with "[]" in its place; if that "[]" is then
// NodeNames' value, the array is that member's value in the text as sent (one JSON value put for another at
// a value's place changes nothing else), and its 60 KB are neither indexed nor walked. Otherwise the text is
// read as it is.
// Anything unusual is left to the long way (the caller's json::parse + parse_extender_args), which gives the
// exact answer or error: the fast way only ever returns what the long way would.
#include <simdjson.h>

#include <array>
#include <cstring>
#include <memory>

#include "ascend/common/json_depth.h"
#include "ascend/scheduler/wire.h"

namespace ascend::scheduler {

using nlohmann::json;
namespace od = simdjson::ondemand;

namespace {

// The fast way refuses a body nesting deeper than this (a Pod nests about ten deep; a member's value one
// less than the body); the long way then reads or refuses it (the server's limit is 128): a body too deep
// for the long way never gets an answer here.
constexpr int kMaxNesting = 64;
constexpr int kMaxMemberNesting = kMaxNesting - 1;

std::string_view trim_end(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// A member's value, unread: its raw text (a container's whole text, a scalar's token).
struct Member {
  od::json_type type{};
  std::string_view raw;
};

bool raw_of(od::value v, Member& m) {
  if (v.type().get(m.type) != simdjson::SUCCESS) return false;
  simdjson::error_code e = simdjson::SUCCESS;
  if (m.type == od::json_type::array) {
    od::array a;
    e = v.get_array().get(a);
    if (e == simdjson::SUCCESS) e = a.raw_json().get(m.raw);
  } else if (m.type == od::json_type::object) {
    od::object o;
    e = v.get_object().get(o);
    if (e == simdjson::SUCCESS) e = o.raw_json().get(m.raw);
  } else {
    m.raw = v.raw_json_token();
  }
  m.raw = trim_end(m.raw);
  return e == simdjson::SUCCESS;
}

// The NodeNames arrays this thread read last (two: kube-scheduler alternates every pod's /filter of all the
// nodes with its /prioritize of those that passed), the most recent first: each its text and its names.
struct Seen {
  std::shared_ptr<const std::string> text;
  NodeNameList names;
  std::size_t at = 0;  // where the text began in the last body that held it
};
struct SeenLists {
  std::array<Seen, 2> lists;
  Seen* find(std::string_view raw) {
    for (auto& s : lists) {
      if (s.text && *s.text == raw) return &s;
    }
    return nullptr;
  }
  void put(Seen s) {
    lists[1] = std::move(lists[0]);
    lists[0] = std::move(s);
  }
  void touch(const Seen* s) {
    if (s == &lists[1]) std::swap(lists[0], lists[1]);
  }
};

// The names of the array at `raw` (which `doc`, rewound, holds as the value of its top-level member number
// `at`), with a copy of the text: views into that copy, each a DNS-1123 subdomain. A name that is the next of
// `known` (the last list, in order) was checked when that was read. nullopt for anything but an array of
// plain strings (an escape, a number, ...) or more than `max_nodes`.
std::optional<Seen> read_names(od::document& doc, std::size_t at, std::string_view raw, std::size_t max_nodes,
                               const NodeNameList& known) {
  doc.rewind();
  od::object top;
  if (doc.get_object().get(top) != simdjson::SUCCESS) return std::nullopt;
  std::size_t i = 0;
  for (auto field : top) {
    od::value v;
    if (field.value().get(v) != simdjson::SUCCESS) return std::nullopt;
    if (i++ != at) continue;
    od::array list;
    if (v.get_array().get(list) != simdjson::SUCCESS) return std::nullopt;
    auto text = std::make_shared<const std::string>(raw);
    std::vector<std::string_view> views;
    std::size_t next_known = 0;
    for (auto e : list) {
      od::value item;
      if (e.get(item) != simdjson::SUCCESS) return std::nullopt;
      std::string_view token = trim_end(item.raw_json_token());
      if (views.size() == max_nodes || token.size() < 2 || token.front() != '"' || token.back() != '"')
        return std::nullopt;
      std::string_view name = token.substr(1, token.size() - 2);
      // Found in order in the last list, or checked (which also refuses an escape, a quote or a control
      // character: none is a DNS-1123 character).
      while (next_known < known.size() && known[next_known] != name) ++next_known;
      if (next_known < known.size()) {
        ++next_known;
      } else if (!is_dns1123_subdomain(name)) {
        return std::nullopt;
      }
      views.emplace_back(text->data() + (name.data() - raw.data()), name.size());
    }
    return Seen{text, NodeNameList(text, std::move(views))};
  }
  return std::nullopt;
}

}  // namespace

namespace {

// One parser and one padded copy of the text per thread: they keep their buffers between calls (the server
// answers on a pool of threads).
struct BodyReader {
  od::parser parser;
  std::unique_ptr<char[]> buffer;
  std::size_t buffer_size = 0;
  SeenLists seen;
};

// A list this thread read before whose bytes the text holds at `at`.
struct Splice {
  Seen* list = nullptr;
  std::size_t at = 0;
};

Splice find_splice(std::string_view text, SeenLists& seen) {
  const std::string_view body = trim_end(text);
  for (auto& s : seen.lists) {
    if (!s.text || s.text->size() <= 2) continue;
    const std::string_view list = *s.text;
    const std::size_t last = body.size() > list.size() && body.back() == '}' ? body.size() - 1 - list.size()
                                                                             : std::string_view::npos;
    for (std::size_t at : {s.at, last}) {
      if (at <= text.size() && list.size() <= text.size() - at && text.compare(at, list.size(), list) == 0)
        return {&s, at};
    }
  }
  return {};
}

// The arguments in `text`; with `splice`, read from the text with "[]" in place of the list's bytes, and
// nullopt unless that "[]" is NodeNames' value.
std::optional<ExtenderArgs> read_args(BodyReader& r, std::string_view text, std::size_t max_nodes,
                                      const Splice* splice) {
  constexpr std::string_view kEmpty = "[]";
  const std::size_t size =
      splice == nullptr ? text.size() : text.size() - splice->list->text->size() + kEmpty.size();
  const std::size_t need = size + simdjson::SIMDJSON_PADDING;
  if (r.buffer_size < need) {
    r.buffer_size = std::max(need, 2 * r.buffer_size);
    r.buffer = std::make_unique<char[]>(r.buffer_size);
  }
  char* const buffer = r.buffer.get();
  if (splice == nullptr) {
    std::memcpy(buffer, text.data(), text.size());
  } else {
    const std::size_t after = splice->at + splice->list->text->size();
    std::memcpy(buffer, text.data(), splice->at);
    std::memcpy(buffer + splice->at, kEmpty.data(), kEmpty.size());
    std::memcpy(buffer + splice->at + kEmpty.size(), text.data() + after, text.size() - after);
  }
  std::memset(buffer + size, 0, simdjson::SIMDJSON_PADDING);
  const std::string_view parsed(buffer, size);
  auto& parser = r.parser;
  auto& seen = r.seen;
  if (parser.max_depth() != std::size_t{kMaxNesting} &&
      parser.allocate(size, std::size_t{kMaxNesting}) != simdjson::SUCCESS)
    return std::nullopt;
  od::document doc;
  if (parser.iterate(buffer, size, r.buffer_size).get(doc) != simdjson::SUCCESS) return std::nullopt;
  // Every member, unread; which one find_field takes for a key is decided by find_field itself on the member
  // names, each mapped to the place of its last occurrence, as in the tree nlohmann builds.
  std::vector<Member> members;
  json names = json::object();
  {
    od::object top;
    if (doc.get_object().get(top) != simdjson::SUCCESS) return std::nullopt;
    for (auto field : top) {
      std::string_view key;
      od::value v;
      Member m;
      if (field.unescaped_key().get(key) != simdjson::SUCCESS || field.value().get(v) != simdjson::SUCCESS ||
          !raw_of(v, m))
        return std::nullopt;
      names[std::string(key)] = members.size();
      members.push_back(m);
    }
  }
  // After the last member: the object's '}' (the walk checked it is the next token) and nothing but white
  // space (stage 1 does not check that).
  if (members.empty()) return std::nullopt;
  {
    const Member& last = members.back();
    std::size_t end = static_cast<std::size_t>(last.raw.data() - buffer) + last.raw.size();
    std::string_view rest = parsed.substr(std::min(end, parsed.size()));
    std::size_t close = rest.find('}');
    if (close == std::string_view::npos || !trim_end(rest.substr(0, close)).empty() ||
        !trim_end(rest.substr(close + 1)).empty())
      return std::nullopt;
  }
  auto member = [&](std::string_view key) -> std::optional<std::size_t> {
    const json* at = find_field(names, key);
    if (at == nullptr) return std::nullopt;
    return at->get<std::size_t>();
  };
  auto pod = member("Pod");
  auto nodes = member("Nodes");
  auto node_names = member("NodeNames");
  if (!pod || !node_names || members[*node_names].type != od::json_type::array) return std::nullopt;
  if (nodes && members[*nodes].type != od::json_type::null) return std::nullopt;  // full Node objects
  // Every other member is JSON the long way accepts (stage 1 checked only the text's structure), or the
  // long way answers.
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (i == *node_names || i == *pod) continue;
    if (json_nests_deeper_than(members[i].raw, kMaxMemberNesting) || !json::accept(members[i].raw))
      return std::nullopt;
  }
  if (json_nests_deeper_than(members[*pod].raw, kMaxMemberNesting)) return std::nullopt;
  json pod_tree = json::parse(members[*pod].raw, nullptr, false);
  if (pod_tree.is_discarded() || pod_tree.is_null()) return std::nullopt;
  auto info = read_pod(pod_tree);
  if (!info.ok()) return std::nullopt;
  ExtenderArgs a;
  a.pod = std::move(*info);
  const std::string_view raw = members[*node_names].raw;
  const auto at = static_cast<std::size_t>(raw.data() - buffer);
  if (splice != nullptr) {
    if (at != splice->at || raw != kEmpty || splice->list->names.size() > max_nodes) return std::nullopt;
    a.node_names = splice->list->names;
    splice->list->at = at;
    seen.touch(splice->list);
    return a;
  }
  if (Seen* s = seen.find(raw); s != nullptr && s->names.size() <= max_nodes) {
    a.node_names = s->names;
    s->at = at;
    seen.touch(s);
    return a;
  }
  auto list = read_names(doc, *node_names, raw, max_nodes, seen.lists[0].names);
  if (!list) return std::nullopt;
  list->at = at;
  a.node_names = list->names;
  seen.put(std::move(*list));
  return a;
}

}  // namespace

std::optional<ExtenderArgs> read_extender_args_fast(std::string_view text, std::size_t max_nodes) {
  thread_local BodyReader reader;
  if (text.empty()) return std::nullopt;  // no text is no JSON
  if (const Splice splice = find_splice(text, reader.seen); splice.list != nullptr) {
    if (auto a = read_args(reader, text, max_nodes, &splice)) return a;
  }
  return read_args(reader, text, max_nodes, nullptr);
}

}  // namespace ascend::scheduler
