#include "ascend/scheduler/wire.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>

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

NodeNameList::NodeNameList(std::vector<std::string> names) {
  auto s = std::make_shared<Store>();
  s->owned = std::move(names);
  s->views.assign(s->owned.begin(), s->owned.end());
  store_ = std::move(s);
}

NodeNameList::NodeNameList(std::shared_ptr<const std::string> text, std::vector<std::string_view> views) {
  auto s = std::make_shared<Store>();
  s->text = std::move(text);
  s->views = std::move(views);
  store_ = std::move(s);
}

bool NodeNameList::operator==(const NodeNameList& o) const {
  if (store_ == o.store_) return true;
  return std::equal(begin(), end(), o.begin(), o.end());
}

bool NodeNameList::operator==(const std::vector<std::string>& o) const {
  return std::equal(begin(), end(), o.begin(), o.end());
}

Result<ExtenderArgs> parse_extender_args(const json& body, std::size_t max_nodes) {
  if (!body.is_object()) return Error::invalid("ExtenderArgs: not a JSON object");
  ExtenderArgs a;
  std::vector<std::string> node_names;
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
        node_names.push_back(std::move(name));
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
      node_names.push_back(name);
    }
  } else {
    return Error::invalid("ExtenderArgs: neither Nodes nor NodeNames is given");
  }
  a.node_names = std::move(node_names);
  return a;
}

json filter_result_json(const ExtenderArgs& args, const FilterResult& r) {
  json out = json::object();
  if (args.full_nodes) {
    std::set<std::string> pass(r.passed.begin(), r.passed.end());
    json items = json::array();
    for (std::size_t i = 0; i < args.nodes.size(); ++i) {
      if (pass.count(std::string(args.node_names[i])) != 0) items.push_back(args.nodes[i]);
    }
    out["Nodes"] = {{"metadata", json::object()}, {"items", std::move(items)}};
    out["NodeNames"] = nullptr;
  } else {
    out["Nodes"] = nullptr;
    out["NodeNames"] = r.passed;
  }
  auto map_of = [](const NodeReasons& m) {
    json o = json::object();
    for (const auto& [node, why] : m) o[std::string(node)] = why;
    return o;
  };
  out["FailedNodes"] = map_of(r.failed);
  out["FailedAndUnresolvableNodes"] = map_of(r.unresolvable);
  out["Error"] = "";
  return out;
}

namespace {

// Printable ASCII without '"' or '\\': what nlohmann writes as it is. Eight bytes at a time (a node name
// is about ten): the high bit of each byte of the answer is set where the byte is 0x80 or more, under 0x20,
// or equal to 0x7f, '"' or '\\'.
constexpr std::uint64_t kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
constexpr std::uint64_t zero_bytes(std::uint64_t v) {
  return (v - kOnes) & ~v & kHigh;
}
constexpr std::uint64_t unplain_bytes(std::uint64_t w) {
  return (w & kHigh) | ((w - 0x20 * kOnes) & ~w & kHigh) | zero_bytes(w ^ (0x7f * kOnes)) |
         zero_bytes(w ^ (0x22 * kOnes)) | zero_bytes(w ^ (0x5c * kOnes));
}
inline std::uint64_t load8(const char* p) {
  std::uint64_t w = 0;
  std::memcpy(&w, p, 8);
  return w;
}
inline bool plain(std::string_view s) {
  std::size_t n = s.size();
  if (n < 8) {
    for (char ch : s) {
      auto c = static_cast<unsigned char>(ch);
      if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') return false;
    }
    return true;
  }
  std::uint64_t bad = unplain_bytes(load8(s.data() + n - 8));  // the last bytes, overlapping the words before
  for (std::size_t i = 0; i + 8 <= n; i += 8) bad |= unplain_bytes(load8(s.data() + i));
  return bad == 0;
}

// A JSON string as nlohmann's dump() writes it: plain printable ASCII is copied; anything else goes through
// nlohmann's own serialiser (escapes, UTF-8 checks and all).
std::string quoted(const std::string& s) {
  if (!plain(s)) return json(s).dump();
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  out += s;
  out += '"';
  return out;
}

// An answer's text written straight into its buffer: at 5 000 nodes, tens of thousands of small pieces,
// each a copy and a bounds check (std::string's append is a call each).
class Text {
 public:
  explicit Text(std::size_t guess) : out_(std::max<std::size_t>(guess, 64), '\0') {
    p_ = out_.data();
    end_ = p_ + out_.size();
  }
  void raw(std::string_view s) {
    room(s.size());
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  void raw(char c) {
    room(1);
    *p_++ = c;
  }
  // Inline at each use (at 5 000 names an answer, the call costs as much as the copy).
  // `checked`: `s` is known to be plain.
  [[gnu::always_inline]] void str(std::string_view s, bool checked = false) {
    assert(!checked || plain(s));
    if (!checked && !plain(s)) return raw(json(std::string(s)).dump());
    room(s.size() + 2);
    *p_++ = '"';
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
    *p_++ = '"';
  }
  void num(int v) {
    room(16);
    p_ = std::to_chars(p_, end_, v).ptr;
  }
  // `[,]"<key>":<value>`, the value already JSON: one check of the room for the whole member.
  void member(std::string_view key, std::string_view value, bool first, bool checked = false) {
    assert(!checked || plain(key));
    if (!checked && !plain(key)) {
      if (!first) raw(',');
      str(key);
      raw(':');
      return raw(value);
    }
    room(key.size() + value.size() + 4);
    if (!first) *p_++ = ',';
    *p_++ = '"';
    std::memcpy(p_, key.data(), key.size());
    p_ += key.size();
    *p_++ = '"';
    *p_++ = ':';
    std::memcpy(p_, value.data(), value.size());
    p_ += value.size();
  }
  // `{"Host":"<host>","Score":<score>}`: one check of the room for the whole item (5 000 of them in an
  // answer).
  // `checked`: the host is known to be plain (NodeNameList::all_plain).
  void score(std::string_view host, int v, bool checked = false) {
    if (!checked && !plain(host)) {
      raw(R"({"Host":)");
      str(host);
      raw(R"(,"Score":)");
      num(v);
      return raw('}');
    }
    static constexpr std::string_view kHost = R"({"Host":")", kScore = R"(","Score":)";
    room(kHost.size() + host.size() + kScore.size() + 16);
    std::memcpy(p_, kHost.data(), kHost.size());
    p_ += kHost.size();
    std::memcpy(p_, host.data(), host.size());
    p_ += host.size();
    std::memcpy(p_, kScore.data(), kScore.size());
    p_ += kScore.size();
    if (v >= 0 && v <= 9) {
      *p_++ = static_cast<char>('0' + v);
    } else {
      p_ = std::to_chars(p_, end_, v).ptr;
    }
    *p_++ = '}';
  }
  std::string take() && {
    out_.resize(static_cast<std::size_t>(p_ - out_.data()));
    return std::move(out_);
  }

 private:
  void room(std::size_t n) {
    if (static_cast<std::size_t>(end_ - p_) < n) grow(n);
  }
  void grow(std::size_t n) {
    auto used = static_cast<std::size_t>(p_ - out_.data());
    out_.resize(std::max(out_.size() * 2, used + n));
    p_ = out_.data() + used;
    end_ = out_.data() + out_.size();
  }
  std::string out_;
  char* p_ = nullptr;
  char* end_ = nullptr;
};

// `checked`: every node name is known to be plain.
void append_map(Text& out, const NodeReasons& m, bool checked) {
  out.raw('{');
  // Each reason's text is made once (a job pod's failed nodes share one).
  std::vector<std::string> texts(m.reason_count());
  std::vector<char> made(m.reason_count());
  bool first = true;
  m.for_each([&](std::string_view node, std::uint32_t r) {
    if (made[r] == 0) {
      texts[r] = quoted(m.text(r));
      made[r] = 1;
    }
    out.member(node, texts[r], first, checked);
    first = false;
  });
  out.raw('}');
}

// `checked`: every node name in `r` is known to be plain.
std::string filter_text(const ExtenderArgs& args, const FilterResult& r, bool checked) {
  if (args.full_nodes) return filter_result_json(args, r).dump();
  // nlohmann's object keys are sorted: Error, FailedAndUnresolvableNodes, FailedNodes, NodeNames, Nodes.
  // The size of the answer when nothing needs escaping: a buffer that need not grow (a job pod's answer is
  // 300 KB at 5 000 nodes).
  std::size_t guess = 128;
  for (const auto& n : r.passed) guess += n.size() + 3;
  for (const auto* m : {&r.failed, &r.unresolvable}) {
    m->for_each(
        [&](std::string_view node, std::uint32_t k) { guess += node.size() + m->text(k).size() + 6; });
  }
  Text out(guess);
  out.raw(R"({"Error":"","FailedAndUnresolvableNodes":)");
  append_map(out, r.unresolvable, checked);
  out.raw(R"(,"FailedNodes":)");
  append_map(out, r.failed, checked);
  out.raw(R"(,"NodeNames":[)");
  for (std::size_t i = 0; i < r.passed.size(); ++i) {
    if (i > 0) out.raw(',');
    out.str(r.passed[i], checked);
  }
  out.raw(R"(],"Nodes":null})");
  return std::move(out).take();
}

}  // namespace

std::string filter_result_text(const ExtenderArgs& args, const FilterResult& r) {
  return filter_text(args, r, false);
}

std::string filter_result_text(const ExtenderArgs& args, const FilterResult& r, NamesOfArgs) {
  return filter_text(args, r, args.node_names.all_plain());
}

namespace {

// HostPriorityList's text for `n` items, the i-th's host `host(i)` and score `score(i)`; `checked`: every
// host is known to be plain.
template <typename Host, typename Score>
std::string priorities_of(std::size_t n, Host host, Score score, bool checked) {
  std::size_t guess = 2;
  for (std::size_t i = 0; i < n; ++i) guess += host(i).size() + 24;
  Text out(guess);
  out.raw('[');
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) out.raw(',');
    out.score(host(i), score(i), checked);
  }
  out.raw(']');
  return std::move(out).take();
}

}  // namespace

bool NodeNameList::all_plain() const {
  if (!store_) return true;
  signed char known = store_->plain.load(std::memory_order_relaxed);
  if (known < 0) {  // two threads asking at once both work it out, to the same answer
    known = std::all_of(store_->views.begin(), store_->views.end(), plain) ? 1 : 0;
    store_->plain.store(known, std::memory_order_relaxed);
  }
  return known == 1;
}

std::string priorities_text(const std::vector<NodeScore>& scores) {
  return priorities_of(
      scores.size(), [&](std::size_t i) -> std::string_view { return scores[i].host; },
      [&](std::size_t i) { return scores[i].score; }, false);
}

std::string priorities_text(const NodeNameList& hosts, std::span<const int> scores) {
  if (hosts.size() != scores.size()) {
    throw std::invalid_argument("priorities_text: " + std::to_string(hosts.size()) + " hosts but " +
                                std::to_string(scores.size()) + " scores");
  }
  const std::span<const std::string_view> names = hosts.view();
  return priorities_of(
      names.size(), [&](std::size_t i) { return names[i]; }, [&](std::size_t i) { return scores[i]; },
      hosts.all_plain());
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
