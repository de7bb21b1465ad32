// A Kubernetes API server stand-in for the tests: only for the faults the real kube-apiserver (tests/kube/)
// cannot produce on demand — a cut or truncated watch, garbage on the stream, 410 Gone, a restart with a new
// history. It keeps the real semantics its own tests (fake_apiserver_test) pin, from the API reference
// (https://kubernetes.io/docs/reference/using-api/api-concepts/):
// - one resourceVersion counter for every object, growing with every write (create, update, patch, delete);
// - LIST (`GET` of a collection) answers {"kind": "<Kind>List", "apiVersion",
//   "metadata": {"resourceVersion"}, "items": [...]}, with labelSelector (=, ==, !=, bare key) and
//   fieldSelector (metadata.name, metadata.namespace, spec.nodeName, status.phase; = and !=);
// - WATCH (`?watch=true|1`, from `resourceVersion`, or from now when absent or "0" after the current state
//   as ADDED events) streams newline-delimited {"type", "object"} events (ADDED, MODIFIED, DELETED,
//   BOOKMARK when allowWatchBookmarks=true, ERROR); a resourceVersion older than the compacted history is
//   answered as the real one does: 200 and one ERROR event whose object is a Status with code 410 (reason
//   "Expired"), then the end of the stream; `timeoutSeconds` ends it;
// - create: 201, metadata.uid/creationTimestamp/resourceVersion set, 409 AlreadyExists; generateName;
// - GET 404 NotFound as a Status; PUT (replace) and merge-PATCH (application/merge-patch+json, RFC 7386)
//   with metadata.resourceVersion as precondition: 409 Conflict when stale; strategic-merge-patch is 415;
// - DELETE (DeleteOptions.preconditions uid / resourceVersion: 409) answers the deleted object;
// - pods/binding: POST a v1 Binding: sets spec.nodeName once (409 Conflict when already bound), 201;
// - pods/eviction: POST a policy/v1 Eviction: deletes the pod, 201;
// - events.k8s.io/v1 events and v1 events, configmaps, pods, nodes, leases: any resource name is stored
//   generically; the Kind comes from a table (pods Pod, nodes Node, configmaps ConfigMap, events Event, ...);
//   cluster-scoped: nodes, namespaces;
// - bearer token: when set, every request without `Authorization: Bearer <token>` is 401.
// - resource.k8s.io/v1 ResourceSlices: with the feature gate DRAPartitionableDevices on (the default here;
//   the real 1.34's default is off), a slice's sharedCounters and its devices' consumesCounters are kept and
//   validated as pkg/apis/resource/validation does (at most 32 counters summed over the counter sets, 128
//   devices, 1024 counters consumed summed over the devices; a device consumes only counters of a counter
//   set of its own slice: 422 Invalid otherwise); with it off (set_partitionable_devices(false)) a create or
//   update drops them silently (sharedCounters, perDeviceNodeSelection, and each device's consumesCounters,
//   nodeName, nodeSelector, allNodes), as the real one's dropDisabledDRAPartitionableDevicesFields does,
//   unless the stored slice uses them already (an update keeps what is in use).
// As the real one: a write that changes nothing (same content) keeps the resourceVersion and sends no event;
// LIST items carry no kind/apiVersion (the List has them); watches are never compressed.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ascend::testing {

class FakeApiServer {
 public:
  // Listens on 127.0.0.1, an ephemeral port.
  FakeApiServer();
  ~FakeApiServer();
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  int port() const;
  std::string url() const;  // "http://127.0.0.1:<port>"
  void require_token(const std::string& token);

  // Direct access, as another client would write (every write bumps the resourceVersion and is watched).
  // `path` is an object's API path ("/api/v1/namespaces/default/pods/p0"); `collection` a collection's.
  nlohmann::json create(const std::string& collection, nlohmann::json obj);  // throws on 409
  nlohmann::json update(const std::string& path, nlohmann::json obj);        // replace, no precondition
  nlohmann::json patch(const std::string& path, const nlohmann::json& merge_patch);
  bool remove(const std::string& path);                      // false when absent
  nlohmann::json get(const std::string& path) const;         // null when absent
  nlohmann::json list(const std::string& collection) const;  // a List, as GET answers
  std::uint64_t resource_version() const;

  // Faults.
  void cut_watches();       // every open watch stream ends now (the connection is closed)
  void truncate_watches();  // every open watch gets half an event line, then is closed
  void garbage_watches();   // every open watch gets a line that is not JSON (and stays open)
  void compact();           // history up to now is gone: a watch from an older version gets 410
  // A restart with a new history (an etcd restored from a backup, another cluster behind the same URL):
  // the stored objects are kept, every open watch is cut, the resourceVersion counter jumps by `jump` and
  // the history before is compacted.
  void restart(std::uint64_t jump = 1000);
  void set_bookmark_interval(std::chrono::milliseconds every);  // 0: none (the default)
  void fail_next(int http_status, int count = 1);  // the next `count` requests of any kind get this status
  // A watch lags (the real one serves watches from its watch cache, behind what a GET reads): while held,
  // the open watches of `resource` ("pods", "configmaps") send nothing, not even a bookmark; released, each
  // sends every event it missed, in order.
  void hold_watches(const std::string& resource, bool hold);
  // How many events the history keeps (10000 by default); a watch from before the oldest kept one gets 410.
  void set_history_limit(std::size_t events);
  // The feature gate DRAPartitionableDevices (see above); on until set.
  void set_partitionable_devices(bool enabled);
  // Whether the API group/version `group_version` ("resource.k8s.io/v1") is served, as the real one's
  // --runtime-config turns one off: every group/version is until set. Discovery (GET /apis/{group}/{version})
  // answers an APIResourceList for a served one and 404 for one that is not, as do its resources' paths.
  void set_group_served(const std::string& group_version, bool served);

  struct Request {
    std::string method, path, query, content_type, body;
  };
  std::vector<Request> requests() const;  // every request served, in order
  void clear_requests();
  int open_watches() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ascend::testing
