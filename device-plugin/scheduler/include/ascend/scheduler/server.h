// `ascend-scheduler serve`: the extender's HTTP server. Owns one Scheduler (extender.h) behind a mutex,
// persists it after every change when a state file is given, expires stale reservations once a second, and
// serves:
//   POST /filter, /prioritize, /bind         kube-scheduler's extender verbs
//   (k8s.io/kube-scheduler/extender/v1) PUT  /v1/nodes/{name}                    a device plugin's inventory
//   (token or loopback) GET  /v1/nodes/{name}/reservations       chips waiting for Allocate on a node (token
//   or loopback) POST /v1/nodes/{name}/allocations        a device plugin took a reservation     (token or
//   loopback) DELETE /v1/pods/{namespace}/{name}       release a pod's chips                  (token or
//   loopback) GET  /v1/cluster, /v1/jobs/{ns}/{name}/{placement|ranktable|env?pod=N} GET  /healthz, /metrics,
//   / (the dashboard)
// Bad input is HTTP 400 with {"error": "..."} and changes nothing.
//
// Thread-safe: requests are served concurrently by the HTTP library's thread pool; stop() may be called from
// any thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "ascend/common/error.h"
#include "ascend/topology/cluster.h"

namespace ascend::scheduler {

struct ServeOptions {
  std::string cluster;  // the cluster file (for messages; the Cluster itself is passed in)
  std::string listen = "127.0.0.1:8888";
  std::string state;  // empty: nothing persisted
  std::string tls_cert;
  std::string tls_key;
  std::string token_file;  // empty: the plugin endpoints accept loopback peers only
  std::string kube_api;    // empty: bind only records; else the Binding is created there
  std::string kube_token_file;
  std::string kube_ca_file;
  std::chrono::milliseconds reservation_ttl = std::chrono::minutes(5);
  std::size_t max_body = 64U << 20;
  int threads = 0;  // 0: the HTTP library's default
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
  // Loads the state file (a corrupt one is an error, never silently reset), reads the token, and binds the
  // listening socket. `binder` may be null (bind only records).
  static Result<std::unique_ptr<Server>> create(const ServeOptions& o, topology::Cluster cluster,
                                                std::unique_ptr<Binder> binder);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const;
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
