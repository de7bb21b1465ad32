// A Kubernetes API client of our own size: configuration (in-cluster, kubeconfig, URL and files), the
// requests the scheduler and the device plugin make (GET, create, merge-PATCH with a resourceVersion
// precondition, DELETE, pods/binding, pods/eviction, events.k8s.io/v1 Events), and an Informer: LIST then
// WATCH from the list's resourceVersion with bookmarks, a re-list on 410 Gone, a re-watch with jittered
// backoff on a dropped stream, and a store that is never silently stale.
//
// HTTP and TLS are cpp-httplib's (OpenSSL), JSON is nlohmann's, kubeconfig YAML is yaml-cpp's (yaml_json.h).
// Errors: one ascend::Error per failed call, its message naming the method, the path and the API server's
// reason (Status.message); its code is the HTTP status mapped as kube_errno() says.
//
// Thread-safe: one Client may be used by many threads (each request opens its own connection unless a
// keep-alive one is free); an Informer runs one thread of its own.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ascend/common/error.h"

namespace ascend::kube {

// ---- Configuration --------------------------------------------------------------------------------------

struct Config {
  std::string server;      // "https://10.96.0.1:443" or "http://127.0.0.1:8080"
  std::string token;       // bearer token (read once from token_file when that is given)
  std::string token_file;  // re-read when the API server answers 401 (bound service-account tokens rotate)
  std::string ca_file;     // PEM bundle verifying an https server
  std::string ca_data;     // PEM text (kubeconfig's certificate-authority-data, decoded)
  std::string client_cert_file, client_key_file;  // mutual TLS (kubeconfig's client-certificate[-data])
  std::string client_cert_data, client_key_data;  // PEM text; parsed in memory, never written to disk
  bool insecure_skip_tls_verify = false;
  std::string ns = "default";  // in-cluster: the pod's namespace; kubeconfig: the context's namespace
  std::string source;          // "in-cluster", "kubeconfig /path (context x)", "--kube-api URL": for logs
};

// KUBERNETES_SERVICE_HOST/_PORT and /var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt,namespace}
// (`sa_dir` overrides that folder for tests). ENOENT when not in a cluster (no KUBERNETES_SERVICE_HOST).
Result<Config> in_cluster_config(const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");
// The current context of a kubeconfig file (or `context` when not empty): cluster server,
// certificate-authority[-data], insecure-skip-tls-verify; user token, tokenFile, client-certificate[-data],
// client-key[-data]; relative file paths are relative to the kubeconfig's folder. EINVAL naming the field.
Result<Config> load_kubeconfig(const std::string& path, const std::string& context = "");
// `--kube-api URL` with optional token and CA files.
Result<Config> url_config(const std::string& url, const std::string& token_file, const std::string& ca_file);

// The three forms as a binary's flags give them: --kubeconfig wins, then --kube-api, then in-cluster when
// `in_cluster_default`. nullopt: no API configuration at all (the caller runs without an API server).
struct ConfigFlags {
  std::string kubeconfig;
  std::string api_url;
  std::string token_file;
  std::string ca_file;
  bool in_cluster_default = true;
};
Result<std::optional<Config>> resolve_config(const ConfigFlags& f);

// ---- Requests -------------------------------------------------------------------------------------------

// The errno an API status maps to: 400/422 EINVAL, 401/403 EACCES, 404 ENOENT, 405 ENOTSUP,
// 409 AlreadyExists EEXIST, 409 Conflict EAGAIN, 410 ESTALE, 429 EBUSY, 5xx and others EIO.
int kube_errno(int http_status, std::string_view reason);

struct Response {
  int status = 0;
  std::string body;
  std::string reason;  // the status line's reason phrase ("Not Found")
};

// Percent-encodes one path segment or query value.
std::string escape(std::string_view s);
// "/api/v1/namespaces/{ns}/pods/{name}" and friends, every segment escaped; an empty name gives the
// collection. `group_version` "v1" is the core group (/api/v1), anything else is /apis/{gv}.
std::string path_of(std::string_view group_version, std::string_view resource, std::string_view ns = {},
                    std::string_view name = {}, std::string_view subresource = {});

// Cancels the streams of one caller of a shared Client (Client::cancel() closes every stream of the client):
// cancel() closes the streams started with this token, and a stream started with a cancelled token returns
// ECANCELED at once, until reset(). Thread-safe.
class CancelToken {
 public:
  CancelToken();
  ~CancelToken();
  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;
  void cancel();
  void reset();
  bool cancelled() const;

  struct State;
  State& state() const { return *state_; }

 private:
  std::unique_ptr<State> state_;
};

class Client {
 public:
  explicit Client(Config c);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const Config& config() const;

  // One request, any status: EIO only when no answer came (connection, TLS, timeout).
  Result<Response> request(const std::string& method, const std::string& path_and_query,
                           const std::string& body = {},
                           const std::string& content_type = "application/json");

  // Non-2xx answers are errors (kube_errno); the body of a 2xx answer is parsed.
  Result<nlohmann::json> get(const std::string& path);
  Result<nlohmann::json> create(const std::string& collection_path, const nlohmann::json& obj);
  Result<nlohmann::json> replace(const std::string& path, const nlohmann::json& obj);  // PUT
  // application/merge-patch+json. Put metadata.resourceVersion in the patch to make it conditional: a stale
  // one is 409 (EAGAIN).
  Result<nlohmann::json> merge_patch(const std::string& path, const nlohmann::json& patch);
  // `uid`/`resource_version` non-empty: DeleteOptions.preconditions. ENOENT when already gone.
  Status del(const std::string& path, const std::string& uid = {}, const std::string& resource_version = {});

  // Reads, changes and writes an object, retrying on 409 Conflict with fresh data (at most `attempts`
  // times). `change` returns the merge patch to apply to what it was given (nullopt: nothing to do); the
  // patch is sent with the object's resourceVersion as precondition.
  using Change = std::function<std::optional<nlohmann::json>(const nlohmann::json& current)>;
  Result<nlohmann::json> update(const std::string& path, const Change& change, int attempts = 5);

  // POST .../pods/{name}/binding (v1 Binding, target Node `node`; the pod's uid as precondition when given).
  Status bind(const std::string& ns, const std::string& pod, const std::string& uid, const std::string& node);
  // POST .../pods/{name}/eviction (policy/v1 Eviction). EBUSY (429) when a disruption budget forbids it.
  Status evict(const std::string& ns, const std::string& pod);

  // An events.k8s.io/v1 Event about an object (kind, namespace, name, uid of `regarding`), from
  // `controller` (reportingController, e.g. "ascend.huawei.com/scheduler") and `instance`.
  struct EventArgs {
    std::string type = "Normal";  // or "Warning"
    std::string reason;           // "AscendPlaced"
    std::string action;           // "Scheduling"
    std::string note;             // the message a person reads (at most 1 kB is sent)
    std::string kind = "Pod", api_version = "v1", ns, name, uid;
    std::string controller, instance;
  };
  Status event(const EventArgs& e);

  // A streaming GET (a watch): `on_line` gets every newline-terminated line of the body as it arrives
  // (without the newline; empty lines are skipped) and returns false to stop; a partial last line is never
  // delivered. Returns when the stream ends, `on_line` says stop, or cancel() is called (ECANCELED).
  // Non-2xx: an error (the body read first). A line longer than 16 MiB is an error (EMSGSIZE). The read
  // timeout is the query's timeoutSeconds plus 30 s (an hour without one).
  Status stream(const std::string& path_and_query, const std::function<bool(std::string_view line)>& on_line,
                CancelToken* token = nullptr);
  // Closes every open stream of this client (from any thread).
  void cancel();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// ---- Informer -------------------------------------------------------------------------------------------

enum class EventType { kAdded, kModified, kDeleted };
std::string_view to_string(EventType t);

// LIST then WATCH one collection ("/api/v1/pods", "/api/v1/namespaces/kube-system/configmaps"), keeping a
// store by "namespace/name" (or "name"). Handlers see changes only: after a re-list the differences from the
// store are delivered as Added/Modified/Deleted events, so that a consumer never holds an object the API
// server no longer has. Handlers run on the informer's thread, one at a time; an exception from one is
// logged and the informer carries on.
struct InformerOptions {
  std::string path;            // the collection
  std::string label_selector;  // optional
  std::string field_selector;  // optional
  // Applied to each object before it is stored and handed on (drop what the consumer never reads: managed
  // fields, the pod spec's containers ...). Identity when empty.
  std::function<nlohmann::json(nlohmann::json)> transform;
  std::chrono::milliseconds backoff_min{200}, backoff_max{10'000};  // jittered, doubling
  int watch_timeout_seconds = 300;  // the server ends a watch after this (jittered up to 2x), then re-watch
  std::string name;                 // for log lines ("pods", "nodes")
};

class Informer {
 public:
  using Handler = std::function<void(EventType, const nlohmann::json& obj)>;
  Informer(std::shared_ptr<Client> client, InformerOptions o, Handler on_event);
  ~Informer();  // stops
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  void start();
  void stop();
  // True once the first LIST was delivered; false again while a re-list is due and not done.
  bool synced() const;
  // Waits until synced or the timeout; true when synced.
  bool wait_synced(std::chrono::milliseconds timeout) const;
  // A copy of the store (tests compare it with a fresh LIST).
  std::map<std::string, nlohmann::json> snapshot() const;
  std::string resource_version() const;
  struct Stats {
    std::uint64_t lists = 0, watches = 0, events = 0, bookmarks = 0, errors = 0;
  };
  Stats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// "namespace/name" of an object, or "name" for a cluster-scoped one.
std::string key_of(const nlohmann::json& obj);

}  // namespace ascend::kube
