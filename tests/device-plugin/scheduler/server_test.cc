// `ascend-scheduler serve` over real HTTP on loopback: an httplib client against the real server, a recording
// HTTP peer standing in for the API server, and the binary itself for start-up, signals and TLS.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include "ascend/scheduler/server.h"
#include "eventually.h"
#include "extender_util.h"
#include "guarded_capture.h"
#include "held_port.h"
#include "run_command.h"
#include "test_clock.h"

namespace ascend::scheduler {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::job_pod;
using testing::plain_pod;
using testing::temp_dir;
using testing::write;

bool is_extender_verb(const std::string& path) {
  return path == "/filter" || path == "/prioritize" || path == "/bind";
}

// A server on free loopback ports (both listeners), served by a thread for the test's lifetime.
class Running {
 public:
  explicit Running(ServeOptions o, int nodes = 12, std::unique_ptr<Binder> binder = nullptr) {
    o.listen = "127.0.0.1:0";
    o.extender_listen = "127.0.0.1:0";
    auto s = Server::create(o, testing::small_cluster(nodes), std::move(binder));
    if (!s.ok()) {
      error = s.error().message();
      return;
    }
    server = std::move(*s);
    thread = std::thread([this] { (void)server->run(); });
    client = std::make_unique<httplib::Client>("127.0.0.1", server->port());
    extender = std::make_unique<httplib::Client>("127.0.0.1", server->extender_port());
  }
  ~Running() {
    if (server) server->stop();
    if (thread.joinable()) thread.join();
  }
  // kube-scheduler's verbs go to the extender listener, everything else to the plugins' (as in production).
  httplib::Client& client_for(const std::string& path) {
    return is_extender_verb(path) ? *extender : *client;
  }
  json post(const std::string& path, const json& body, int want = 200) {
    auto r = client_for(path).Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(r) << path;
    if (!r) return {};
    EXPECT_EQ(r->status, want) << path << ": " << r->body;
    return json::parse(r->body, nullptr, false);
  }
  json get(const std::string& path, int want = 200) {
    auto r = client->Get(path.c_str());
    EXPECT_TRUE(r) << path;
    if (!r) return {};
    EXPECT_EQ(r->status, want) << path << ": " << r->body;
    return json::parse(r->body, nullptr, false);
  }
  json names_args(const json& pod, const std::vector<std::string>& nodes) {
    return {{"Pod", pod}, {"NodeNames", nodes}};
  }

  std::unique_ptr<Server> server;
  std::thread thread;
  std::unique_ptr<httplib::Client> client;    // --listen
  std::unique_ptr<httplib::Client> extender;  // --extender-listen
  std::string error;
};

std::vector<std::string> node_names(int n) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.push_back("node-" + std::to_string(i));
  return v;
}

json full_nodes(int n) {
  json items = json::array();
  for (int i = 0; i < n; ++i) {
    items.push_back(
        {{"metadata", {{"name", "node-" + std::to_string(i)}, {"labels", {{"rack", std::to_string(i / 6)}}}}},
         {"status", {{"allocatable", {{"huawei.com/Ascend910", "8"}}}}}});
  }
  return {{"metadata", json::object()}, {"items", items}};
}

TEST(Serve, AnEightPodJobThroughFilterPrioritizeAndBindWithNodeNamesAndNodes) {
  Running s({});
  ASSERT_TRUE(s.server) << s.error;
  std::set<std::string> nodes_used;
  for (int i = 0; i < 8; ++i) {
    json pod = job_pod("train", i, 8, "tp=8,pp=4,dp=2");
    // Odd pods come with full Node objects, even ones with names only (nodeCacheCapable).
    json args =
        i % 2 == 1 ? json{{"Pod", pod}, {"Nodes", full_nodes(12)}} : s.names_args(pod, node_names(12));
    json f = s.post("/filter", args);
    std::string node;
    if (i % 2 == 1) {
      ASSERT_EQ(f["Nodes"]["items"].size(), 1U) << f.dump();
      node = f["Nodes"]["items"][0]["metadata"]["name"];
      EXPECT_EQ(f["Nodes"]["items"][0]["metadata"]["labels"]["rack"],
                std::to_string(std::stoi(node.substr(5)) / 6))
          << "the node object comes back as it was sent";
    } else {
      ASSERT_EQ(f["NodeNames"].size(), 1U) << f.dump();
      node = f["NodeNames"][0];
    }
    EXPECT_EQ(f["FailedAndUnresolvableNodes"].size(), 11U);
    EXPECT_TRUE(nodes_used.insert(node).second);
    json scores = s.post("/prioritize", s.names_args(pod, node_names(12)));
    ASSERT_EQ(scores.size(), 12U);
    for (const auto& h : scores) EXPECT_EQ(h["Score"], h["Host"] == node ? 10 : 0);
    json b = s.post("/bind", {{"PodName", "train-" + std::to_string(i)},
                              {"PodNamespace", "default"},
                              {"PodUID", "u" + std::to_string(i)},
                              {"Node", node}});
    EXPECT_EQ(b, json({{"Error", ""}}));
  }
  json view = s.get("/v1/cluster");
  EXPECT_EQ(view["chips"]["free"], 96 - 64);
  ASSERT_EQ(view["jobs"].size(), 1U);
  EXPECT_EQ(view["jobs"][0]["bound"], 8);
  json rt = s.get("/v1/jobs/default/train/ranktable");
  EXPECT_EQ(rt["server_count"], "8");
  json env = s.get("/v1/jobs/default/train/env?pod=5");
  EXPECT_EQ(env["RANK_START"], "40");
  EXPECT_EQ(env["NODE_RANK"], "5");
  s.get("/v1/jobs/default/nojob/placement", 404);
  // A second job of the same size no longer fits: every node fails, and nothing is reserved.
  json f2 = s.post("/filter", s.names_args(job_pod("other", 0, 8, "tp=8,pp=4,dp=2"), node_names(12)));
  EXPECT_TRUE(f2["NodeNames"].empty());
  EXPECT_EQ(f2["FailedNodes"].size(), 12U);
  EXPECT_EQ(s.get("/v1/cluster")["chips"]["free"], 32);
  // Release frees the chips, and the job is placed again.
  for (int i = 0; i < 8; ++i) {
    auto r = s.client->Delete(("/v1/pods/default/train-" + std::to_string(i)).c_str());
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
  }
  EXPECT_EQ(s.get("/v1/cluster")["chips"]["free"], 96);
  json f3 = s.post("/filter", s.names_args(job_pod("other", 0, 8, "tp=8,pp=4,dp=2"), node_names(12)));
  EXPECT_EQ(f3["NodeNames"].size(), 1U);
}

TEST(Serve, SinglePodsAndThePluginCalls) {
  Running s({});
  ASSERT_TRUE(s.server) << s.error;
  json f = s.post("/filter", s.names_args(plain_pod("solo", 3), {"node-0", "node-1"}));
  EXPECT_EQ(f["NodeNames"], json::array({"node-0", "node-1"}));
  json b = s.post("/bind", {{"PodName", "solo"}, {"PodNamespace", "default"}, {"Node", "node-1"}});
  EXPECT_EQ(b["Error"], "");
  json res = s.get("/v1/nodes/node-1/reservations");
  ASSERT_EQ(res["reservations"].size(), 1U);
  EXPECT_EQ(res["reservations"][0]["pod"], "solo");
  json chips = res["reservations"][0]["chips"];
  json g = s.post("/v1/nodes/node-1/allocations", {{"chips", chips}});
  EXPECT_EQ(g["pod"], "solo");
  EXPECT_EQ(g["env"], json::object());
  EXPECT_FALSE(g.contains("ranktable"));
  s.post("/v1/nodes/node-1/allocations", {{"chips", chips}}, 404);
  // Given back (the plugin's Allocate failed after taking it): the pod waits for the same chips again.
  s.post("/v1/nodes/node-1/allocations/return", {{"chips", chips}});
  EXPECT_EQ(s.get("/v1/nodes/node-1/reservations")["reservations"].size(), 1U);
  s.post("/v1/nodes/node-1/allocations/return", {{"chips", chips}}, 404);
  EXPECT_EQ(s.post("/v1/nodes/node-1/allocations", {{"chips", chips}})["pod"], "solo");
  // The plugin's inventory: node-0 reports 2 chips in use and 1 unhealthy.
  json inv = {{"resource", "huawei.com/Ascend910"}, {"chips", json::array()}};
  for (int p = 0; p < 8; ++p) inv["chips"].push_back({{"phy_id", p}, {"healthy", p != 7}, {"in_use", p < 2}});
  auto r = s.client->Put("/v1/nodes/node-0", inv.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  r = s.client->Put("/v1/nodes/ghost", inv.dump(), "application/json");
  EXPECT_EQ(r->status, 404);
  json f2 = s.post("/filter", s.names_args(plain_pod("big", 6), {"node-0"}));
  EXPECT_EQ(f2["FailedNodes"]["node-0"], "5 of 8 chips free (1 unhealthy, 2 in use); the pod needs 6");
  json b2 = s.post("/bind", {{"PodName", "stranger"}, {"Node", "node-0"}});
  EXPECT_NE(b2["Error"].get<std::string>().find("unknown"), std::string::npos);
}

// Every malformed request is a 400 with a JSON error and changes nothing.
TEST(Serve, MalformedInputIsRefusedAndChangesNothing) {
  ServeOptions o;
  o.max_body = 4096;
  Running s(o);
  ASSERT_TRUE(s.server) << s.error;
  s.post("/filter", s.names_args(job_pod("keep", 0, 8, "tp=8,dp=2"), node_names(12)));
  std::string before = s.client->Get("/v1/cluster")->body;
  std::string deep(200, '[');
  deep += std::string(200, ']');
  struct Case {
    std::string method, path, body, has;
  };
  std::vector<Case> cases = {
      {"POST", "/filter", "{not json", "not valid JSON"},
      {"POST", "/filter", "[]", "not a JSON object"},
      {"POST", "/filter", R"({"NodeNames": ["node-0"]})", "Pod: missing"},
      {"POST", "/filter", R"({"Pod": {"metadata": {"name": "a"}}})", "neither Nodes nor NodeNames"},
      {"POST", "/filter", R"({"Pod": {"metadata": {"name": 7}}, "NodeNames": []})", "not a string"},
      {"POST", "/filter", R"({"Pod": {"metadata": {"name": "a"}}, "NodeNames": [1]})",
       "NodeNames[0]: not a string"},
      {"POST", "/filter", R"({"Pod": {"metadata": {"name": "a"}}, "Nodes": {"items": [{}]}})",
       "metadata: missing"},
      {"POST", "/prioritize", R"({"Pod": 3, "NodeNames": []})", "not an object"},
      {"POST", "/bind", R"({"PodName": "a"})", "Node: missing"},
      {"POST", "/bind", R"({"PodName": ["a"], "Node": "n"})", "not a string"},
      {"POST", "/filter", deep, "deeper than"},
      {"POST", "/filter", "{\"Pod\": \"" + std::string(5000, 'x') + "\"}", "larger than the limit"},
      {"PUT", "/v1/nodes/node-0", R"({"chips": [{"phy_id": "0"}]})", "not a chip id"},
      {"PUT", "/v1/nodes/node-0", R"({"chips": [{"phy_id": 0, "healthy": "yes"}]})", "not true or false"},
      {"PUT", "/v1/nodes/node-0", R"({"chips": 3})", "chips: missing or not an array"},
      {"PUT", "/v1/nodes/node-0", R"({"chips": [{"phy_id": 0}, {"phy_id": 0}]})", "reported twice"},
      {"PUT", "/v1/nodes/node-0", R"({"chips": [{"phy_id": 0, "aicore_pct": 101}]})",
       "aicore_pct: not a whole number 0-100"},
      {"PUT", "/v1/nodes/node-0", R"({"chips": [{"phy_id": 0, "aicore_pct": 5.5}]})", "not a whole number"},
      {"PUT", "/v1/nodes/node-0", R"({"chips": [{"phy_id": 0, "hbm_used_mb": -1}]})", "not a whole number"},
      {"PUT", "/v1/nodes/node-0", R"({"chips": [{"phy_id": 0, "hbm_used_mb": 9, "hbm_total_mb": 8}]})",
       "more than hbm_total_mb"},
      {"POST", "/v1/nodes/node-0/allocations", R"({"chips": []})", "empty"},
      {"POST", "/v1/nodes/node-0/allocations", R"({"chips": [1, 1]})", "given twice"},
      {"GET", "/v1/jobs/default/keep/env?pod=x", "", "give ?pod=N"},
  };
  for (const auto& c : cases) {
    httplib::Result r = c.method == "POST"
                            ? s.client_for(c.path).Post(c.path.c_str(), c.body, "application/json")
                        : c.method == "PUT" ? s.client->Put(c.path.c_str(), c.body, "application/json")
                                            : s.client->Get(c.path.c_str());
    ASSERT_TRUE(r) << c.path;
    EXPECT_EQ(r->status, 400) << c.path << " " << c.body.substr(0, 80) << ": " << r->body;
    json e = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(e.is_object()) << r->body;
    EXPECT_NE(e.value("error", "").find(c.has), std::string::npos) << e.dump();
  }
  EXPECT_EQ(s.client->Get("/v1/cluster")->body, before);
}

TEST(Serve, ConcurrentPodsNeverShareAChip) {
  Running s({}, 4);
  ASSERT_TRUE(s.server) << s.error;
  std::atomic<int> bound{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      httplib::Client c("127.0.0.1", s.server->extender_port());
      for (int k = 0; k < 4; ++k) {
        std::string name = "p" + std::to_string(t) + "-" + std::to_string(k);
        json args = {{"Pod", plain_pod(name, 2)}, {"NodeNames", node_names(4)}};
        auto f = c.Post("/filter", args.dump(), "application/json");
        if (!f || f->status != 200) continue;
        json fj = json::parse(f->body);
        if (fj["NodeNames"].empty()) continue;
        json b = {{"PodName", name}, {"Node", fj["NodeNames"][0]}};
        auto r = c.Post("/bind", b.dump(), "application/json");
        if (r && json::parse(r->body)["Error"] == "") ++bound;
      }
    });
  }
  for (auto& t : threads) t.join();
  // 32 chips, 32 pods of 2: exactly 16 fit, and the ones that did hold distinct chips.
  EXPECT_EQ(bound.load(), 16);
  json view = s.get("/v1/cluster");
  EXPECT_EQ(view["chips"]["free"], 0);
  std::set<std::pair<std::string, int>> chips;
  int held = 0;
  for (const auto& p : view["pods"]) {
    for (const auto& c : p["chips"]) {
      ++held;
      chips.insert({p["node"].get<std::string>(), c.get<int>()});
    }
  }
  EXPECT_EQ(held, 32);
  EXPECT_EQ(chips.size(), 32U);
}

// The expirer runs on a test clock: each advance past its next pass (every ttl / 4) runs one pass, and
// settle() returns once that pass is done and the expirer waits again.
TEST(Serve, ReservationsExpireWhenNeverBound) {
  ascend::testing::TestClock clock;
  ServeOptions o;
  o.reservation_ttl = std::chrono::milliseconds(300);  // a pass every 75 ms
  o.clock = &clock;
  Running s(o, 2);
  ASSERT_TRUE(s.server) << s.error;
  ASSERT_TRUE(clock.settle(1));
  s.post("/filter", s.names_args(job_pod("t", 0, 8, "tp=8,dp=2"), node_names(2)));
  EXPECT_EQ(s.get("/v1/cluster")["chips"]["free"], 0);
  for (int pass = 1; pass <= 3; ++pass) {  // 75, 150, 225 ms: younger than the ttl
    clock.advance(std::chrono::milliseconds(75));
    ASSERT_TRUE(clock.settle(1));
    EXPECT_EQ(s.get("/v1/cluster")["chips"]["free"], 0) << "pass " << pass;
  }
  clock.advance(std::chrono::milliseconds(100));  // 325 ms
  ASSERT_TRUE(clock.settle(1));
  EXPECT_EQ(s.get("/v1/cluster")["chips"]["free"], 16);
  EXPECT_TRUE(s.get("/v1/cluster")["jobs"].empty());
}

// The expirer outlives a pass that throws: one line, and the next pass expires the reservation on time.
TEST(Serve, AnExpiryPassThatThrowsIsLoggedAndTheNextPassExpires) {
  ascend::testing::GuardedCapture cap;
  ascend::testing::TestClock clock;
  auto passes = std::make_shared<std::atomic<int>>(0);
  ServeOptions o;
  o.reservation_ttl = std::chrono::milliseconds(300);  // a pass every 75 ms
  o.clock = &clock;
  o.test_hooks.expiry_pass = [passes] {
    if (++*passes <= 3) throw std::runtime_error("expiry bug");
  };
  Running s(o, 2);
  ASSERT_TRUE(s.server) << s.error;
  ASSERT_TRUE(clock.settle(1));
  s.post("/filter", s.names_args(job_pod("t", 0, 8, "tp=8,dp=2"), node_names(2)));
  for (int pass = 1; pass <= 3; ++pass) {  // 100, 200 and 300 ms: the third would expire it, but throws
    clock.advance(std::chrono::milliseconds(100));
    ASSERT_TRUE(clock.settle(1));
    EXPECT_EQ(passes->load(), pass);
    EXPECT_EQ(s.get("/v1/cluster")["chips"]["free"], 0) << "pass " << pass;
  }
  clock.advance(std::chrono::milliseconds(100));
  ASSERT_TRUE(clock.settle(1));
  EXPECT_EQ(s.get("/v1/cluster")["chips"]["free"], 16) << "the next pass expired the reservation";
  EXPECT_EQ(
      cap.errors_with("reservation expiry: internal error: expiry bug (please report it); the next pass "
                      "runs on time")
          .size(),
      1U)
      << "the same text three times is said once";
}

// A listener's thread that throws cannot carry on: the server stops with the reason (serve exits non-zero).
TEST(Serve, AListenerThreadThatThrowsStopsTheServerWithTheReason) {
  ascend::testing::GuardedCapture cap;
  ServeOptions o;
  o.listen = "127.0.0.1:0";
  o.extender_listen = "127.0.0.1:0";
  o.test_hooks.extender_listener = [] { throw std::runtime_error("listener bug"); };
  auto s = Server::create(o, testing::small_cluster(2), nullptr);
  ASSERT_TRUE(s.ok()) << s.error().message();
  Status st = (*s)->run();  // returns (a server left running would hang the test)
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(), "the extender listener's thread threw (logged above)");
  EXPECT_EQ(
      cap.errors_with("extender listener: internal error: listener bug (please report it); stopping the "
                      "scheduler")
          .size(),
      1U);
}

TEST(Serve, ATokenGuardsThePluginAndReleaseEndpoints) {
  std::string dir = temp_dir("token");
  write(dir + "/token", "s3cret\n");
  ServeOptions o;
  o.token_file = dir + "/token";
  Running s(o, 2);
  ASSERT_TRUE(s.server) << s.error;
  json inv = {{"chips", json::array({{{"phy_id", 0}}})}};
  EXPECT_EQ(s.client->Put("/v1/nodes/node-0", inv.dump(), "application/json")->status, 401);
  EXPECT_EQ(s.client->Get("/v1/nodes/node-0/reservations")->status, 401);
  EXPECT_EQ(s.client->Delete("/v1/pods/default/x")->status, 401);
  httplib::Headers wrong = {{"Authorization", "Bearer s3cre"}};
  EXPECT_EQ(s.client->Get("/v1/nodes/node-0/reservations", wrong)->status, 401);
  httplib::Headers right = {{"Authorization", "Bearer s3cret"}};
  EXPECT_EQ(s.client->Get("/v1/nodes/node-0/reservations", right)->status, 200);
  EXPECT_EQ(s.client->Put("/v1/nodes/node-0", right, inv.dump(), "application/json")->status, 200);
  EXPECT_EQ(s.client->Get("/v1/cluster")->status, 401) << "the views need the token too";
  EXPECT_EQ(s.client->Get("/")->status, 401) << "and so does the dashboard";
  EXPECT_EQ(s.client->Get("/v1/cluster", right)->status, 200);
  EXPECT_EQ(s.client->Get("/healthz")->status, 200) << "health, readiness and metrics stay open";
  // Ready once both listeners' loops run (the extender's may start a moment after this one answers).
  EXPECT_TRUE(ascend::testing::eventually([&] {
    auto r = s.client->Get("/readyz");
    return r && r->status == 200;
  }));
  EXPECT_EQ(s.client->Get("/metrics")->status, 200);
  EXPECT_EQ(s.extender->Get("/v1/cluster")->status, 200)
      << "the extender listener (loopback only) shows the views without a token";
  fs::remove_all(dir);
}

// An address of this host that is not loopback, or "" when it has none.
std::string outside_address() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* a = list; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET || (a->ifa_flags & IFF_LOOPBACK) != 0)
      continue;
    char buf[INET_ADDRSTRLEN];
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf) != nullptr) found = buf;
  }
  freeifaddrs(list);
  return found;
}

TEST(Serve, WithoutATokenThePluginEndpointsRefuseAPeerThatIsNotLoopback) {
  std::string addr = outside_address();
  if (addr.empty()) GTEST_SKIP() << "this host has no IPv4 address other than loopback";
  ServeOptions o;
  o.listen = "0.0.0.0:0";
  o.extender_listen = "127.0.0.1:0";
  auto srv = Server::create(o, testing::small_cluster(1), nullptr);
  ASSERT_TRUE(srv.ok()) << srv.error().message();
  std::thread t([&] { (void)(*srv)->run(); });
  httplib::Client outside(addr, (*srv)->port());
  json inv = {{"chips", json::array({{{"phy_id", 0}}})}};
  auto r = outside.Put("/v1/nodes/node-0", inv.dump(), "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 403) << r->body;
  EXPECT_EQ(outside.Get("/v1/nodes/node-0/reservations")->status, 403);
  EXPECT_EQ(outside.Get("/healthz")->status, 200) << "the open endpoints answer anyone";
  httplib::Client local("127.0.0.1", (*srv)->port());
  EXPECT_EQ(local.Get("/v1/nodes/node-0/reservations")->status, 200);
  (*srv)->stop();
  t.join();
}

// A port another socket listens on (with SO_REUSEPORT, as cpp-httplib's own listeners set it by default) is
// refused on either listener: a second scheduler, or another process, must not share a listener's
// connections.
TEST(Serve, APortAnotherListenerHoldsIsRefused) {
  const ascend::testing::HeldPort other;
  ASSERT_TRUE(other.ok());
  const std::string held = other.address();
  for (const bool extender : {false, true}) {
    ServeOptions o;
    o.listen = extender ? "127.0.0.1:0" : held;
    o.extender_listen = extender ? held : "127.0.0.1:0";
    auto s = Server::create(o, testing::small_cluster(1), nullptr);
    ASSERT_FALSE(s.ok()) << (extender ? "--extender-listen " : "--listen ") << held << " was shared";
    EXPECT_EQ(s.error().code(), EADDRINUSE);
    EXPECT_EQ(s.error().message(), std::string("cannot listen on ") +
                                       (extender ? "--extender-listen " : "--listen ") + held +
                                       " (in use, or not an address of this host)");
  }
}

TEST(Serve, MetricsCountRequestsAndChips) {
  Running s({}, 2);
  ASSERT_TRUE(s.server) << s.error;
  s.post("/filter", s.names_args(job_pod("t", 0, 8, "tp=8"), node_names(2)));
  s.post("/filter", s.names_args(job_pod("u", 0, 8, "tp=8,dp=4"), node_names(2)));
  std::string m = s.client->Get("/metrics")->body;
  for (const char* want :
       {"ascend_scheduler_requests_total{code=\"2xx\",verb=\"filter\"} 2",
        "ascend_scheduler_chips{state=\"free\"} 8", "ascend_scheduler_chips{state=\"used\"} 8",
        "ascend_scheduler_jobs_total{outcome=\"placed\"} 1",
        "ascend_scheduler_jobs_total{outcome=\"refused\"} 1", "ascend_scheduler_jobs{state=\"pending\"} 1",
        "ascend_scheduler_request_duration_seconds_count{verb=\"filter\"} 2"}) {
    EXPECT_NE(m.find(want), std::string::npos) << want << "\n" << m;
  }
}

// A recording peer in place of the API server.
class FakeApiServer {
 public:
  explicit FakeApiServer(int status) {
    srv.Post(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding)",
             [this, status](const httplib::Request& q, httplib::Response& r) {
               std::lock_guard lock(mu);
               bodies.push_back(json::parse(q.body, nullptr, false));
               paths.push_back(q.path);
               auth.push_back(q.get_header_value("Authorization"));
               r.status = status;
               r.set_content(status == 201 ? R"({"kind":"Status","status":"Success"})"
                                           : R"({"kind":"Status","message":"pods \"x\" is forbidden"})",
                             "application/json");
             });
    port = srv.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { srv.listen_after_bind(); });
    while (!srv.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeApiServer() {
    srv.stop();
    thread.join();
  }
  httplib::Server srv;
  int port = 0;
  std::thread thread;
  std::mutex mu;
  std::vector<json> bodies;
  std::vector<std::string> paths, auth;
};

TEST(Serve, BindCreatesTheBindingInTheApiServer) {
  FakeApiServer api(201);
  std::string dir = temp_dir("kube");
  write(dir + "/kt", "kube-token\n");
  auto binder = make_kube_binder("http://127.0.0.1:" + std::to_string(api.port), dir + "/kt", "");
  ASSERT_TRUE(binder.ok());
  Running s({}, 2, std::move(*binder));
  ASSERT_TRUE(s.server) << s.error;
  s.post("/filter", s.names_args(plain_pod("web-0", 1, "huawei.com/Ascend910", "ml"), node_names(2)));
  json b = s.post("/bind",
                  {{"PodName", "web-0"}, {"PodNamespace", "ml"}, {"PodUID", "abc-123"}, {"Node", "node-1"}});
  EXPECT_EQ(b["Error"], "");
  std::lock_guard lock(api.mu);
  ASSERT_EQ(api.bodies.size(), 1U);
  EXPECT_EQ(api.paths[0], "/api/v1/namespaces/ml/pods/web-0/binding");
  EXPECT_EQ(api.auth[0], "Bearer kube-token");
  json want = {{"apiVersion", "v1"},
               {"kind", "Binding"},
               {"metadata", {{"name", "web-0"}, {"namespace", "ml"}, {"uid", "abc-123"}}},
               {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", "node-1"}}}};
  EXPECT_EQ(api.bodies[0], want);
  fs::remove_all(dir);
}

TEST(Serve, AFailedBindingIsAnErrorAndGivesTheChipsBack) {
  FakeApiServer api(403);
  auto binder = make_kube_binder("http://127.0.0.1:" + std::to_string(api.port), "", "");
  ASSERT_TRUE(binder.ok());
  Running s({}, 1, std::move(*binder));
  ASSERT_TRUE(s.server) << s.error;
  s.post("/filter", s.names_args(plain_pod("p", 8), {"node-0"}));
  json b = s.post("/bind", {{"PodName", "p"}, {"Node", "node-0"}});
  EXPECT_NE(b["Error"].get<std::string>().find("HTTP 403"), std::string::npos) << b.dump();
  EXPECT_EQ(s.get("/v1/cluster")["chips"]["free"], 8);
  EXPECT_TRUE(s.get("/v1/nodes/node-0/reservations")["reservations"].empty());
}

TEST(Serve, ReservationsAndBindingsSurviveARestartAndACorruptStateIsRefused) {
  std::string dir = temp_dir("state");
  ServeOptions o;
  o.state = dir + "/state.json";
  std::string placement;
  {
    Running s(o);
    ASSERT_TRUE(s.server) << s.error;
    json f = s.post("/filter", s.names_args(job_pod("t", 0, 8, "tp=8,dp=2"), node_names(12)));
    s.post("/bind", {{"PodName", "t-0"}, {"Node", f["NodeNames"][0]}});
    placement = s.client->Get("/v1/jobs/default/t/placement")->body;
  }
  ASSERT_TRUE(fs::exists(o.state));
  EXPECT_EQ(fs::status(o.state).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  {
    Running s(o);
    ASSERT_TRUE(s.server) << s.error;
    EXPECT_EQ(s.client->Get("/v1/jobs/default/t/placement")->body, placement);
    EXPECT_EQ(s.get("/v1/cluster")["chips"]["free"], 96 - 16);
  }
  std::string good;
  {
    std::ifstream in(o.state);
    good.assign(std::istreambuf_iterator<char>(in), {});
  }
  write(o.state, good.substr(0, good.size() / 2));
  Running bad(o);
  EXPECT_FALSE(bad.server);
  EXPECT_EQ(bad.error, "state file " + o.state + " is not valid JSON; move it away to start empty");
  fs::remove_all(dir);
}

// ---- the binary ---------------------------------------------------------------------------------------

struct Child {
  pid_t pid = -1;
  int out = -1;
};

// Starts `ascend-scheduler serve ...` (on a free loopback extender port unless the args give one) and reads
// its "serving <url>" and "extender <url>" lines.
Child start_binary(const std::vector<std::string>& args, std::string& url, std::string* ext_url = nullptr) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    std::vector<std::string> all = {std::string(ASCEND_BIN_DIR) + "/ascend-scheduler", "serve"};
    all.insert(all.end(), args.begin(), args.end());
    if (std::find(args.begin(), args.end(), "--extender-listen") == args.end()) {
      all.insert(all.end(), {"--extender-listen", "127.0.0.1:0"});
    }
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  auto read_line = [&] {
    std::string line;
    char c = 0;
    while (read(fds[0], &c, 1) == 1 && c != '\n') line += c;
    return line;
  };
  auto after = [](const std::string& line, const std::string& word) {
    auto at = line.find(word);
    return at == std::string::npos ? std::string() : line.substr(at + word.size());
  };
  url = after(read_line(), "serving ");
  std::string ext = after(read_line(), "extender ");
  if (ext_url != nullptr) *ext_url = ext;
  return {pid, fds[0]};
}

int stop_binary(Child& c) {
  kill(c.pid, SIGTERM);
  int status = 0;
  waitpid(c.pid, &status, 0);
  close(c.out);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string cluster_file(const std::string& dir) {
  std::string path = dir + "/cluster.yaml";
  write(path,
        "name: t\nnodes:\n  - {name: node-0, profile: atlas800t-a2, leaf: leaf-0}\n"
        "  - {name: node-1, profile: atlas800t-a2, leaf: leaf-0}\n");
  return path;
}

TEST(ServeBinary, ServesUntilSigtermAndExitsCleanly) {
  std::string dir = temp_dir("bin");
  std::string url;
  std::string ext_url;
  Child c = start_binary({"--cluster", cluster_file(dir), "--listen", "127.0.0.1:0"}, url, &ext_url);
  ASSERT_EQ(url.rfind("http://127.0.0.1:", 0), 0U) << url;
  ASSERT_EQ(ext_url.rfind("http://127.0.0.1:", 0), 0U) << ext_url;
  EXPECT_NE(url, ext_url);
  httplib::Client cli(url);
  auto r = cli.Get("/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "ok\n");
  // Ready once both listeners' loops run: the URLs are printed when the sockets are bound, a moment before
  // (a /readyz in between says "not ready": it failed so under load in a Release run).
  std::string ready;
  for (int i = 0; i < 500 && ready != "ready\n"; ++i) {
    auto q = cli.Get("/readyz");
    ready = q ? q->body : "";
    if (ready != "ready\n") std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(ready, "ready\n");
  httplib::Client ext(ext_url);
  EXPECT_EQ(ext.Get("/readyz")->status, 200);
  json args = {{"Pod", plain_pod("p", 1)}, {"NodeNames", {"node-0"}}};
  EXPECT_EQ(ext.Post("/filter", args.dump(), "application/json")->status, 200);
  EXPECT_EQ(cli.Post("/filter", args.dump(), "application/json")->status, 404)
      << "not on the plugins' listener";
  EXPECT_EQ(stop_binary(c), 0);
  fs::remove_all(dir);
}

TEST(ServeBinary, BadInputIsOneLineAndExitCodeTwo) {
  std::string dir = temp_dir("bad");
  std::string cluster = cluster_file(dir);
  write(dir + "/state.json", "{\"schema\": 1, \"jobs\": 5}");
  struct Case {
    std::vector<std::string> args;
    std::string has;
  };
  std::vector<Case> cases = {
      {{"--cluster", dir + "/none.yaml"}, "none.yaml"},
      {{"--cluster", cluster, "--state", dir + "/state.json"}, "state file " + dir + "/state.json: "},
      {{"--cluster", cluster, "--listen", "nowhere"}, "--listen nowhere: give HOST:PORT"},
      {{"--cluster", cluster, "--tls-cert", dir + "/c.pem"}, "give both --tls-cert and --tls-key"},
      {{"--cluster", cluster, "--token-file", dir + "/none"}, "--token-file"},
      {{"--cluster", cluster, "--kube-api", "ftp://x"}, "must start with http:// or https://"},
      {{"--cluster", cluster, "--kubeconfig", dir + "/no-kubeconfig"}, dir + "/no-kubeconfig"},
      {{"--cluster", cluster, "--extender-listen", "0.0.0.0:0"},
       "--extender-listen 0.0.0.0:0: the extender verbs reserve chips and create Bindings; serve them on a "
       "loopback address"},
      {{"--cluster", cluster, "--extender-listen", "[::]:0"}, "--extender-listen [::]:0: the extender verbs"},
      {{"--cluster", cluster, "--extender-tls-cert", dir + "/c.pem", "--extender-tls-key", dir + "/k.pem"},
       "give --extender-tls-cert, --extender-tls-key and --extender-client-ca together"},
      {{"--cluster", cluster, "--extender-listen", "127.0.0.1:x"}, "--extender-listen 127.0.0.1:x: the port"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv = {std::string(ASCEND_BIN_DIR) + "/ascend-scheduler", "serve"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    auto r = ascend::testing::run_command(argv);
    EXPECT_EQ(r.exit_code, 2) << c.has << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(c.has), std::string::npos) << r.err;
  }
  fs::remove_all(dir);
}

TEST(ServeBinary, ServesHttpsWithTheGivenCertificate) {
  std::string dir = temp_dir("tls");
  auto gen = ascend::testing::run_command({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                                           "-days", "1", "-subj", "/CN=127.0.0.1", "-keyout",
                                           dir + "/key.pem", "-out", dir + "/cert.pem"});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  std::string url;
  Child c = start_binary({"--cluster", cluster_file(dir), "--listen", "127.0.0.1:0", "--tls-cert",
                          dir + "/cert.pem", "--tls-key", dir + "/key.pem"},
                         url);
  ASSERT_EQ(url.rfind("https://127.0.0.1:", 0), 0U) << url;
  httplib::Client cli(url);
  cli.set_ca_cert_path((dir + "/cert.pem").c_str());
  cli.enable_server_certificate_verification(
      false);  // CN-only test certificate; TLS itself is what is checked
  auto r = cli.Get("/healthz");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->body, "ok\n");
  httplib::Client plain("http://" + url.substr(8));
  EXPECT_FALSE(plain.Get("/healthz")) << "plain HTTP is not served on the TLS port";
  EXPECT_EQ(stop_binary(c), 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ascend::scheduler
