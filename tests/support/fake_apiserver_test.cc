// The API server stand-in against the semantics of the real one
// (https://kubernetes.io/docs/reference/using-api/api-concepts/), through a plain HTTP client: the expected
// codes, reasons and messages are the real kube-apiserver's, not read back from the stand-in.
#include "fake_apiserver.h"

#include <httplib.h>

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace {

using ascend::testing::FakeApiServer;
using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr auto kWait = 10s;  // how long an expected event may take; never an upper bound that is asserted
const std::string kPods = "/api/v1/namespaces/default/pods";

json body_of(const httplib::Result& r) {
  if (!r) return json();
  return json::parse(r->body, nullptr, false);
}

json pod(const std::string& name, json labels = json::object(), const std::string& node = "") {
  json p = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", name}, {"labels", std::move(labels)}}},
            {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
  if (!node.empty()) p["spec"]["nodeName"] = node;
  return p;
}

std::uint64_t rv_of(const json& obj) {
  return std::stoull(obj["metadata"]["resourceVersion"].get<std::string>());
}

// A watch read on its own thread: the raw body as it arrives, and whether (and how) the GET returned.
class WatchReader {
 public:
  WatchReader(const std::string& url, const std::string& path_and_query, httplib::Headers headers = {})
      : cli_(url) {
    cli_.set_read_timeout(60, 0);
    thread_ = std::thread([this, path_and_query, headers] {
      auto res = cli_.Get(path_and_query, headers, [this](const char* data, std::size_t n) {
        std::lock_guard lock(mu_);
        raw_.append(data, n);
        cv_.notify_all();
        return true;
      });
      std::lock_guard lock(mu_);
      done_ = true;
      status_ = res ? res->status : -1;
      complete_ = static_cast<bool>(res);
      cv_.notify_all();
    });
  }
  ~WatchReader() {
    std::unique_lock lock(mu_);
    while (!done_) {  // stop() does nothing before the request is on its way: repeat until it returned
      lock.unlock();
      cli_.stop();
      lock.lock();
      cv_.wait_for(lock, 100ms, [&] { return done_; });
    }
    lock.unlock();
    thread_.join();
  }

  bool wait_lines(std::size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return lines_locked().size() >= n; });
  }
  bool wait_done() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return done_; });
  }
  bool wait_raw(std::size_t bytes) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return raw_.size() >= bytes || done_; });
  }
  std::vector<std::string> lines() {
    std::lock_guard lock(mu_);
    return lines_locked();
  }
  std::vector<json> events() {
    std::vector<json> out;
    for (const auto& l : lines()) out.push_back(json::parse(l));
    return out;
  }
  std::string raw() {
    std::lock_guard lock(mu_);
    return raw_;
  }
  int status() {
    std::lock_guard lock(mu_);
    return status_;
  }
  bool complete() {  // the response ended properly (the chunked body's end arrived)
    std::lock_guard lock(mu_);
    return complete_;
  }
  bool done() {
    std::lock_guard lock(mu_);
    return done_;
  }

 private:
  std::vector<std::string> lines_locked() const {
    std::vector<std::string> out;
    std::size_t start = 0;
    for (auto nl = raw_.find('\n'); nl != std::string::npos; nl = raw_.find('\n', start)) {
      out.push_back(raw_.substr(start, nl - start));
      start = nl + 1;
    }
    return out;
  }

  httplib::Client cli_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string raw_;
  bool done_ = false;
  bool complete_ = false;
  int status_ = 0;
};

class FakeApiServerTest : public ::testing::Test {
 protected:
  httplib::Result post(const std::string& path, const json& body) {
    return cli_.Post(path.c_str(), body.dump(), "application/json");
  }
  httplib::Result merge_patch(const std::string& path, const json& patch) {
    return cli_.Patch(path.c_str(), patch.dump(), "application/merge-patch+json");
  }
  json create_pod(const json& p) {
    auto r = post(kPods, p);
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
    return body_of(r);
  }
  std::vector<std::string> names(const std::string& path_and_query) {
    auto list = body_of(cli_.Get(path_and_query.c_str()));
    std::vector<std::string> out;
    for (const auto& item : list["items"]) out.push_back(item["metadata"]["name"]);
    return out;
  }
  bool wait_open_watches(int n) {
    auto deadline = std::chrono::steady_clock::now() + kWait;
    while (server_.open_watches() != n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(10ms);
    }
    return server_.open_watches() == n;
  }
  std::unique_ptr<WatchReader> watch(const std::string& query) {
    return std::make_unique<WatchReader>(server_.url(), kPods + "?watch=true" + query);
  }

  FakeApiServer server_;
  httplib::Client cli_{server_.url()};
};

void expect_status(const httplib::Result& r, int code, const std::string& reason,
                   const std::string& message = "") {
  ASSERT_TRUE(r) << "no answer";
  EXPECT_EQ(r->status, code) << r->body;
  auto s = body_of(r);
  EXPECT_EQ(s["kind"], "Status");
  EXPECT_EQ(s["apiVersion"], "v1");
  EXPECT_EQ(s["status"], "Failure");
  EXPECT_EQ(s["reason"], reason);
  EXPECT_EQ(s["code"], code);
  if (!message.empty()) {
    EXPECT_EQ(s["message"], message);
  }
}

// ---- Objects ---------------------------------------------------------------------------------------------

TEST_F(FakeApiServerTest, CreateAnswers201WithServerSetMetadata) {
  auto r = post(kPods, {{"metadata", {{"name", "p0"}}}, {"spec", json::object()}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201);
  auto p = body_of(r);
  EXPECT_EQ(p["kind"], "Pod");
  EXPECT_EQ(p["apiVersion"], "v1");
  EXPECT_EQ(p["metadata"]["namespace"], "default");
  EXPECT_TRUE(std::regex_match(p["metadata"]["uid"].get<std::string>(),
                               std::regex("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")));
  EXPECT_TRUE(std::regex_match(p["metadata"]["creationTimestamp"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));
  EXPECT_EQ(p["status"]["phase"], "Pending");
  EXPECT_EQ(rv_of(p), server_.resource_version());
  EXPECT_EQ(server_.get(kPods + "/p0"), p);
}

TEST_F(FakeApiServerTest, SecondCreateIs409AlreadyExists) {
  create_pod(pod("p0"));
  expect_status(post(kPods, pod("p0")), 409, "AlreadyExists", "pods \"p0\" already exists");
  EXPECT_THROW(server_.create(kPods, pod("p0")), std::runtime_error);
}

TEST_F(FakeApiServerTest, GenerateNameAppendsASuffix) {
  auto p = create_pod({{"metadata", {{"generateName", "job-"}}}});
  EXPECT_TRUE(std::regex_match(p["metadata"]["name"].get<std::string>(), std::regex("job-[a-z0-9]{5}")));
}

TEST_F(FakeApiServerTest, ResourceVersionGrowsWithEveryWrite) {
  std::uint64_t before = server_.resource_version();
  auto created = create_pod(pod("p0"));
  auto patched = body_of(merge_patch(kPods + "/p0", {{"metadata", {{"labels", {{"a", "1"}}}}}}));
  auto replaced = patched;
  replaced["metadata"]["labels"]["a"] = "2";
  replaced = body_of(cli_.Put((kPods + "/p0").c_str(), replaced.dump(), "application/json"));
  auto deleted = body_of(cli_.Delete((kPods + "/p0").c_str()));
  EXPECT_LT(before, rv_of(created));
  EXPECT_LT(rv_of(created), rv_of(patched));
  EXPECT_LT(rv_of(patched), rv_of(replaced));
  EXPECT_LT(rv_of(replaced), rv_of(deleted));
  EXPECT_EQ(rv_of(deleted), server_.resource_version());
}

TEST_F(FakeApiServerTest, GetOfAMissingObjectIs404NotFound) {
  expect_status(cli_.Get((kPods + "/nope").c_str()), 404, "NotFound", "pods \"nope\" not found");
  EXPECT_TRUE(server_.get(kPods + "/nope").is_null());
  EXPECT_FALSE(server_.remove(kPods + "/nope"));
}

// Discovery of a group/version (GET /apis/{group}/{version}) is an APIResourceList (kubectl api-resources
// reads it); one the server does not serve (kube-apiserver --runtime-config=resource.k8s.io/v1=false) is 404
// there and at its resources' paths, as the real one answers: "the server could not find the requested
// resource".
TEST_F(FakeApiServerTest, DiscoveryAnswersForAServedGroupVersionAndNotFoundForOneTurnedOff) {
  auto d = body_of(cli_.Get("/apis/resource.k8s.io/v1"));
  EXPECT_EQ(d["kind"], "APIResourceList");
  EXPECT_EQ(d["groupVersion"], "resource.k8s.io/v1");
  EXPECT_TRUE(d["resources"].is_array());
  server_.set_group_served("resource.k8s.io/v1", false);
  expect_status(cli_.Get("/apis/resource.k8s.io/v1"), 404, "NotFound",
                "the server could not find the requested resource");
  expect_status(cli_.Get("/apis/resource.k8s.io/v1/resourceclaims"), 404, "NotFound",
                "the server could not find the requested resource");
  EXPECT_TRUE(body_of(cli_.Get(kPods.c_str())).is_object()) << "other groups are still served";
  server_.set_group_served("resource.k8s.io/v1", true);
  EXPECT_EQ(body_of(cli_.Get("/apis/resource.k8s.io/v1/resourceclaims"))["kind"], "ResourceClaimList");
}

TEST_F(FakeApiServerTest, ListIsAKindListWithTheCurrentResourceVersion) {
  create_pod(pod("p1"));
  create_pod(pod("p0"));
  auto list = body_of(cli_.Get(kPods.c_str()));
  EXPECT_EQ(list["kind"], "PodList");
  EXPECT_EQ(list["apiVersion"], "v1");
  EXPECT_EQ(list["metadata"]["resourceVersion"], std::to_string(server_.resource_version()));
  EXPECT_EQ(names(kPods), (std::vector<std::string>{"p0", "p1"}));
  EXPECT_FALSE(list["items"][0].contains("kind"));  // as the real one: the List names the kind
  EXPECT_EQ(server_.list(kPods), list);
}

TEST_F(FakeApiServerTest, ListFiltersByLabelSelector) {
  create_pod(pod("a1", {{"app", "a"}, {"tier", "web"}}));
  create_pod(pod("a2", {{"app", "a"}}));
  create_pod(pod("b1", {{"app", "b"}}));
  using V = std::vector<std::string>;
  EXPECT_EQ(names(kPods + "?labelSelector=app%3Da"), (V{"a1", "a2"}));
  EXPECT_EQ(names(kPods + "?labelSelector=app%3D%3Db"), (V{"b1"}));
  EXPECT_EQ(names(kPods + "?labelSelector=app!%3Da"), (V{"b1"}));
  EXPECT_EQ(names(kPods + "?labelSelector=tier"), (V{"a1"}));
  EXPECT_EQ(names(kPods + "?labelSelector=!tier"), (V{"a2", "b1"}));
  EXPECT_EQ(names(kPods + "?labelSelector=app%3Da,!tier"), (V{"a2"}));
}

TEST_F(FakeApiServerTest, ListFiltersByFieldSelector) {
  create_pod(pod("p0", {}, "n1"));
  create_pod(pod("p1", {}, "n2"));
  create_pod(pod("p2"));
  using V = std::vector<std::string>;
  EXPECT_EQ(names(kPods + "?fieldSelector=spec.nodeName%3Dn1"), (V{"p0"}));
  EXPECT_EQ(names(kPods + "?fieldSelector=spec.nodeName%3D"), (V{"p2"}));  // not bound yet
  EXPECT_EQ(names(kPods + "?fieldSelector=metadata.name!%3Dp0"), (V{"p1", "p2"}));
  EXPECT_EQ(names(kPods + "?fieldSelector=status.phase%3DPending,spec.nodeName!%3Dn2"), (V{"p0", "p2"}));
  expect_status(cli_.Get((kPods + "?fieldSelector=spec.schedulerName%3Dx").c_str()), 400, "BadRequest",
                "field label not supported: spec.schedulerName");
}

TEST_F(FakeApiServerTest, ClusterWideListOfANamespacedResourceListsEveryNamespace) {
  server_.create("/api/v1/namespaces/other/pods", pod("q0"));
  create_pod(pod("p0"));
  EXPECT_EQ(names("/api/v1/pods"), (std::vector<std::string>{"p0", "q0"}));
  EXPECT_EQ(names("/api/v1/namespaces/other/pods"), (std::vector<std::string>{"q0"}));
}

TEST_F(FakeApiServerTest, ClusterScopedAndGroupResourcesAreStoredGenerically) {
  auto node = post("/api/v1/nodes", {{"metadata", {{"name", "n0"}}}});
  ASSERT_TRUE(node);
  EXPECT_EQ(node->status, 201);
  EXPECT_EQ(body_of(node)["kind"], "Node");
  EXPECT_FALSE(body_of(node)["metadata"].contains("namespace"));
  auto ev = post("/apis/events.k8s.io/v1/namespaces/default/events", {{"metadata", {{"name", "e0"}}}});
  EXPECT_EQ(body_of(ev)["apiVersion"], "events.k8s.io/v1");
  EXPECT_EQ(body_of(ev)["kind"], "Event");
  expect_status(cli_.Get("/apis/coordination.k8s.io/v1/namespaces/default/leases/l0"), 404, "NotFound",
                "leases.coordination.k8s.io \"l0\" not found");
}

TEST_F(FakeApiServerTest, MergePatchWithAStaleResourceVersionIs409Conflict) {
  auto p = create_pod(pod("p0"));
  auto stale = p["metadata"]["resourceVersion"];
  server_.patch(kPods + "/p0", {{"metadata", {{"labels", {{"other", "writer"}}}}}});
  expect_status(
      merge_patch(kPods + "/p0", {{"metadata", {{"resourceVersion", stale}, {"labels", {{"x", "1"}}}}}}), 409,
      "Conflict",
      "Operation cannot be fulfilled on pods \"p0\": the object has been modified; please apply your "
      "changes to the latest version and try again");
  auto fresh = server_.get(kPods + "/p0")["metadata"]["resourceVersion"];
  auto r = merge_patch(kPods + "/p0", {{"metadata", {{"resourceVersion", fresh}, {"labels", {{"x", "1"}}}}}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  auto patched = body_of(r);
  EXPECT_EQ(patched["metadata"]["labels"], (json{{"other", "writer"}, {"x", "1"}}));
  EXPECT_EQ(patched["metadata"]["uid"], p["metadata"]["uid"]);
  EXPECT_EQ(patched["metadata"]["creationTimestamp"], p["metadata"]["creationTimestamp"]);
  EXPECT_GT(rv_of(patched), std::stoull(fresh.get<std::string>()));
}

TEST_F(FakeApiServerTest, MergePatchRemovesNullFields) {
  create_pod(pod("p0", {{"a", "1"}, {"b", "2"}}));
  auto patched = body_of(merge_patch(kPods + "/p0", {{"metadata", {{"labels", {{"a", nullptr}}}}}}));
  EXPECT_EQ(patched["metadata"]["labels"], (json{{"b", "2"}}));
}

TEST_F(FakeApiServerTest, PutWithAStaleResourceVersionIs409AndKeepsTheUid) {
  auto p = create_pod(pod("p0"));
  server_.patch(kPods + "/p0", {{"metadata", {{"labels", {{"x", "1"}}}}}});
  auto r = cli_.Put((kPods + "/p0").c_str(), p.dump(), "application/json");
  expect_status(r, 409, "Conflict");
  json fresh = server_.get(kPods + "/p0");
  fresh["metadata"]["uid"] = "someone-else";
  fresh["metadata"]["labels"]["y"] = "2";
  auto ok = body_of(cli_.Put((kPods + "/p0").c_str(), fresh.dump(), "application/json"));
  EXPECT_EQ(ok["metadata"]["labels"]["y"], "2");
  EXPECT_EQ(ok["metadata"]["uid"], p["metadata"]["uid"]);
}

TEST_F(FakeApiServerTest, JsonPatchIsApplied) {
  create_pod(pod("p0", {{"a", "1"}}));
  json ops = json::array({{{"op", "replace"}, {"path", "/metadata/labels/a"}, {"value", "2"}}});
  auto r = cli_.Patch((kPods + "/p0").c_str(), ops.dump(), "application/json-patch+json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(body_of(r)["metadata"]["labels"]["a"], "2");
}

TEST_F(FakeApiServerTest, TheStatusSubresourceChangesOnlyTheStatus) {
  create_pod(pod("p0"));
  json patch = {{"metadata", {{"labels", {{"ignored", "yes"}}}}}, {"status", {{"phase", "Running"}}}};
  auto r = merge_patch(kPods + "/p0/status", patch);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  auto p = server_.get(kPods + "/p0");
  EXPECT_EQ(p["status"]["phase"], "Running");
  EXPECT_FALSE(p["metadata"]["labels"].contains("ignored"));
}

TEST_F(FakeApiServerTest, AWriteThatChangesNothingKeepsTheResourceVersion) {
  auto p = create_pod(pod("p0", {{"a", "1"}}));
  auto same = body_of(merge_patch(kPods + "/p0", {{"metadata", {{"labels", {{"a", "1"}}}}}}));
  EXPECT_EQ(same["metadata"]["resourceVersion"], p["metadata"]["resourceVersion"]);
  EXPECT_EQ(rv_of(p), server_.resource_version());
}

TEST_F(FakeApiServerTest, StrategicMergePatchIs415) {
  create_pod(pod("p0"));
  auto r =
      cli_.Patch((kPods + "/p0").c_str(), R"({"metadata":{}})", "application/strategic-merge-patch+json");
  expect_status(r, 415, "UnsupportedMediaType");
}

TEST_F(FakeApiServerTest, MalformedJsonIs400BadRequest) {
  expect_status(cli_.Post(kPods.c_str(), "{\"metadata\":", "application/json"), 400, "BadRequest");
  create_pod(pod("p0"));
  expect_status(cli_.Patch((kPods + "/p0").c_str(), "{not json", "application/merge-patch+json"), 400,
                "BadRequest");
}

TEST_F(FakeApiServerTest, DeleteWithAStaleUidPreconditionIs409) {
  auto p = create_pod(pod("p0"));
  json opts = {{"kind", "DeleteOptions"}, {"apiVersion", "v1"}, {"preconditions", {{"uid", "not-its-uid"}}}};
  auto r = cli_.Delete((kPods + "/p0").c_str(), opts.dump(), "application/json");
  expect_status(r, 409, "Conflict");
  EXPECT_FALSE(server_.get(kPods + "/p0").is_null());
  opts["preconditions"]["uid"] = p["metadata"]["uid"];
  auto deleted = cli_.Delete((kPods + "/p0").c_str(), opts.dump(), "application/json");
  ASSERT_TRUE(deleted);
  EXPECT_EQ(deleted->status, 200);
  EXPECT_EQ(body_of(deleted)["metadata"]["name"], "p0");
  expect_status(cli_.Delete((kPods + "/p0").c_str()), 404, "NotFound");
}

TEST_F(FakeApiServerTest, BindingSetsTheNodeOnceThenIs409) {
  auto p = create_pod(pod("p0"));
  json binding = {{"apiVersion", "v1"},
                  {"kind", "Binding"},
                  {"metadata", {{"name", "p0"}, {"uid", p["metadata"]["uid"]}}},
                  {"target", {{"kind", "Node"}, {"name", "n1"}}}};
  auto r = post(kPods + "/p0/binding", binding);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(body_of(r)["status"], "Success");
  EXPECT_EQ(server_.get(kPods + "/p0")["spec"]["nodeName"], "n1");
  binding["target"]["name"] = "n2";
  expect_status(post(kPods + "/p0/binding", binding), 409, "Conflict");
  EXPECT_EQ(server_.get(kPods + "/p0")["spec"]["nodeName"], "n1");
}

TEST_F(FakeApiServerTest, BindingWithAnotherPodsUidIs409) {
  create_pod(pod("p0"));
  json binding = {{"apiVersion", "v1"},
                  {"kind", "Binding"},
                  {"metadata", {{"name", "p0"}, {"uid", "0000"}}},
                  {"target", {{"kind", "Node"}, {"name", "n1"}}}};
  expect_status(post(kPods + "/p0/binding", binding), 409, "Conflict");
  EXPECT_FALSE(server_.get(kPods + "/p0")["spec"].contains("nodeName"));
  expect_status(post(kPods + "/gone/binding", binding), 404, "NotFound");
}

TEST_F(FakeApiServerTest, EvictionDeletesThePod) {
  create_pod(pod("p0"));
  json eviction = {{"apiVersion", "policy/v1"}, {"kind", "Eviction"}, {"metadata", {{"name", "p0"}}}};
  auto r = post(kPods + "/p0/eviction", eviction);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201);
  EXPECT_TRUE(server_.get(kPods + "/p0").is_null());
  expect_status(post(kPods + "/p0/eviction", eviction), 404, "NotFound");
}

// ---- Watches --------------------------------------------------------------------------------------------

TEST_F(FakeApiServerTest, WatchFromAListSeesAddedModifiedDeletedInOrder) {
  create_pod(pod("before"));
  auto list_rv = body_of(cli_.Get(kPods.c_str()))["metadata"]["resourceVersion"].get<std::string>();
  auto w = watch("&resourceVersion=" + list_rv);
  create_pod(pod("p0"));
  merge_patch(kPods + "/p0", {{"metadata", {{"labels", {{"x", "1"}}}}}});
  cli_.Delete((kPods + "/p0").c_str());
  ASSERT_TRUE(w->wait_lines(3));
  auto ev = w->events();
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0]["type"], "ADDED");
  EXPECT_EQ(ev[1]["type"], "MODIFIED");
  EXPECT_EQ(ev[1]["object"]["metadata"]["labels"]["x"], "1");
  EXPECT_EQ(ev[2]["type"], "DELETED");
  for (const auto& e : ev) {
    EXPECT_EQ(e["object"]["kind"], "Pod");
    EXPECT_EQ(e["object"]["metadata"]["name"], "p0");
  }
  EXPECT_LT(rv_of(ev[0]["object"]), rv_of(ev[1]["object"]));
  EXPECT_LT(rv_of(ev[1]["object"]), rv_of(ev[2]["object"]));
  EXPECT_EQ(w->status(), 0);  // still open
}

TEST_F(FakeApiServerTest, WatchFromAnOlderVersionReplaysTheHistory) {
  auto rv = server_.resource_version();
  create_pod(pod("p0"));
  create_pod(pod("p1"));
  auto w = watch("&resourceVersion=" + std::to_string(rv + 1));
  ASSERT_TRUE(w->wait_lines(1));
  auto ev = w->events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0]["object"]["metadata"]["name"], "p1");
}

TEST_F(FakeApiServerTest, WatchFromZeroSendsTheCurrentObjectsAsAdded) {
  create_pod(pod("p0"));
  create_pod(pod("p1"));
  server_.remove(kPods + "/p1");
  auto w = watch("&resourceVersion=0");
  ASSERT_TRUE(w->wait_lines(1));
  create_pod(pod("p2"));
  ASSERT_TRUE(w->wait_lines(2));
  auto ev = w->events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0]["type"], "ADDED");
  EXPECT_EQ(ev[0]["object"]["metadata"]["name"], "p0");
  EXPECT_EQ(ev[0]["object"]["kind"], "Pod");
  EXPECT_EQ(ev[1]["type"], "ADDED");
  EXPECT_EQ(ev[1]["object"]["metadata"]["name"], "p2");
}

TEST_F(FakeApiServerTest, WatchFiltersByNamespaceAndSelector) {
  auto w = watch("&resourceVersion=0&labelSelector=app%3Da");
  server_.create("/api/v1/namespaces/other/pods", pod("elsewhere", {{"app", "a"}}));
  create_pod(pod("b", {{"app", "b"}}));
  create_pod(pod("a", {{"app", "a"}}));
  ASSERT_TRUE(w->wait_lines(1));
  auto all = std::make_unique<WatchReader>(server_.url(), "/api/v1/pods?watch=1&resourceVersion=0");
  ASSERT_TRUE(all->wait_lines(3));
  auto ev = w->events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0]["object"]["metadata"]["name"], "a");
}

TEST_F(FakeApiServerTest, WatchIsNotCompressedWhenTheClientAcceptsCompression) {
  // httplib would hold compressed chunks back until the end of the body; the real one never compresses a
  // watch.
  WatchReader w(server_.url(), kPods + "?watch=true", {{"Accept-Encoding", "gzip, deflate, br"}});
  ASSERT_TRUE(wait_open_watches(1));
  create_pod(pod("p0"));
  ASSERT_TRUE(w.wait_lines(1));
  EXPECT_EQ(w.events()[0]["object"]["metadata"]["name"], "p0");
}

TEST_F(FakeApiServerTest, WatchFromACompactedVersionGets410ExpiredThenEnds) {
  create_pod(pod("p0"));
  auto old_rv = server_.resource_version();
  create_pod(pod("p1"));
  server_.compact();
  auto w = watch("&resourceVersion=" + std::to_string(old_rv));
  ASSERT_TRUE(w->wait_done());
  EXPECT_EQ(w->status(), 200);  // the real one answers 200 and one ERROR event
  EXPECT_TRUE(w->complete());
  auto ev = w->events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0]["type"], "ERROR");
  const auto& s = ev[0]["object"];
  EXPECT_EQ(s["kind"], "Status");
  EXPECT_EQ(s["status"], "Failure");
  EXPECT_EQ(s["reason"], "Expired");
  EXPECT_EQ(s["code"], 410);
  EXPECT_TRUE(
      std::regex_match(s["message"].get<std::string>(),
                       std::regex("too old resource version: " + std::to_string(old_rv) + R"( \(\d+\))")));
}

TEST_F(FakeApiServerTest, WatchFromBeforeTheBoundedHistoryGets410) {
  server_.set_history_limit(2);
  create_pod(pod("first"));  // a watch from "0" would start from now
  auto start = server_.resource_version();
  for (int i = 0; i < 4; ++i) create_pod(pod("p" + std::to_string(i)));
  auto w = watch("&resourceVersion=" + std::to_string(start));
  ASSERT_TRUE(w->wait_done());
  ASSERT_EQ(w->events().size(), 1u);
  EXPECT_EQ(w->events()[0]["object"]["code"], 410);
  auto recent = watch("&resourceVersion=" + std::to_string(server_.resource_version() - 1));
  ASSERT_TRUE(recent->wait_lines(1));
  EXPECT_EQ(recent->events()[0]["object"]["metadata"]["name"], "p3");
}

TEST_F(FakeApiServerTest, BookmarksOnlyWhenAskedForAndAnIntervalIsSet) {
  create_pod(pod("p0"));
  auto asked =
      watch("&resourceVersion=" + std::to_string(server_.resource_version()) + "&allowWatchBookmarks=true");
  auto not_asked = watch("&resourceVersion=" + std::to_string(server_.resource_version()));
  server_.set_bookmark_interval(50ms);
  ASSERT_TRUE(asked->wait_lines(2));
  auto ev = asked->events();
  EXPECT_EQ(ev[0]["type"], "BOOKMARK");
  EXPECT_EQ(ev[0]["object"]["kind"], "Pod");
  EXPECT_EQ(ev[0]["object"]["apiVersion"], "v1");
  EXPECT_EQ(ev[0]["object"]["metadata"]["resourceVersion"], std::to_string(server_.resource_version()));
  create_pod(pod("p1"));
  ASSERT_TRUE(not_asked->wait_lines(1));
  for (const auto& e : not_asked->events()) EXPECT_EQ(e["type"], "ADDED");
}

TEST_F(FakeApiServerTest, CutEndsTheStream) {
  auto w = watch("");
  create_pod(pod("p0"));
  ASSERT_TRUE(w->wait_lines(1));
  EXPECT_EQ(server_.open_watches(), 1);
  server_.cut_watches();
  ASSERT_TRUE(w->wait_done());
  EXPECT_FALSE(w->complete());  // closed without the end of the body
  EXPECT_TRUE(wait_open_watches(0));
}

TEST_F(FakeApiServerTest, TruncateDeliversHalfALineThenCloses) {
  auto w = watch("");
  create_pod(pod("p0"));
  ASSERT_TRUE(w->wait_lines(1));
  auto whole = w->raw().size();
  server_.truncate_watches();
  ASSERT_TRUE(w->wait_done());
  auto raw = w->raw();
  ASSERT_GT(raw.size(), whole);
  auto tail = raw.substr(whole);
  EXPECT_EQ(tail.find('\n'), std::string::npos);
  EXPECT_TRUE(json::parse(tail, nullptr, false).is_discarded());
  EXPECT_EQ(tail.rfind("{\"", 0), 0u);  // the start of an event
}

TEST_F(FakeApiServerTest, GarbageDeliversALineThatIsNotJsonAndKeepsTheStreamOpen) {
  auto w = watch("");
  ASSERT_TRUE(wait_open_watches(1));
  server_.garbage_watches();
  ASSERT_TRUE(w->wait_lines(1));
  EXPECT_TRUE(json::parse(w->lines()[0], nullptr, false).is_discarded());
  create_pod(pod("p0"));
  ASSERT_TRUE(w->wait_lines(2));
  EXPECT_EQ(json::parse(w->lines()[1])["type"], "ADDED");
  EXPECT_FALSE(w->done());
}

TEST_F(FakeApiServerTest, AHeldWatchLagsBehindWhatAGetReadsThenSendsEverythingInOrder) {
  auto w = watch("&allowWatchBookmarks=true");
  ASSERT_TRUE(wait_open_watches(1));
  server_.set_bookmark_interval(20ms);
  server_.hold_watches("pods", true);
  create_pod(pod("p0"));
  create_pod(pod("p1"));
  EXPECT_TRUE(server_.get("/api/v1/namespaces/default/pods/p0").is_object()) << "a GET reads it at once";
  std::this_thread::sleep_for(200ms);  // ten bookmark intervals: a held watch sends not even those
  EXPECT_TRUE(w->lines().empty()) << w->raw();
  server_.hold_watches("pods", false);
  ASSERT_TRUE(w->wait_lines(2));
  std::vector<std::string> added;
  for (const auto& e : w->events()) {
    if (e["type"] == "ADDED") added.push_back(e["object"]["metadata"]["name"]);
  }
  EXPECT_EQ(added, (std::vector<std::string>{"p0", "p1"}));
}

TEST_F(FakeApiServerTest, RestartJumpsTheVersionCutsWatchesAndForgetsTheHistory) {
  create_pod(pod("p0"));
  auto before = server_.resource_version();
  auto w = watch("&resourceVersion=" + std::to_string(before));
  ASSERT_TRUE(wait_open_watches(1));
  server_.restart(1000);
  ASSERT_TRUE(w->wait_done());
  EXPECT_EQ(server_.resource_version(), before + 1000);
  EXPECT_FALSE(server_.get(kPods + "/p0").is_null());
  auto old = watch("&resourceVersion=" + std::to_string(before));
  ASSERT_TRUE(old->wait_done());
  ASSERT_EQ(old->events().size(), 1u);
  EXPECT_EQ(old->events()[0]["object"]["code"], 410);
  EXPECT_EQ(body_of(cli_.Get(kPods.c_str()))["metadata"]["resourceVersion"], std::to_string(before + 1000));
}

TEST_F(FakeApiServerTest, TimeoutSecondsEndsTheWatch) {
  auto w = watch("&timeoutSeconds=1");
  ASSERT_TRUE(w->wait_done());
  EXPECT_TRUE(w->complete());
  EXPECT_EQ(w->status(), 200);
}

TEST_F(FakeApiServerTest, DestroyingTheServerEndsOpenWatches) {
  auto server = std::make_unique<FakeApiServer>();
  WatchReader w(server->url(), kPods + "?watch=true");
  auto deadline = std::chrono::steady_clock::now() + kWait;
  while (server->open_watches() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  ASSERT_EQ(server->open_watches(), 1);
  server.reset();
  EXPECT_TRUE(w.wait_done());
}

// ---- Faults and access -----------------------------------------------------------------------------------

TEST_F(FakeApiServerTest, FailNextAnswersTheNextRequestsWithThatStatus) {
  server_.fail_next(503, 2);
  expect_status(cli_.Get(kPods.c_str()), 503, "ServiceUnavailable");
  expect_status(post(kPods, pod("p0")), 503, "ServiceUnavailable");
  EXPECT_TRUE(server_.get(kPods + "/p0").is_null());
  auto r = cli_.Get(kPods.c_str());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(FakeApiServerTest, ATokenIsRequiredOnceSet) {
  server_.require_token("s3cret");
  expect_status(cli_.Get(kPods.c_str()), 401, "Unauthorized");
  expect_status(cli_.Get(kPods.c_str(), {{"Authorization", "Bearer wrong"}}), 401, "Unauthorized");
  auto r = cli_.Get(kPods.c_str(), {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(FakeApiServerTest, RecordsEveryRequest) {
  server_.clear_requests();
  merge_patch(kPods + "/p0?fieldManager=x", {{"a", 1}});
  auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].method, "PATCH");
  EXPECT_EQ(reqs[0].path, kPods + "/p0");
  EXPECT_EQ(reqs[0].query, "fieldManager=x");
  EXPECT_EQ(reqs[0].content_type, "application/merge-patch+json");
  EXPECT_EQ(reqs[0].body, R"({"a":1})");
}

TEST_F(FakeApiServerTest, DirectWritesAreWatchedLikeAnyOther) {
  server_.create(kPods, pod("first"));  // a watch from "0" would start from now
  auto w = watch("&resourceVersion=" + std::to_string(server_.resource_version()));
  server_.create(kPods, pod("p0"));
  auto p = server_.get(kPods + "/p0");
  p["metadata"]["labels"]["z"] = "1";
  server_.update(kPods + "/p0", p);
  EXPECT_TRUE(server_.remove(kPods + "/p0"));
  ASSERT_TRUE(w->wait_lines(3));
  auto ev = w->events();
  EXPECT_EQ(ev[0]["type"], "ADDED");
  EXPECT_EQ(ev[1]["type"], "MODIFIED");
  EXPECT_EQ(ev[2]["type"], "DELETED");
}

}  // namespace

namespace ascend::testing {
namespace {

// apimachinery's ValidateObjectMeta: names and generateName prefixes are DNS-1123 subdomains (a prefix may
// end in '-'); the real API server refuses "p0." (an Event named that way was refused by kube-apiserver
// v1.34).
TEST(FakeApiServerNames, NamesAndPrefixesAreSubdomainsAsTheRealOneChecks) {
  FakeApiServer s;
  httplib::Client c("127.0.0.1", s.port());
  auto post = [&](const nlohmann::json& meta) {
    auto r = c.Post("/api/v1/namespaces/default/configmaps", nlohmann::json{{"metadata", meta}}.dump(),
                    "application/json");
    return r ? r->status : -1;
  };
  EXPECT_EQ(post({{"generateName", "p0."}}), 422);
  EXPECT_EQ(post({{"name", "Bad_Name"}}), 422);
  EXPECT_EQ(post({{"name", "-x"}}), 422);
  EXPECT_EQ(post({{"generateName", "p0-"}}), 201);
  EXPECT_EQ(post({{"name", "p0.17a3b"}}), 201);
}

}  // namespace
}  // namespace ascend::testing

namespace ascend::testing {
namespace {

// ResourceSlices and the feature gate DRAPartitionableDevices, as kube-apiserver v1.34's
// pkg/registry/resource/resourceslice (dropDisabledDRAPartitionableDevicesFields) and
// pkg/apis/resource/validation (ValidateResourceSlice) have them.
nlohmann::json counted_slice(const std::string& name, const std::string& consumed_set) {
  return nlohmann::json::parse(R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice",
    "metadata":{"name":")" + name +
                               R"("},
    "spec":{"driver":"d.example.com","nodeName":"n","pool":{"name":"n","generation":1,"resourceSliceCount":1},
      "sharedCounters":[{"name":"chip-0","counters":{"cores":{"value":"8"}}}],
      "devices":[{"name":"part-0","consumesCounters":[{"counterSet":")" +
                               consumed_set + R"(","counters":{"cores":{"value":"4"}}}]}]}})");
}

TEST(FakeApiServerSlices, WithTheGateOffCountersAreDroppedSilentlyUnlessAlreadyInUse) {
  FakeApiServer s;
  httplib::Client c("127.0.0.1", s.port());
  const std::string slices = "/apis/resource.k8s.io/v1/resourceslices";
  auto r = c.Post(slices, counted_slice("on", "chip-0").dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201);
  auto on = nlohmann::json::parse(r->body);
  EXPECT_EQ(on["spec"]["sharedCounters"][0]["name"], "chip-0") << "kept while the gate is on";
  EXPECT_EQ(on["spec"]["devices"][0]["consumesCounters"][0]["counterSet"], "chip-0");

  s.set_partitionable_devices(false);
  r = c.Post(slices, counted_slice("off", "chip-0").dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201) << "no error: the fields are dropped";
  auto off = nlohmann::json::parse(r->body);
  EXPECT_FALSE(off["spec"].contains("sharedCounters"));
  EXPECT_FALSE(off["spec"]["devices"][0].contains("consumesCounters"));
  EXPECT_EQ(off["spec"]["devices"][0]["name"], "part-0");
  EXPECT_FALSE(s.get(slices + "/off")["spec"].contains("sharedCounters")) << "stored as answered";
  // An update of a slice that uses them already keeps them (the feature is in use in the old object).
  auto again = counted_slice("on", "chip-0");
  again["spec"]["sharedCounters"][0]["counters"]["cores"]["value"] = "16";
  r = c.Put(slices + "/on", again.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(nlohmann::json::parse(r->body)["spec"]["sharedCounters"][0]["counters"]["cores"]["value"], "16");
}

TEST(FakeApiServerSlices, WithTheGateOnCountersAreValidatedAsThe134ApiServerDoes) {
  FakeApiServer s;
  httplib::Client c("127.0.0.1", s.port());
  const std::string slices = "/apis/resource.k8s.io/v1/resourceslices";
  auto status = [&](const nlohmann::json& slice) {
    auto r = c.Post(slices, slice.dump(), "application/json");
    return r ? r->status : -1;
  };
  EXPECT_EQ(status(counted_slice("other-set", "chip-1")), 422) << "a counter set of its own slice only";
  auto unknown_counter = counted_slice("unknown-counter", "chip-0");
  unknown_counter["spec"]["devices"][0]["consumesCounters"][0]["counters"] = {{"memory", {{"value", "1"}}}};
  EXPECT_EQ(status(unknown_counter), 422);
  auto many = counted_slice("many-counters", "chip-0");
  for (int i = 1; i <= 32; ++i) {
    std::string counter = "c";
    counter += std::to_string(i);  // not "c" + to_string: GCC 12's -Wrestrict false positive
    many["spec"]["sharedCounters"][0]["counters"][counter] = {{"value", "1"}};
  }
  EXPECT_EQ(status(many), 422) << "33 shared counters in a slice";
  many["spec"]["sharedCounters"][0]["counters"].erase("c32");
  EXPECT_EQ(status(many), 201) << "32 are allowed";
  auto devices = counted_slice("many-devices", "chip-0");
  for (int i = 1; i <= 128; ++i) {
    std::string device = "d";
    device += std::to_string(i);
    devices["spec"]["devices"].push_back({{"name", device}});
  }
  EXPECT_EQ(status(devices), 422) << "129 devices";
}

}  // namespace
}  // namespace ascend::testing
