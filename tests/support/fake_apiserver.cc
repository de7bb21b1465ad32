// The API server stand-in: cpp-httplib's Server on its own thread, one store of JSON objects under one mutex,
// one resourceVersion counter, a bounded history of events the watches read from. Requests are parsed into a
// Target (which collection, namespace, object and subresource), failures are thrown as ApiError (a Status
// object and its HTTP code) and answered in one place.
#include "fake_apiserver.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>

namespace ascend::testing {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kDefaultHistoryLimit = 10000;
constexpr std::size_t kMaxBodyBytes = 3 * 1024 * 1024;  // the real one's request limit
constexpr int kMaxJsonDepth = 100;
constexpr std::size_t kMaxRecordedRequests = 100000;
constexpr long kMaxTimeoutSeconds = 24 * 3600;
constexpr std::size_t kMaxNameLength = 253;
constexpr int kWorkerThreads = 32;  // every open watch holds one

// ---- Errors as the real one answers them --------------------------------------------------------

std::string reason_of(int code) {
  static const std::map<int, std::string> kReasons = {
      {400, "BadRequest"},      {401, "Unauthorized"},         {403, "Forbidden"},
      {404, "NotFound"},        {405, "MethodNotAllowed"},     {409, "Conflict"},
      {410, "Expired"},         {415, "UnsupportedMediaType"}, {422, "Invalid"},
      {429, "TooManyRequests"}, {500, "InternalError"},        {503, "ServiceUnavailable"},
      {504, "Timeout"}};
  auto it = kReasons.find(code);
  return it == kReasons.end() ? "Unknown" : it->second;
}

json status_object(int code, const std::string& reason, const std::string& message, json details = nullptr) {
  json s = {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
            {"status", "Failure"}, {"message", message}, {"reason", reason},
            {"code", code}};
  if (!details.is_null()) s["details"] = std::move(details);
  return s;
}

json success_status(int code) {
  return {{"kind", "Status"},
          {"apiVersion", "v1"},
          {"metadata", json::object()},
          {"status", "Success"},
          {"code", code}};
}

// A failed request: thrown where the failure is found, answered by serve().
struct ApiError {
  int code;
  json status;
};

ApiError api_error(int code, const std::string& message, json details = nullptr) {
  return {code, status_object(code, reason_of(code), message, std::move(details))};
}

ApiError api_error_reason(int code, const std::string& reason, const std::string& message) {
  return {code, status_object(code, reason, message)};
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// ---- Resources ----------------------------------------------------------------------------------

struct ResourceInfo {
  const char* resource;
  const char* kind;
  bool cluster_scoped;
};

constexpr ResourceInfo kResources[] = {
    {"pods", "Pod", false},
    {"nodes", "Node", true},
    {"namespaces", "Namespace", true},
    {"configmaps", "ConfigMap", false},
    {"events", "Event", false},
    {"leases", "Lease", false},
    {"services", "Service", false},
    {"endpoints", "Endpoints", false},
    {"secrets", "Secret", false},
    {"serviceaccounts", "ServiceAccount", false},
    {"persistentvolumes", "PersistentVolume", true},
    {"persistentvolumeclaims", "PersistentVolumeClaim", false},
    {"deployments", "Deployment", false},
    {"replicasets", "ReplicaSet", false},
    {"daemonsets", "DaemonSet", false},
    {"statefulsets", "StatefulSet", false},
    {"jobs", "Job", false},
    {"poddisruptionbudgets", "PodDisruptionBudget", false},
    {"priorityclasses", "PriorityClass", true},
    {"storageclasses", "StorageClass", true},
    {"customresourcedefinitions", "CustomResourceDefinition", true},
    {"clusterroles", "ClusterRole", true},
    {"clusterrolebindings", "ClusterRoleBinding", true},
    {"roles", "Role", false},
    {"rolebindings", "RoleBinding", false},
    {"resourceslices", "ResourceSlice", true},  // resource.k8s.io (DRA)
    {"deviceclasses", "DeviceClass", true},
    {"resourceclaims", "ResourceClaim", false},
    {"resourceclaimtemplates", "ResourceClaimTemplate", false},
};

const ResourceInfo* find_resource(const std::string& resource) {
  for (const auto& r : kResources) {
    if (resource == r.resource) return &r;
  }
  return nullptr;
}

// An unknown resource "widgets" is the namespaced kind "Widget".
std::string kind_of(const std::string& resource) {
  if (const auto* r = find_resource(resource)) return r->kind;
  std::string kind = resource;
  if (kind.size() > 1 && kind.back() == 's') kind.pop_back();
  if (!kind.empty()) kind[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(kind[0])));
  return kind;
}

bool is_cluster_scoped(const std::string& resource) {
  const auto* r = find_resource(resource);
  return r != nullptr && r->cluster_scoped;
}

// What a request path names: /api/v1/... or /apis/{group}/{version}/..., then namespaces/{ns}/{resource}
// [/{name}[/{subresource}]] or {resource}[/{name}[/{subresource}]].
struct Target {
  std::string api_version;  // "v1", "coordination.k8s.io/v1"
  std::string resource, ns, name, subresource;

  std::string group() const {
    auto slash = api_version.find('/');
    return slash == std::string::npos ? "" : api_version.substr(0, slash);
  }
  // "pods", "leases.coordination.k8s.io": as the real one names a resource in messages.
  std::string qualified() const { return group().empty() ? resource : resource + "." + group(); }
  std::string collection() const { return api_version + " " + resource; }
  bool namespaced() const { return !is_cluster_scoped(resource); }
  json details() const {
    json d = {{"name", name}, {"kind", resource}};
    if (!group().empty()) d["group"] = group();
    return d;
  }
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    auto end = s.find(sep, start);
    out.push_back(s.substr(start, end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

ApiError page_not_found() {
  return api_error(404, "the server could not find the requested resource");
}

Target parse_target(const std::string& path) {
  static const std::regex kApi(R"(^/api/(v1)/(.+)$)");
  static const std::regex kApis(R"(^/apis/([^/]+/[^/]+)/(.+)$)");
  std::smatch m;
  if (!std::regex_match(path, m, kApi) && !std::regex_match(path, m, kApis)) throw page_not_found();
  Target t;
  t.api_version = m[1];
  auto segs = split(m[2], '/');
  for (const auto& s : segs) {
    if (s.empty() || s.size() > kMaxNameLength) throw page_not_found();
  }
  std::size_t i = 0;
  if (segs[0] == "namespaces" && segs.size() >= 3) {
    t.ns = segs[1];
    i = 2;
  }
  if (segs.size() - i > 3) throw page_not_found();
  t.resource = segs[i];
  if (segs.size() > i + 1) t.name = segs[i + 1];
  if (segs.size() > i + 2) t.subresource = segs[i + 2];
  if (!t.ns.empty() && !t.namespaced()) throw page_not_found();
  return t;
}

// ---- Selectors ----------------------------------------------------------------------------------

struct Requirement {
  enum class Op { kEq, kNe, kExists, kNotExists };
  std::string key;
  Op op;
  std::string value;

  bool matches(const std::optional<std::string>& actual) const {
    switch (op) {
      case Op::kEq:
        return actual && *actual == value;
      case Op::kNe:
        return !actual || *actual != value;
      case Op::kExists:
        return actual.has_value();
      case Op::kNotExists:
        return !actual.has_value();
    }
    return false;
  }
};

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(' ');
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(' ') - b + 1);
}

// "k=v", "k==v", "k!=v"; `bare_ok`: also "k" and "!k" (labels).
Requirement parse_requirement(const std::string& term, bool bare_ok, const std::string& what) {
  using Op = Requirement::Op;
  auto bad = [&] { return api_error(400, "unable to parse " + what + " requirement: \"" + term + "\""); };
  if (term.find_first_of(" ()") != std::string::npos) throw bad();  // set-based: not supported here
  if (auto p = term.find("!="); p != std::string::npos)
    return {term.substr(0, p), Op::kNe, term.substr(p + 2)};
  if (auto p = term.find("=="); p != std::string::npos)
    return {term.substr(0, p), Op::kEq, term.substr(p + 2)};
  if (auto p = term.find('='); p != std::string::npos)
    return {term.substr(0, p), Op::kEq, term.substr(p + 1)};
  if (!bare_ok || term.empty()) throw bad();
  if (term[0] == '!') return {term.substr(1), Op::kNotExists, ""};
  return {term, Op::kExists, ""};
}

std::vector<Requirement> parse_selector(const std::string& text, bool bare_ok, const std::string& what) {
  std::vector<Requirement> out;
  if (trim(text).empty()) return out;
  for (const auto& raw : split(text, ',')) {
    auto r = parse_requirement(trim(raw), bare_ok, what);
    if (r.key.empty()) throw api_error(400, "unable to parse " + what + " requirement: \"" + raw + "\"");
    out.push_back(std::move(r));
  }
  return out;
}

const std::vector<std::string>& supported_fields() {
  // Pods' spec.nodeName and status.phase; ResourceSlices' spec.nodeName and spec.driver.
  static const std::vector<std::string> kFields = {"metadata.name", "metadata.namespace", "spec.nodeName",
                                                   "status.phase", "spec.driver"};
  return kFields;
}

std::optional<std::string> string_at(const json& obj, const json::json_pointer& ptr) {
  if (!obj.contains(ptr)) return std::nullopt;
  const auto& v = obj.at(ptr);
  if (!v.is_string()) return std::nullopt;
  return v.get<std::string>();
}

struct Selector {
  std::vector<Requirement> labels, fields;

  static Selector parse(const std::string& label_text, const std::string& field_text) {
    Selector s;
    s.labels = parse_selector(label_text, true, "label selector");
    s.fields = parse_selector(field_text, false, "field selector");
    for (const auto& f : s.fields) {
      const auto& ok = supported_fields();
      if (std::find(ok.begin(), ok.end(), f.key) == ok.end()) {
        throw api_error(400, "field label not supported: " + f.key);
      }
    }
    return s;
  }

  bool matches(const json& obj) const {
    for (const auto& r : labels) {
      if (!r.matches(string_at(obj, json::json_pointer("/metadata/labels/" + escape_pointer(r.key)))))
        return false;
    }
    for (const auto& r : fields) {
      // A field the object lacks compares as "", as the real field selectors do.
      std::string pointer = "/" + r.key;
      std::replace(pointer.begin(), pointer.end(), '.', '/');
      auto v = string_at(obj, json::json_pointer(pointer));
      if (!r.matches(v.value_or(""))) return false;
    }
    return true;
  }

  static std::string escape_pointer(const std::string& key) {
    std::string out;
    for (char c : key) {
      if (c == '~') {
        out += "~0";
      } else if (c == '/') {
        out += "~1";
      } else {
        out += c;
      }
    }
    return out;
  }
};

// ---- Request bodies -----------------------------------------------------------------------------

std::string media_type(const std::string& content_type) {
  return trim(content_type.substr(0, content_type.find(';')));
}

json parse_body(const std::string& body) {
  if (body.size() > kMaxBodyBytes)
    throw api_error_reason(413, "RequestEntityTooLarge", "the request body is too large");
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < body.size(); ++i) {  // nesting bounded before parsing (dump recurses)
    char c = body[i];
    if (in_string) {
      if (c == '\\') ++i;
      if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if ((c == '{' || c == '[') && ++depth > kMaxJsonDepth) {
      throw api_error(400, "json parse error: nested deeper than " + std::to_string(kMaxJsonDepth));
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  try {
    return json::parse(body);
  } catch (const json::parse_error& e) {
    throw api_error(400, std::string("couldn't get version/kind; json parse error: ") + e.what());
  }
}

json parse_object_body(const httplib::Request& req) {
  auto type = media_type(req.get_header_value("Content-Type"));
  if (!type.empty() && type != "application/json") {
    throw api_error(415,
                    "the body of the request was in an unknown format - accepted media types include: "
                    "application/json");
  }
  auto obj = parse_body(req.body);
  if (!obj.is_object()) throw api_error(400, "the body of the request is not a JSON object");
  return obj;
}

std::string query_of(const httplib::Request& req) {
  auto q = req.target.find('?');
  return q == std::string::npos ? "" : req.target.substr(q + 1);
}

bool param_true(const httplib::Request& req, const std::string& key) {
  auto v = req.get_param_value(key);
  return v == "true" || v == "1";
}

// ---- Metadata -----------------------------------------------------------------------------------

std::string now_rfc3339() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

json& meta(json& obj) {
  if (!obj["metadata"].is_object()) obj["metadata"] = json::object();
  return obj["metadata"];
}

std::string meta_string(const json& obj, const char* key) {
  return string_at(obj, json::json_pointer(std::string("/metadata/") + key)).value_or("");
}

// ---- Watches ------------------------------------------------------------------------------------

struct Event {
  std::uint64_t rv;
  std::string collection, ns;
  json object;
  std::string line;  // {"type","object"} and "\n"
};

std::string event_line(const std::string& type, const json& object) {
  return dump(json{{"type", type}, {"object", object}}) + "\n";
}

struct Watcher {
  enum class Fault { kNone, kCut, kTruncate };
  std::string collection, ns, kind, api_version;  // ns empty: every namespace
  Selector selector;
  std::uint64_t last_rv = 0;        // every event up to here was looked at
  std::deque<std::string> pending;  // the initial ADDED events, or the 410 ERROR
  bool end_after_pending = false;
  bool bookmarks = false;
  std::uint64_t bookmark_generation = 0;
  Clock::time_point next_bookmark = Clock::time_point::max();
  Clock::time_point deadline = Clock::time_point::max();
  Fault fault = Fault::kNone;
  int garbage = 0;
};

// What one turn of a watch's provider sends, collected under the lock and written outside it.
struct Delivery {
  std::vector<std::string> lines;
  std::string partial;  // sent after the lines, then the connection is closed
  bool close = false;   // the connection is closed without the stream's end
  bool end = false;     // the stream ends properly
};

}  // namespace

// ---- The server ---------------------------------------------------------------------------------

struct FakeApiServer::Impl {
  httplib::Server svr;
  std::thread thread;
  int port = -1;

  mutable std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::map<std::string, std::map<std::pair<std::string, std::string>, json>>
      store;  // collection -> (ns, name)
  std::uint64_t rv = 0;
  std::uint64_t floor = 0;  // every event after this one is in the history
  std::deque<Event> history;
  std::size_t history_limit = kDefaultHistoryLimit;
  std::set<std::shared_ptr<Watcher>> watchers;
  std::set<std::string> held;  // resources whose watches send nothing for now (hold_watches)
  bool held_back(const Watcher& w) const {
    return !held.empty() && held.count(w.collection.substr(w.collection.rfind(' ') + 1)) != 0;
  }
  std::chrono::milliseconds bookmark_every{0};
  std::uint64_t bookmark_generation = 0;
  std::string token;
  int fail_status = 0, fail_count = 0;
  bool partitionable_devices = true;  // the feature gate DRAPartitionableDevices
  std::set<std::string> unserved;     // group/versions turned off (set_group_served)
  std::deque<Request> requests;
  std::mt19937_64 rng{std::random_device{}()};

  void start();
  void stop();

  // HTTP.
  void serve(const httplib::Request& req, httplib::Response& res);
  std::optional<ApiError> admit(const httplib::Request& req);
  void route(const httplib::Request& req, httplib::Response& res, const Target& t);
  void start_watch(const httplib::Request& req, httplib::Response& res, const Target& t);
  bool pump(Watcher& w, httplib::DataSink& sink);
  void collect(Watcher& w, Delivery& d);
  void collect_events(Watcher& w, Delivery& d);
  void collect_faults(Watcher& w, Delivery& d);
  void collect_bookmark(Watcher& w, Delivery& d);
  std::string too_old_line(std::uint64_t from) const;
  json version_marker(const Watcher& w) const;
  bool has_work(const Watcher& w) const;
  Clock::time_point wake_time(const Watcher& w) const;

  // The store (callers hold mu).
  json* find(const Target& t);
  // ResourceSlices: the partitionable devices' fields dropped (gate off, not in use in `old`) or validated.
  void admit_slice(const Target& t, json& slice, const json* old) const;
  json get_object(const Target& t);
  json list_objects(const Target& t, const Selector& sel);
  json create_object(const Target& t, json obj);
  json write_object(const Target& t, json next, bool status_only);
  json patch_object(const Target& t, const std::string& content_type, const json& patch);
  json delete_object(const Target& t, const json& options);
  json bind_pod(const Target& t, const json& binding);
  json evict_pod(const Target& t, const json& eviction);
  void record_event(const std::string& type, const Target& t, const json& obj);
  std::string new_uid();
  std::string generated_name(const Target& t, const std::string& prefix);
  bool served(const std::string& group_version);
};

void FakeApiServer::Impl::start() {
  svr.new_task_queue = [] { return new httplib::ThreadPool(kWorkerThreads); };
  svr.set_payload_max_length(kMaxBodyBytes);
  svr.set_tcp_nodelay(true);      // as the real API server (Go sets TCP_NODELAY on every connection)
  svr.set_keep_alive_timeout(1);  // an idle kept-alive connection holds up stop() this long
  auto handler = [this](const httplib::Request& req, httplib::Response& res) { serve(req, res); };
  svr.Get(".*", handler);
  svr.Post(".*", handler);
  svr.Put(".*", handler);
  svr.Patch(".*", handler);
  svr.Delete(".*", handler);
  port = svr.bind_to_any_port("127.0.0.1");
  if (port < 0) throw std::runtime_error("fake API server: cannot listen on 127.0.0.1");
  thread = std::thread([this] { svr.listen_after_bind(); });
  // stop() does nothing before the server runs: wait for it.
  while (!svr.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void FakeApiServer::Impl::stop() {
  {
    std::lock_guard lock(mu);
    stopping = true;
  }
  cv.notify_all();
  svr.stop();
  if (thread.joinable()) thread.join();
}

void FakeApiServer::Impl::serve(const httplib::Request& req, httplib::Response& res) {
  try {
    if (auto refused = admit(req)) throw *refused;
    // Discovery of one group/version: what it serves (the resources this stand-in knows are not listed).
    static const std::regex kDiscovery(R"(^/apis/([^/]+/[^/]+)/?$)");
    std::smatch d;
    if (std::regex_match(req.path, d, kDiscovery)) {
      if (!served(d[1]) || req.method != "GET") throw page_not_found();
      res.status = 200;
      res.set_content(dump(json{{"kind", "APIResourceList"},
                                {"apiVersion", "v1"},
                                {"groupVersion", d[1].str()},
                                {"resources", json::array()}}),
                      "application/json");
      return;
    }
    Target t = parse_target(req.path);
    if (!served(t.api_version)) throw page_not_found();
    route(req, res, t);
  } catch (const json::exception& e) {  // a body of the wrong shape (a string where an object belongs)
    auto status = status_object(422, "Invalid", std::string("the object is invalid: ") + e.what());
    res.status = 422;
    res.set_content(dump(status), "application/json");
  } catch (const ApiError& e) {
    res.status = e.code;
    if (e.code == 429) res.set_header("Retry-After", "1");
    res.set_content(dump(e.status), "application/json");
  }
}

// Records the request, then answers an injected fault or a missing token.
std::optional<ApiError> FakeApiServer::Impl::admit(const httplib::Request& req) {
  std::lock_guard lock(mu);
  if (requests.size() >= kMaxRecordedRequests) requests.pop_front();
  requests.push_back({req.method, req.path, query_of(req), req.get_header_value("Content-Type"), req.body});
  if (fail_count > 0) {
    --fail_count;
    return api_error(fail_status, "injected fault: HTTP " + std::to_string(fail_status));
  }
  if (!token.empty() && req.get_header_value("Authorization") != "Bearer " + token) {
    return api_error(401, "Unauthorized");
  }
  return std::nullopt;
}

void FakeApiServer::Impl::route(const httplib::Request& req, httplib::Response& res, const Target& t) {
  auto answer = [&](int code, const json& body) {
    res.status = code;
    res.set_content(dump(body), "application/json");
  };
  const auto& m = req.method;
  bool plain = t.subresource.empty() || t.subresource == "status";
  if (t.name.empty()) {
    if (!t.subresource.empty()) throw page_not_found();
    if (m == "GET" && param_true(req, "watch")) return start_watch(req, res, t);
    if (m == "GET") {
      auto sel = Selector::parse(req.get_param_value("labelSelector"), req.get_param_value("fieldSelector"));
      std::lock_guard lock(mu);
      return answer(200, list_objects(t, sel));
    }
    if (m == "POST") {
      auto obj = parse_object_body(req);
      std::lock_guard lock(mu);
      return answer(201, create_object(t, std::move(obj)));
    }
    throw api_error(405, "the server does not allow this method on the requested resource");
  }
  if (t.namespaced() && t.ns.empty()) throw page_not_found();
  if (m == "GET" && plain) {
    std::lock_guard lock(mu);
    return answer(200, get_object(t));
  }
  if (m == "PUT" && plain) {
    auto obj = parse_object_body(req);
    std::lock_guard lock(mu);
    return answer(200, write_object(t, std::move(obj), t.subresource == "status"));
  }
  if (m == "PATCH" && plain) {
    auto patch = parse_body(req.body);
    std::lock_guard lock(mu);
    return answer(200, patch_object(t, req.get_header_value("Content-Type"), patch));
  }
  if (m == "DELETE" && t.subresource.empty()) {
    auto options = req.body.empty() ? json::object() : parse_object_body(req);
    std::lock_guard lock(mu);
    return answer(200, delete_object(t, options));
  }
  if (m == "POST" && t.resource == "pods" && (t.subresource == "binding" || t.subresource == "eviction")) {
    auto body = parse_object_body(req);
    std::lock_guard lock(mu);
    return answer(201, t.subresource == "binding" ? bind_pod(t, body) : evict_pod(t, body));
  }
  if (!plain && t.subresource != "binding" && t.subresource != "eviction") throw page_not_found();
  throw api_error(405, "the server does not allow this method on the requested resource");
}

// ---- The store ----------------------------------------------------------------------------------

json* FakeApiServer::Impl::find(const Target& t) {
  auto c = store.find(t.collection());
  if (c == store.end()) return nullptr;
  auto o = c->second.find({t.ns, t.name});
  return o == c->second.end() ? nullptr : &o->second;
}

json FakeApiServer::Impl::get_object(const Target& t) {
  if (auto* obj = find(t)) return *obj;
  throw api_error(404, t.qualified() + " \"" + t.name + "\" not found", t.details());
}

json FakeApiServer::Impl::list_objects(const Target& t, const Selector& sel) {
  json items = json::array();
  if (auto c = store.find(t.collection()); c != store.end()) {
    for (const auto& [key, obj] : c->second) {
      if (!t.ns.empty() && key.first != t.ns) continue;
      if (!sel.matches(obj)) continue;
      json item = obj;
      item.erase("kind");  // the real List's items carry neither
      item.erase("apiVersion");
      items.push_back(std::move(item));
    }
  }
  return {{"kind", kind_of(t.resource) + "List"},
          {"apiVersion", t.api_version},
          {"metadata", {{"resourceVersion", std::to_string(rv)}}},
          {"items", std::move(items)}};
}

void FakeApiServer::Impl::record_event(const std::string& type, const Target& t, const json& obj) {
  history.push_back({rv, t.collection(), t.ns, obj, event_line(type, obj)});
  while (history.size() > history_limit) {
    floor = history.front().rv;
    history.pop_front();
  }
  cv.notify_all();
}

std::string FakeApiServer::Impl::new_uid() {
  std::uniform_int_distribution<int> hex(0, 15);
  std::string uid = "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx";
  for (char& c : uid) {
    if (c == 'x') c = "0123456789abcdef"[hex(rng)];
    if (c == 'y') c = "89ab"[hex(rng) % 4];
  }
  return uid;
}

// A DNS-1123 subdomain (apimachinery's IsDNS1123Subdomain): at most 253 of [a-z0-9.-], alphanumeric at
// both ends, each dot-separated label non-empty and alphanumeric at its ends. Names of most kinds must be
// one.
static bool dns_subdomain(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t end = s.find('.', start);
    if (end == std::string::npos) end = s.size();
    if (end == start || !alnum(s[start]) || !alnum(s[end - 1])) return false;
    for (std::size_t i = start; i < end; ++i) {
      if (!alnum(s[i]) && s[i] != '-') return false;
    }
    start = end + 1;
  }
  return true;
}

std::string FakeApiServer::Impl::generated_name(const Target& t, const std::string& prefix) {
  static const char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  std::uniform_int_distribution<std::size_t> pick(0, sizeof kAlphabet - 2);
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string name = prefix;
    for (int i = 0; i < 5; ++i) name += kAlphabet[pick(rng)];
    Target probe = t;
    probe.name = name;
    if (find(probe) == nullptr) return name;
  }
  throw api_error_reason(409, "AlreadyExists", "no free name for generateName " + prefix);
}

json FakeApiServer::Impl::create_object(const Target& t, json obj) {
  if (t.namespaced() && t.ns.empty()) throw page_not_found();
  auto& m = meta(obj);
  auto body_ns = meta_string(obj, "namespace");
  if (!body_ns.empty() && body_ns != t.ns) {
    throw api_error(400,
                    "the namespace of the provided object does not match the namespace sent on the request");
  }
  Target target = t;
  target.name = meta_string(obj, "name");
  auto generate = meta_string(obj, "generateName");
  // As apimachinery's ValidateObjectMeta: the name, and the generateName prefix (a trailing '-' allowed),
  // are DNS-1123 subdomains; the real API server refuses "p0." as a prefix (found by the kube tests).
  if (!generate.empty() &&
      !dns_subdomain(generate.back() == '-' ? generate.substr(0, generate.size() - 1) + "a" : generate)) {
    throw api_error(422, kind_of(t.resource) + " \"" + generate +
                             "\" is invalid: metadata.generateName: Invalid value: \"" + generate +
                             "\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                             "characters, '-' or '.', and must start and end with an alphanumeric character");
  }
  if (target.name.empty() && !generate.empty()) target.name = generated_name(t, generate);
  if (target.name.empty()) {
    throw api_error(422, kind_of(t.resource) +
                             " \"\" is invalid: metadata.name: Required value: name or "
                             "generateName is required");
  }
  if (target.name.size() > kMaxNameLength || target.name.find('/') != std::string::npos ||
      !dns_subdomain(target.name)) {
    throw api_error(422, kind_of(t.resource) + " \"" + target.name + "\" is invalid: metadata.name");
  }
  if (find(target) != nullptr) {
    throw api_error_reason(409, "AlreadyExists",
                           target.qualified() + " \"" + target.name + "\" already exists");
  }
  m["name"] = target.name;
  admit_slice(t, obj, nullptr);
  if (!obj.contains("kind")) obj["kind"] = kind_of(t.resource);
  if (!obj.contains("apiVersion")) obj["apiVersion"] = t.api_version;
  m["name"] = target.name;
  if (t.namespaced()) m["namespace"] = t.ns;
  m["uid"] = new_uid();
  m["creationTimestamp"] = now_rfc3339();
  if (t.resource == "pods" && t.api_version == "v1" && !obj.contains(json::json_pointer("/status/phase"))) {
    obj["status"]["phase"] = "Pending";  // the real one's default for a new pod
  }
  m["resourceVersion"] = std::to_string(++rv);
  store[t.collection()][{target.ns, target.name}] = obj;
  record_event("ADDED", target, obj);
  return obj;
}

namespace {

bool uses_partitionable_devices(const json& slice) {
  const json spec = slice.is_object() ? slice.value("spec", json::object()) : json::object();
  if (!spec.is_object()) return false;
  if (spec.contains("sharedCounters") || spec.contains("perDeviceNodeSelection")) return true;
  for (const auto& d : spec.value("devices", json::array())) {
    if (!d.is_object()) continue;
    for (const char* f : {"consumesCounters", "nodeName", "nodeSelector", "allNodes"})
      if (d.contains(f)) return true;
  }
  return false;
}

ApiError invalid_slice(const std::string& name, const std::string& field, const std::string& why) {
  return api_error(422, "ResourceSlice.resource.k8s.io \"" + name + "\" is invalid: " + field + ": " + why);
}

}  // namespace

void FakeApiServer::Impl::admit_slice(const Target& t, json& slice, const json* old) const {
  if (t.resource != "resourceslices" || !slice.is_object() || !slice.contains("spec") ||
      !slice["spec"].is_object())
    return;
  json& spec = slice["spec"];
  if (!partitionable_devices && (old == nullptr || !uses_partitionable_devices(*old))) {
    spec.erase("sharedCounters");
    spec.erase("perDeviceNodeSelection");
    if (spec.contains("devices") && spec["devices"].is_array()) {
      for (auto& d : spec["devices"]) {
        if (!d.is_object()) continue;
        for (const char* f : {"consumesCounters", "nodeName", "nodeSelector", "allNodes"}) d.erase(f);
      }
    }
    return;
  }
  const std::string name = meta_string(slice, "name");
  std::map<std::string, std::set<std::string>> sets;
  std::size_t shared = 0;
  for (const auto& cs : spec.value("sharedCounters", json::array())) {
    const std::string set = cs.is_object() ? cs.value("name", "") : "";
    const json counters = cs.is_object() ? cs.value("counters", json::object()) : json();
    if (set.empty() || !counters.is_object() || counters.empty())
      throw invalid_slice(name, "spec.sharedCounters", "a counter set needs a name and counters");
    if (sets.count(set) != 0) throw invalid_slice(name, "spec.sharedCounters", "Duplicate value: " + set);
    for (const auto& [counter, value] : counters.items()) sets[set].insert(counter);
    shared += counters.size();
  }
  if (shared > 32)
    throw invalid_slice(name, "spec.sharedCounters",
                        "Invalid value: " + std::to_string(shared) +
                            ": the total number of shared counters must not exceed 32");
  const json devices = spec.value("devices", json::array());
  if (devices.size() > 128)
    throw invalid_slice(name, "spec.devices", "Too many: must have at most 128 items");
  std::size_t consumed = 0;
  for (const auto& d : devices) {
    for (const auto& c : d.is_object() ? d.value("consumesCounters", json::array()) : json::array()) {
      const std::string set = c.is_object() ? c.value("counterSet", "") : "";
      const json counters = c.is_object() ? c.value("counters", json::object()) : json();
      auto it = sets.find(set);
      if (it == sets.end())
        throw invalid_slice(
            name, "spec.devices.consumesCounters.counterSet",
            "Invalid value: \"" + set +
                "\": must reference a counterSet defined in the ResourceSlice sharedCounters");
      for (const auto& [counter, value] : counters.items()) {
        if (it->second.count(counter) == 0)
          throw invalid_slice(name, "spec.devices.consumesCounters.counters",
                              "Invalid value: \"" + counter +
                                  "\": must reference a counter defined in the ResourceSlice sharedCounters");
      }
      consumed += counters.size();
    }
  }
  if (consumed > 1024)
    throw invalid_slice(name, "spec.devices",
                        "Invalid value: " + std::to_string(consumed) +
                            ": the total number of counters in devices must not exceed 1024");
}

ApiError conflict(const Target& t) {
  return api_error(409,
                   "Operation cannot be fulfilled on " + t.qualified() + " \"" + t.name +
                       "\": the object has been modified; please apply your changes to the latest version "
                       "and try again",
                   t.details());
}

// Replaces the object with `next` (only its status when `status_only`): a resourceVersion in `next` is a
// precondition; uid, creationTimestamp, name and namespace are kept. A write that changes nothing is no
// write.
json FakeApiServer::Impl::write_object(const Target& t, json next, bool status_only) {
  json* cur = find(t);
  if (cur == nullptr) throw api_error(404, t.qualified() + " \"" + t.name + "\" not found", t.details());
  if (!next.is_object()) throw api_error(422, "the object is not a JSON object");
  auto name = meta_string(next, "name");
  if (!name.empty() && name != t.name) {
    throw api_error(
        400, "the name of the object (" + name + ") does not match the name on the URL (" + t.name + ")");
  }
  auto want_rv = meta_string(next, "resourceVersion");
  if (!want_rv.empty() && want_rv != meta_string(*cur, "resourceVersion")) throw conflict(t);
  if (status_only) {
    json whole = *cur;
    whole["status"] = next.contains("status") ? next["status"] : json::object();
    next = std::move(whole);
  }
  auto& m = meta(next);
  for (const char* keep : {"uid", "creationTimestamp", "name", "namespace", "resourceVersion"}) {
    if ((*cur)["metadata"].contains(keep)) {
      m[keep] = (*cur)["metadata"][keep];
    } else {
      m.erase(keep);
    }
  }
  if (!next.contains("kind")) next["kind"] = (*cur)["kind"];
  if (!next.contains("apiVersion")) next["apiVersion"] = (*cur)["apiVersion"];
  admit_slice(t, next, cur);
  if (next == *cur) return next;
  m["resourceVersion"] = std::to_string(++rv);
  *cur = next;
  record_event("MODIFIED", t, next);
  return next;
}

json FakeApiServer::Impl::patch_object(const Target& t, const std::string& content_type, const json& patch) {
  json* cur = find(t);
  if (cur == nullptr) throw api_error(404, t.qualified() + " \"" + t.name + "\" not found", t.details());
  auto type = media_type(content_type);
  json next = *cur;
  if (type == "application/merge-patch+json") {
    next.merge_patch(patch);
  } else if (type == "application/json-patch+json") {
    try {
      next = cur->patch(patch);
    } catch (const json::exception& e) {
      throw api_error(422, std::string("the JSON patch cannot be applied: ") + e.what());
    }
  } else {
    throw api_error(415,
                    "the body of the request was in an unknown format - accepted media types include: "
                    "application/json-patch+json, application/merge-patch+json");
  }
  // The patch's own resourceVersion, if any, is the precondition (merged in, it replaced the stored one).
  if (!next.is_object()) throw api_error(422, "the patched object is not a JSON object");
  if (meta(next).value("resourceVersion", json()) == (*cur)["metadata"]["resourceVersion"]) {
    meta(next).erase("resourceVersion");
  } else if (!meta_string(next, "resourceVersion").empty()) {
    throw conflict(t);
  }
  return write_object(t, std::move(next), t.subresource == "status");
}

json FakeApiServer::Impl::delete_object(const Target& t, const json& options) {
  json* cur = find(t);
  if (cur == nullptr) throw api_error(404, t.qualified() + " \"" + t.name + "\" not found", t.details());
  for (const auto& [field, what] :
       {std::pair{"uid", "UID"}, std::pair{"resourceVersion", "ResourceVersion"}}) {
    auto want = string_at(options, json::json_pointer(std::string("/preconditions/") + field));
    auto have = meta_string(*cur, field);
    if (want && *want != have) {
      throw api_error(409,
                      "Operation cannot be fulfilled on " + t.qualified() + " \"" + t.name +
                          "\": Precondition failed: " + what + " in precondition: " + *want + ", " + what +
                          " in object meta: " + have,
                      t.details());
    }
  }
  json gone = std::move(*cur);
  store[t.collection()].erase({t.ns, t.name});
  meta(gone)["resourceVersion"] = std::to_string(++rv);
  record_event("DELETED", t, gone);
  return gone;
}

json FakeApiServer::Impl::bind_pod(const Target& t, const json& binding) {
  Target pod = t;
  pod.subresource.clear();
  json* cur = find(pod);
  if (cur == nullptr)
    throw api_error(404, pod.qualified() + " \"" + pod.name + "\" not found", pod.details());
  auto node = string_at(binding, json::json_pointer("/target/name")).value_or("");
  if (node.empty())
    throw api_error(422, "Binding \"" + t.name + "\" is invalid: target.name: Required value");
  auto named = meta_string(binding, "name");
  if (!named.empty() && named != t.name) {
    throw api_error(400, "the name of the Binding (" + named + ") does not match the pod (" + t.name + ")");
  }
  auto cannot = [&](const std::string& why) {
    return api_error(409, "Operation cannot be fulfilled on pods/binding \"" + t.name + "\": " + why);
  };
  auto uid = meta_string(binding, "uid");
  if (!uid.empty() && uid != meta_string(*cur, "uid")) {
    throw cannot("Precondition failed: UID in precondition: " + uid +
                 ", UID in object meta: " + meta_string(*cur, "uid"));
  }
  auto bound = string_at(*cur, json::json_pointer("/spec/nodeName")).value_or("");
  if (!bound.empty()) throw cannot("pod " + t.name + " is already assigned to node \"" + bound + "\"");
  json next = *cur;
  next["spec"]["nodeName"] = node;
  auto& conditions = next["status"]["conditions"];
  if (!conditions.is_array()) conditions = json::array();
  conditions.push_back({{"type", "PodScheduled"}, {"status", "True"}, {"lastTransitionTime", now_rfc3339()}});
  write_object(pod, std::move(next), false);
  return success_status(201);
}

json FakeApiServer::Impl::evict_pod(const Target& t, const json& eviction) {
  Target pod = t;
  pod.subresource.clear();
  auto named = meta_string(eviction, "name");
  if (!named.empty() && named != t.name) {
    throw api_error(400, "name in URL does not match name in Eviction object");
  }
  delete_object(pod, eviction.value("deleteOptions", json::object()));
  return success_status(201);
}

// ---- Watches ------------------------------------------------------------------------------------

void FakeApiServer::Impl::start_watch(const httplib::Request& req, httplib::Response& res, const Target& t) {
  auto w = std::make_shared<Watcher>();
  w->collection = t.collection();
  w->ns = t.ns;
  w->kind = kind_of(t.resource);
  w->api_version = t.api_version;
  w->selector = Selector::parse(req.get_param_value("labelSelector"), req.get_param_value("fieldSelector"));
  w->bookmarks = param_true(req, "allowWatchBookmarks");
  if (req.has_param("timeoutSeconds")) {
    long secs = -1;
    try {
      secs = std::stol(req.get_param_value("timeoutSeconds"));
    } catch (const std::exception&) {
    }
    if (secs < 0 || secs > kMaxTimeoutSeconds) throw api_error(400, "timeoutSeconds: Invalid value");
    if (secs > 0) w->deadline = Clock::now() + std::chrono::seconds(secs);  // 0: the default, none here
  }
  auto from = req.get_param_value("resourceVersion");
  std::uint64_t from_rv = 0;
  if (!from.empty() && from != "0") {
    try {
      std::size_t used = 0;
      from_rv = std::stoull(from, &used);
      if (used != from.size()) throw std::invalid_argument(from);
    } catch (const std::exception&) {
      throw api_error(400, "resourceVersion: Invalid value: \"" + from + "\": must be a number");
    }
  }
  {
    std::lock_guard lock(mu);
    if (from.empty() || from == "0") {
      json list = list_objects(t, w->selector);
      for (auto& item : list["items"]) {
        item["kind"] = w->kind;
        item["apiVersion"] = w->api_version;
        w->pending.push_back(event_line("ADDED", item));
      }
      w->last_rv = rv;
    } else if (from_rv < floor) {
      w->pending.push_back(too_old_line(from_rv));
      w->end_after_pending = true;
    } else {
      w->last_rv = from_rv;
    }
    w->bookmark_generation = bookmark_generation - 1;  // the first turn schedules the first bookmark
    watchers.insert(w);
  }
  // The real one never compresses a watch; httplib would hold compressed chunks back until the end.
  const_cast<httplib::Request&>(req).headers.erase("Accept-Encoding");
  res.set_chunked_content_provider(
      "application/json", [this, w](std::size_t, httplib::DataSink& sink) { return pump(*w, sink); },
      [this, w](bool) {
        std::lock_guard lock(mu);
        watchers.erase(w);
      });
}

bool FakeApiServer::Impl::has_work(const Watcher& w) const {
  if (!stopping && w.fault == Watcher::Fault::kNone && held_back(w)) return false;
  return stopping || w.fault != Watcher::Fault::kNone || w.garbage > 0 || !w.pending.empty() ||
         rv > w.last_rv || (w.bookmarks && w.bookmark_generation != bookmark_generation);
}

Clock::time_point FakeApiServer::Impl::wake_time(const Watcher& w) const {
  auto t = std::min(w.deadline, Clock::now() + std::chrono::minutes(10));
  if (w.bookmarks && bookmark_every.count() > 0) t = std::min(t, w.next_bookmark);
  return t;
}

// One turn of a watch stream: waits for something to send, then sends it. False closes the connection.
bool FakeApiServer::Impl::pump(Watcher& w, httplib::DataSink& sink) {
  Delivery d;
  {
    std::unique_lock lock(mu);
    cv.wait_until(lock, wake_time(w), [&] { return has_work(w); });
    collect(w, d);
  }
  for (const auto& line : d.lines) {
    if (!sink.write(line.data(), line.size())) return false;
  }
  if (!d.partial.empty()) {
    sink.write(d.partial.data(), d.partial.size());
    return false;
  }
  if (d.close) return false;
  if (d.end) sink.done();
  return true;
}

std::string FakeApiServer::Impl::too_old_line(std::uint64_t from) const {
  auto msg = "too old resource version: " + std::to_string(from) + " (" + std::to_string(floor) + ")";
  return event_line("ERROR", status_object(410, "Expired", msg));
}

json FakeApiServer::Impl::version_marker(const Watcher& w) const {
  return {{"kind", w.kind},
          {"apiVersion", w.api_version},
          {"metadata", {{"resourceVersion", std::to_string(rv)}}}};
}

void FakeApiServer::Impl::collect(Watcher& w, Delivery& d) {
  if (stopping || w.fault == Watcher::Fault::kCut) {
    d.close = true;
    return;
  }
  if (held_back(w)) return;  // a lagging watch: nothing now, everything once released
  if (w.end_after_pending || w.last_rv >= floor) {
    for (auto& line : w.pending) d.lines.push_back(std::move(line));
    w.pending.clear();
  }
  if (w.end_after_pending) {
    d.end = true;
  } else if (w.last_rv < floor) {  // compacted while this watch lagged behind
    d.lines.push_back(too_old_line(w.last_rv));
    d.end = true;
  } else {
    collect_events(w, d);
    collect_faults(w, d);
    if (d.partial.empty()) collect_bookmark(w, d);
    if (Clock::now() >= w.deadline) d.end = true;
  }
}

void FakeApiServer::Impl::collect_events(Watcher& w, Delivery& d) {
  auto first = std::upper_bound(history.begin(), history.end(), w.last_rv,
                                [](std::uint64_t v, const Event& e) { return v < e.rv; });
  for (auto it = first; it != history.end(); ++it) {
    bool ns_ok = w.ns.empty() || it->ns == w.ns;
    if (it->collection == w.collection && ns_ok && w.selector.matches(it->object))
      d.lines.push_back(it->line);
  }
  w.last_rv = std::max(w.last_rv, rv);
}

// A truncation cuts the last event in two (or a made-up one when there is none); garbage is a line of its
// own.
void FakeApiServer::Impl::collect_faults(Watcher& w, Delivery& d) {
  if (w.fault == Watcher::Fault::kTruncate) {
    std::string line = event_line("MODIFIED", version_marker(w));
    if (!d.lines.empty()) {
      line = std::move(d.lines.back());
      d.lines.pop_back();
    }
    d.partial = line.substr(0, line.size() / 2);
  }
  for (; w.garbage > 0; --w.garbage) d.lines.push_back("{not json\n");
}

void FakeApiServer::Impl::collect_bookmark(Watcher& w, Delivery& d) {
  if (!w.bookmarks) return;
  auto now = Clock::now();
  if (w.bookmark_generation != bookmark_generation) {  // the interval changed: the next one from now
    w.bookmark_generation = bookmark_generation;
    w.next_bookmark = now + bookmark_every;
  }
  if (bookmark_every.count() > 0 && now >= w.next_bookmark) {
    d.lines.push_back(event_line("BOOKMARK", version_marker(w)));
    w.next_bookmark = now + bookmark_every;
  }
}

// ---- The public face ----------------------------------------------------------------------------

namespace {

Target object_target(const std::string& path) {
  Target t = parse_target(path);
  if (t.name.empty() || !t.subresource.empty()) throw std::invalid_argument("not an object's path: " + path);
  return t;
}

// The direct calls answer an API failure as an exception naming the Status message.
template <typename F>
auto or_throw(const std::string& what, F&& f) {
  try {
    return f();
  } catch (const ApiError& e) {
    throw std::runtime_error(what + ": " + e.status.value("message", std::string()));
  }
}

}  // namespace

FakeApiServer::FakeApiServer() : impl_(std::make_unique<Impl>()) {
  impl_->start();
}

FakeApiServer::~FakeApiServer() {
  impl_->stop();
}

int FakeApiServer::port() const {
  return impl_->port;
}

std::string FakeApiServer::url() const {
  return "http://127.0.0.1:" + std::to_string(impl_->port);
}

void FakeApiServer::require_token(const std::string& token) {
  std::lock_guard lock(impl_->mu);
  impl_->token = token;
}

nlohmann::json FakeApiServer::create(const std::string& collection, nlohmann::json obj) {
  return or_throw("create in " + collection, [&] {
    Target t = parse_target(collection);
    std::lock_guard lock(impl_->mu);
    return impl_->create_object(t, std::move(obj));
  });
}

nlohmann::json FakeApiServer::update(const std::string& path, nlohmann::json obj) {
  return or_throw("update " + path, [&] {
    Target t = object_target(path);
    std::lock_guard lock(impl_->mu);
    meta(obj).erase("resourceVersion");
    return impl_->write_object(t, std::move(obj), false);
  });
}

nlohmann::json FakeApiServer::patch(const std::string& path, const nlohmann::json& merge_patch) {
  return or_throw("patch " + path, [&] {
    Target t = object_target(path);
    std::lock_guard lock(impl_->mu);
    return impl_->patch_object(t, "application/merge-patch+json", merge_patch);
  });
}

bool FakeApiServer::remove(const std::string& path) {
  Target t = or_throw("remove " + path, [&] { return object_target(path); });
  std::lock_guard lock(impl_->mu);
  if (impl_->find(t) == nullptr) return false;
  impl_->delete_object(t, json::object());
  return true;
}

nlohmann::json FakeApiServer::get(const std::string& path) const {
  Target t = or_throw("get " + path, [&] { return object_target(path); });
  std::lock_guard lock(impl_->mu);
  const json* obj = impl_->find(t);
  return obj == nullptr ? json() : *obj;
}

nlohmann::json FakeApiServer::list(const std::string& collection) const {
  return or_throw("list " + collection, [&] {
    Target t = parse_target(collection);
    std::lock_guard lock(impl_->mu);
    return impl_->list_objects(t, Selector{});
  });
}

std::uint64_t FakeApiServer::resource_version() const {
  std::lock_guard lock(impl_->mu);
  return impl_->rv;
}

void FakeApiServer::cut_watches() {
  std::lock_guard lock(impl_->mu);
  for (const auto& w : impl_->watchers) w->fault = Watcher::Fault::kCut;
  impl_->cv.notify_all();
}

void FakeApiServer::truncate_watches() {
  std::lock_guard lock(impl_->mu);
  for (const auto& w : impl_->watchers) {
    if (w->fault == Watcher::Fault::kNone) w->fault = Watcher::Fault::kTruncate;
  }
  impl_->cv.notify_all();
}

void FakeApiServer::garbage_watches() {
  std::lock_guard lock(impl_->mu);
  for (const auto& w : impl_->watchers) ++w->garbage;
  impl_->cv.notify_all();
}

void FakeApiServer::compact() {
  std::lock_guard lock(impl_->mu);
  impl_->floor = impl_->rv;
  impl_->history.clear();
  impl_->cv.notify_all();
}

void FakeApiServer::restart(std::uint64_t jump) {
  std::lock_guard lock(impl_->mu);
  impl_->rv += jump;
  impl_->floor = impl_->rv;
  impl_->history.clear();
  for (const auto& w : impl_->watchers) w->fault = Watcher::Fault::kCut;
  impl_->cv.notify_all();
}

void FakeApiServer::hold_watches(const std::string& resource, bool hold) {
  std::lock_guard lock(impl_->mu);
  if (hold) {
    impl_->held.insert(resource);
  } else {
    impl_->held.erase(resource);
  }
  impl_->cv.notify_all();
}

void FakeApiServer::set_bookmark_interval(std::chrono::milliseconds every) {
  std::lock_guard lock(impl_->mu);
  impl_->bookmark_every = std::max(every, std::chrono::milliseconds(0));
  ++impl_->bookmark_generation;
  impl_->cv.notify_all();
}

void FakeApiServer::fail_next(int http_status, int count) {
  std::lock_guard lock(impl_->mu);
  impl_->fail_status = http_status;
  impl_->fail_count = std::max(count, 0);
}

bool FakeApiServer::Impl::served(const std::string& group_version) {
  std::lock_guard lock(mu);
  return unserved.count(group_version) == 0;
}

void FakeApiServer::set_group_served(const std::string& group_version, bool served) {
  std::lock_guard lock(impl_->mu);
  if (served) {
    impl_->unserved.erase(group_version);
  } else {
    impl_->unserved.insert(group_version);
  }
}

void FakeApiServer::set_partitionable_devices(bool enabled) {
  std::lock_guard lock(impl_->mu);
  impl_->partitionable_devices = enabled;
}

void FakeApiServer::set_history_limit(std::size_t events) {
  std::lock_guard lock(impl_->mu);
  impl_->history_limit = std::max<std::size_t>(events, 1);
  while (impl_->history.size() > impl_->history_limit) {
    impl_->floor = impl_->history.front().rv;
    impl_->history.pop_front();
  }
}

std::vector<FakeApiServer::Request> FakeApiServer::requests() const {
  std::lock_guard lock(impl_->mu);
  return {impl_->requests.begin(), impl_->requests.end()};
}

void FakeApiServer::clear_requests() {
  std::lock_guard lock(impl_->mu);
  impl_->requests.clear();
}

int FakeApiServer::open_watches() const {
  std::lock_guard lock(impl_->mu);
  return static_cast<int>(impl_->watchers.size());
}

}  // namespace ascend::testing
