// `ascend-scheduler serve`: the extender's HTTP server. Owns one Scheduler (extender.h) behind a mutex,
// persists it after every change when a state file is given, expires stale reservations once a second, and
// serves on two listeners:
//
// --extender-listen (default 127.0.0.1:8889): kube-scheduler's extender verbs (k8s.io/kube-scheduler/
//   extender/v1) POST /filter, /prioritize, /bind; the views; /healthz, /readyz. Loopback peers only, or,
//   when the operator must put it on the network, TLS with a client certificate verified against
//   --extender-client-ca (create() refuses a non-loopback address without it).
// --listen (default 127.0.0.1:8888): what the device plugins on every node call,
//   PUT  /v1/nodes/{name}                    a device plugin's inventory
//   GET  /v1/nodes/{name}/reservations       chips waiting for Allocate on a node
//   POST /v1/nodes/{name}/allocations[/return]  a device plugin took (gave back) a reservation
//   DELETE /v1/pods/{namespace}/{name}       release a pod's chips
//   GET  /v1/cluster, /v1/jobs/{ns}/{name}/{placement|ranktable|env?pod=N}, / (the dashboard)
//   all of them with the bearer token of --token-file (without one: loopback peers only); open to anyone:
//   GET /healthz, /readyz, /metrics (no names in them). The extender verbs are refused there (404).
// Access is decided from the path before the body is read. Bad input (a name outside Kubernetes' limits
// included, pod.h) is HTTP 400 with {"error": "..."} and changes nothing.
//
// Thread-safe: requests are served concurrently by the HTTP library's thread pools; stop() may be called from
// any thread. Views and the state file are built from a snapshot outside the lock the verbs take.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "ascend/common/error.h"
#include "ascend/common/kube_client.h"
#include "ascend/topology/cluster.h"

namespace ascend {
class LoopClock;
}  // namespace ascend

namespace ascend::scheduler {

// The largest request body by default: a /filter of 5 000 nodes by name (nodeCacheCapable) with names of
// Kubernetes' largest (253 bytes: 1.3 MB) and a pod of etcd's largest request (1.5 MiB), rounded up. A real
// one is far smaller (5 000 names like "node-1234" and a pod: about 70 KB). Callers that send whole Node
// objects (nodeCacheCapable: false) need about 20 KiB per node: raise --max-body.
inline constexpr std::size_t kDefaultMaxBody = std::size_t{4} << 20;

struct ServeOptions {
  std::string cluster;                    // the cluster file (for messages; the Cluster itself is passed in)
  std::string listen = "127.0.0.1:8888";  // the device plugins, the views, the probes
  std::string extender_listen = "127.0.0.1:8889";  // kube-scheduler's verbs: loopback, or TLS as below
  std::string state;                               // empty: nothing persisted
  std::string tls_cert;                            // HTTPS on --listen
  std::string tls_key;
  std::string extender_tls_cert;  // HTTPS on --extender-listen, all three or none
  std::string extender_tls_key;
  std::string extender_client_ca;  // the CA whose client certificates are served there
  std::string token_file;          // empty: the guarded endpoints of --listen accept loopback peers only
  std::string kube_api;            // empty: bind only records; else the Binding is created there
  std::string kube_token_file;
  std::string kube_ca_file;
  std::string kubeconfig;  // the API configuration's three forms: kube_client.h resolve_config
  bool no_kube = false;    // run without an API server even in a cluster
  std::string instance;    // reportingInstance of our Events (the pod's name: $POD_NAME)
  std::chrono::milliseconds reservation_ttl = std::chrono::minutes(5);
  std::size_t max_body = kDefaultMaxBody;
  int threads = 0;  // 0: the HTTP library's default
  // The time of the server's own transitions (the extender verbs, the plugins' calls, reservation expiry) and
  // of the expiry loop's waits; the API server's watch (kube_sync.h) keeps real time. Null: real time. Tests
  // pass one they advance (ascend/common/loop_clock.h); it must outlive the server.
  LoopClock* clock = nullptr;
  // Tests only: run at the start of each reservation-expiry pass, and at the start of the extender
  // listener's thread, so that a test can make them throw (guarded.h).
  struct TestHooks {
    std::function<void()> expiry_pass;
    std::function<void()> extender_listener;
  };
  TestHooks test_hooks;
};

// Creates the Binding object in the API server (the one side effect of bind besides recording it).
class Binder {
 public:
  virtual ~Binder() = default;
  virtual Status bind(const std::string& ns, const std::string& pod, const std::string& uid,
                      const std::string& node) = 0;
};

// POST {api}/api/v1/namespaces/{ns}/pods/{pod}/binding with a bearer token, as kube-scheduler does.
Result<std::unique_ptr<Binder>> make_kube_binder(const std::string& api_url, const std::string& token_file,
                                                 const std::string& ca_file);

class Server {
 public:
  // Loads the state file (a corrupt one is an error, never silently reset), reads the token, and binds both
  // listening sockets; EINVAL for extender verbs on a non-loopback address without TLS and a client CA.
  // `binder` may be null (bind only records). With `api`, the scheduler is a cache of that API server
  // (kube_sync.h): it watches pods, Nodes and ConfigMaps, bind writes the pod's annotations and Binding
  // there (`binder` is not used), and /readyz waits for the cache to be synced.
  static Result<std::unique_ptr<Server>> create(const ServeOptions& o, topology::Cluster cluster,
                                                std::unique_ptr<Binder> binder,
                                                std::shared_ptr<kube::Client> api = nullptr);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const;           // --listen's
  int extender_port() const;  // --extender-listen's
  // Serves until stop().
  Status run();
  void stop();

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The dashboard page (self-contained HTML: no external scripts, styles or fonts).
const std::string& dashboard_html();

}  // namespace ascend::scheduler
