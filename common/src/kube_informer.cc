// The Informer (kube_client.h): LIST, then WATCH from the list's resourceVersion; a store that a re-list
// reconciles with Added/Modified/Deleted events.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "ascend/common/guarded.h"
#include "ascend/common/json_depth.h"
#include "ascend/common/kube_client.h"

namespace ascend::kube {

using nlohmann::json;

namespace {

constexpr int kMaxJsonDepth = 256;

std::string string_at(const json& obj, const char* a, const char* b = nullptr) {
  if (!obj.is_object()) return {};
  auto it = obj.find(a);
  if (it == obj.end()) return {};
  if (b != nullptr) {
    if (!it->is_object()) return {};
    auto inner = it->find(b);
    if (inner == it->end()) return {};
    it = inner;
  }
  return it->is_string() ? it->get<std::string>() : std::string();
}

std::string rv_of(const json& obj) {
  return string_at(obj, "metadata", "resourceVersion");
}

// Jittered doubling between min and max; reset() after a good event.
class Backoff {
 public:
  Backoff(std::chrono::milliseconds min, std::chrono::milliseconds max)
      : min_(std::max<std::chrono::milliseconds>(min, std::chrono::milliseconds(1))),
        max_(std::max(max, min_)),
        cur_(min_),
        rng_(std::random_device{}()) {}

  std::chrono::milliseconds next() {
    std::uniform_real_distribution<double> jitter(1.0, 1.5);
    auto d = std::chrono::milliseconds(
        static_cast<std::int64_t>(static_cast<double>(cur_.count()) * jitter(rng_)));
    cur_ = std::min(cur_ * 2, max_);
    return std::min(d, max_);
  }
  void reset() { cur_ = min_; }
  std::uint64_t random(std::uint64_t below) {
    return std::uniform_int_distribution<std::uint64_t>(0, below)(rng_);
  }

 private:
  std::chrono::milliseconds min_, max_, cur_;
  std::mt19937_64 rng_;
};

// How a watch ended, and what comes next.
enum class WatchEnd {
  kEnded,        // the server closed it as planned (timeoutSeconds): re-watch at once
  kFailed,       // connection or HTTP error: re-watch after a backoff
  kRelistNow,    // 410 Gone: the history is gone
  kRelistLater,  // a line we cannot trust (garbage, a wrong kind, an ERROR event): re-list after a backoff
  kStopped,
};

}  // namespace

std::string key_of(const json& obj) {
  const std::string name = string_at(obj, "metadata", "name");
  if (name.empty()) return {};
  const std::string ns = string_at(obj, "metadata", "namespace");
  return ns.empty() ? name : ns + "/" + name;
}

std::string_view to_string(EventType t) {
  switch (t) {
    case EventType::kAdded:
      return "Added";
    case EventType::kModified:
      return "Modified";
    case EventType::kDeleted:
      return "Deleted";
  }
  return "?";
}

struct Informer::Impl {
  std::shared_ptr<Client> client;
  InformerOptions o;
  Handler handler;
  std::string name;
  CancelToken token;
  std::thread thread;
  std::atomic<bool> stopping{false};
  std::mutex pause_mu;
  std::condition_variable pause_cv;
  Backoff backoff;

  mutable std::mutex mu;  // guards what other threads read: the store, rv, synced, stats
  mutable std::condition_variable synced_cv;
  std::map<std::string, json> store;
  std::string rv;
  bool synced = false;
  Stats stats;
  std::string kind;  // of the items ("Pod"), from the list's kind

  Impl(std::shared_ptr<Client> c, InformerOptions opts, Handler h)
      : client(std::move(c)),
        o(std::move(opts)),
        handler(std::move(h)),
        name(o.name.empty() ? o.path : o.name),
        backoff(o.backoff_min, o.backoff_max) {}

  void run();
  // One list (when `need_list`) and one watch; true when stopping.
  bool pass(bool& need_list);
  bool pause(std::chrono::milliseconds d);
  void set_synced(bool s);
  void count(std::uint64_t Stats::*field, std::uint64_t n = 1);
  std::string selectors() const;
  json transformed(json obj) const;
  Status list();
  Result<std::map<std::string, json>> list_items(json& l);
  void deliver(EventType t, const json& obj);
  WatchEnd watch();
  std::optional<WatchEnd> on_line(std::string_view line);
  std::optional<WatchEnd> on_error_event(const json& status);
  std::optional<WatchEnd> apply(const std::string& type, const json& obj);
  WatchEnd distrust(std::string_view what);
};

// ---- LIST -----------------------------------------------------------------------------------------------

std::string Informer::Impl::selectors() const {
  std::string q;
  if (!o.label_selector.empty()) q += "&labelSelector=" + escape(o.label_selector);
  if (!o.field_selector.empty()) q += "&fieldSelector=" + escape(o.field_selector);
  return q;
}

json Informer::Impl::transformed(json obj) const {
  return o.transform ? o.transform(std::move(obj)) : obj;
}

// The list's items by key, transformed (moved out of `l`: a list of 20 000 pods is not copied); its kind and
// resourceVersion are checked by the caller.
Result<std::map<std::string, json>> Informer::Impl::list_items(json& l) {
  std::map<std::string, json> items;
  const std::string api_version = string_at(l, "apiVersion");
  for (json& item : l["items"]) {
    const std::string key = key_of(item);
    if (key.empty()) return Error(EIO, "LIST: an item without metadata.name");
    // The API server leaves kind and apiVersion out of list items; watch events carry them.
    if (!item.contains("kind") && !kind.empty()) item["kind"] = kind;
    if (!item.contains("apiVersion") && !api_version.empty()) item["apiVersion"] = api_version;
    try {
      items[key] = transformed(std::move(item));
    } catch (const std::exception& e) {
      return Error(EIO, fmt::format("LIST: the transform threw on {}: {}", key, e.what()));
    }
  }
  return items;
}

Status Informer::Impl::list() {
  count(&Stats::lists);
  const std::string q = selectors();
  ASCEND_ASSIGN(json l, client->get(q.empty() ? o.path : o.path + "?" + q.substr(1)), "LIST");
  if (!l.is_object() || !l.contains("items") || !(l["items"].is_array() || l["items"].is_null()))
    return Error(EIO, fmt::format("LIST {}: the answer is not a list", o.path));
  if (l["items"].is_null()) l["items"] = json::array();
  const std::string list_rv = rv_of(l);
  if (list_rv.empty()) return Error(EIO, fmt::format("LIST {}: no metadata.resourceVersion", o.path));
  const std::string list_kind = string_at(l, "kind");
  kind = list_kind.ends_with("List") ? list_kind.substr(0, list_kind.size() - 4) : std::string();
  ASCEND_ASSIGN(auto fresh, list_items(l), o.path);
  l = json();  // its items were moved out; the rest goes before the handlers run
  // Added and Modified by key (delivered from the store: only this thread writes it, so reading it outside
  // the lock is safe); Deleted objects moved out of the old store.
  std::vector<std::pair<EventType, std::string>> upserts;
  std::vector<json> deleted;
  const std::size_t n = fresh.size();
  {
    std::lock_guard lock(mu);
    for (const auto& [key, obj] : fresh) {
      auto old = store.find(key);
      if (old == store.end()) {
        upserts.emplace_back(EventType::kAdded, key);
      } else if (rv_of(old->second) != rv_of(obj)) {
        upserts.emplace_back(EventType::kModified, key);
      }
    }
    for (auto& [key, obj] : store) {
      if (!fresh.contains(key)) deleted.push_back(std::move(obj));
    }
    store = std::move(fresh);
    rv = list_rv;
  }
  for (const auto& [type, key] : upserts) deliver(type, store.at(key));
  for (const auto& obj : deleted) deliver(EventType::kDeleted, obj);
  set_synced(true);
  spdlog::debug("informer {}: listed {} objects at resourceVersion {} ({} changes)", name, n, list_rv,
                upserts.size() + deleted.size());
  return ok_status();
}

// ---- WATCH ----------------------------------------------------------------------------------------------

WatchEnd Informer::Impl::watch() {
  count(&Stats::watches);
  const int t = std::max(o.watch_timeout_seconds, 1);
  std::string from;
  {
    std::lock_guard lock(mu);
    from = rv;
  }
  const std::string path =
      fmt::format("{}?watch=true&resourceVersion={}&allowWatchBookmarks=true&timeoutSeconds={}{}", o.path,
                  escape(from), t + backoff.random(static_cast<std::uint64_t>(t)), selectors());
  std::optional<WatchEnd> verdict;
  int lines = 0;
  const auto started = std::chrono::steady_clock::now();
  Status s = client->stream(
      path,
      [&](std::string_view line) {
        ++lines;
        verdict = on_line(line);
        return !verdict;
      },
      &token);
  if (stopping) return WatchEnd::kStopped;
  if (verdict) return *verdict;
  if (!s && s.error().code() == ESTALE) {
    spdlog::info("informer {}: watch from resourceVersion {} expired (410 Gone): re-listing", name, from);
    return WatchEnd::kRelistNow;
  }
  if (!s) {
    count(&Stats::errors);
    spdlog::warn("informer {}: watch: {}", name, s.error().message());
    return WatchEnd::kFailed;
  }
  // A watch the server ends at once, empty, again and again would be a busy loop: back off from it.
  if (lines == 0 && std::chrono::steady_clock::now() - started < std::chrono::seconds(1))
    return WatchEnd::kFailed;
  return WatchEnd::kEnded;
}

WatchEnd Informer::Impl::distrust(std::string_view what) {
  count(&Stats::errors);
  spdlog::warn("informer {}: {}: re-listing", name, what);
  return WatchEnd::kRelistLater;
}

std::optional<WatchEnd> Informer::Impl::on_line(std::string_view line) {
  json ev = json_nests_deeper_than(line, kMaxJsonDepth) ? json(json::value_t::discarded)
                                                        : json::parse(line, nullptr, false);
  if (ev.is_discarded() || !ev.is_object())
    return distrust(fmt::format("the watch sent a line that is not a JSON object ({} bytes)", line.size()));
  const std::string type = string_at(ev, "type");
  auto obj = ev.find("object");
  if (type.empty() || obj == ev.end() || !obj->is_object())
    return distrust("the watch sent an event without type or object");
  if (type == "ERROR") return on_error_event(*obj);
  if (type == "BOOKMARK") {
    const std::string bookmark = rv_of(*obj);
    if (bookmark.empty()) return distrust("the watch sent a BOOKMARK without metadata.resourceVersion");
    std::lock_guard lock(mu);
    rv = bookmark;
    ++stats.bookmarks;
    backoff.reset();
    return std::nullopt;
  }
  if (type != "ADDED" && type != "MODIFIED" && type != "DELETED")
    return distrust(fmt::format("the watch sent an event of unknown type \"{}\"", type.substr(0, 40)));
  return apply(type, *obj);
}

std::optional<WatchEnd> Informer::Impl::on_error_event(const json& status) {
  const int code =
      status.contains("code") && status["code"].is_number_integer() ? status["code"].get<int>() : 0;
  if (code == 410) {
    std::lock_guard lock(mu);
    spdlog::info("informer {}: watch from resourceVersion {} expired (410 Gone): re-listing", name, rv);
    return WatchEnd::kRelistNow;
  }
  return distrust(fmt::format("the watch sent an ERROR (code {}: {})", code,
                              string_at(status, "message").substr(0, 300)));
}

std::optional<WatchEnd> Informer::Impl::apply(const std::string& type, const json& obj) {
  const std::string obj_kind = string_at(obj, "kind");
  if (!kind.empty() && obj_kind != kind)
    return distrust(fmt::format("the watch sent {} of a \"{}\" where {} objects were expected", type,
                                obj_kind.substr(0, 60), kind));
  const std::string key = key_of(obj), obj_rv = rv_of(obj);
  if (key.empty() || obj_rv.empty())
    return distrust(fmt::format("the watch sent a {} without metadata.name or resourceVersion", type));
  json t;
  try {
    t = transformed(obj);
  } catch (const std::exception& e) {
    return distrust(fmt::format("the transform threw on {}: {}", key, e.what()));
  }
  std::optional<EventType> change;
  {
    std::lock_guard lock(mu);
    auto it = store.find(key);
    if (type == "DELETED") {
      if (it != store.end()) change = EventType::kDeleted;
      if (it != store.end()) store.erase(it);
    } else {
      change = it == store.end() ? EventType::kAdded : EventType::kModified;
      store[key] = t;
    }
    rv = obj_rv;
  }
  backoff.reset();
  if (change) deliver(*change, t);
  return std::nullopt;
}

// ---- the thread -----------------------------------------------------------------------------------------

void Informer::Impl::deliver(EventType t, const json& obj) {
  count(&Stats::events);
  try {
    handler(t, obj);
  } catch (const std::exception& e) {
    spdlog::error("informer {}: the handler of {} {} threw: {}", name, to_string(t), key_of(obj), e.what());
  } catch (...) {
    spdlog::error("informer {}: the handler of {} {} threw", name, to_string(t), key_of(obj));
  }
}

void Informer::Impl::count(std::uint64_t Stats::*field, std::uint64_t n) {
  std::lock_guard lock(mu);
  stats.*field += n;
}

void Informer::Impl::set_synced(bool s) {
  {
    std::lock_guard lock(mu);
    synced = s;
  }
  synced_cv.notify_all();
}

bool Informer::Impl::pause(std::chrono::milliseconds d) {
  std::unique_lock lock(pause_mu);
  return !pause_cv.wait_for(lock, d, [&] { return stopping.load(); });
}

void Informer::Impl::run() {
  bool need_list = true;
  std::string failed;  // the last exception's text (guarded.h)
  while (!stopping) {
    // A pass that throws (a bug, out of memory) is logged; the informer lists again after the backoff.
    bool stop = false;
    if (run_guarded(
            "informer " + name, [&] { stop = pass(need_list); }, "re-listing", &failed)) {
      if (stop) return;
      continue;
    }
    need_list = true;
    set_synced(false);
    count(&Stats::errors);
    pause(backoff.next());
  }
}

bool Informer::Impl::pass(bool& need_list) {
  if (need_list) {
    if (Status s = list(); !s) {
      if (stopping) return true;
      count(&Stats::errors);
      const auto d = backoff.next();
      spdlog::warn("informer {}: {}; retrying in {} ms", name, s.error().message(), d.count());
      pause(d);
      return false;
    }
    need_list = false;
  }
  const WatchEnd end = watch();
  if (end == WatchEnd::kStopped) return true;
  if (end == WatchEnd::kRelistNow || end == WatchEnd::kRelistLater) {
    need_list = true;
    set_synced(false);
  }
  if (end == WatchEnd::kFailed || end == WatchEnd::kRelistLater) pause(backoff.next());
  return false;
}

// ---- the public face ------------------------------------------------------------------------------------

Informer::Informer(std::shared_ptr<Client> client, InformerOptions o, Handler on_event)
    : impl_(std::make_unique<Impl>(std::move(client), std::move(o), std::move(on_event))) {}

Informer::~Informer() {
  stop();
}

void Informer::start() {
  if (impl_->thread.joinable()) return;
  impl_->stopping = false;
  impl_->token.reset();
  impl_->thread = std::thread([this] { impl_->run(); });
}

void Informer::stop() {
  {
    std::lock_guard lock(impl_->pause_mu);
    impl_->stopping = true;
  }
  impl_->pause_cv.notify_all();
  impl_->token.cancel();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->set_synced(false);  // nothing keeps the store current now
}

bool Informer::synced() const {
  std::lock_guard lock(impl_->mu);
  return impl_->synced;
}

bool Informer::wait_synced(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mu);
  return impl_->synced_cv.wait_for(lock, timeout, [&] { return impl_->synced; });
}

std::map<std::string, json> Informer::snapshot() const {
  std::lock_guard lock(impl_->mu);
  return impl_->store;
}

std::string Informer::resource_version() const {
  std::lock_guard lock(impl_->mu);
  return impl_->rv;
}

Informer::Stats Informer::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->stats;
}

}  // namespace ascend::kube
