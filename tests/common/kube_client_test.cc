// The Kubernetes API client and informer (kube_client.h): configuration from files and the environment, the
// error mapping, and requests, streams and the informer against the API server stand-in (fake_apiserver.h)
// with its faults: cut, truncated and garbage watches, compaction (410 Gone), a restart, failing requests.
#include "ascend/common/kube_client.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <chrono>
#include <fstream>
#include <mutex>
#include <regex>
#include <thread>

#include "fake_apiserver.h"
#include "test_dir.h"

namespace ascend::kube {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using testing::FakeApiServer;
using testing::TempDir;

void write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

// Polls `pred` until it holds; generous, since the machine is shared.
template <typename Pred>
bool eventually(Pred pred, milliseconds limit = milliseconds(30'000)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return pred();
}

// ---- configuration --------------------------------------------------------------------------------------

class EnvGuard {
 public:
  EnvGuard(const char* host, const char* port) {
    set("KUBERNETES_SERVICE_HOST", host);
    set("KUBERNETES_SERVICE_PORT", port);
  }
  ~EnvGuard() {
    ::unsetenv("KUBERNETES_SERVICE_HOST");
    ::unsetenv("KUBERNETES_SERVICE_PORT");
  }

 private:
  static void set(const char* k, const char* v) {
    if (v == nullptr) {
      ::unsetenv(k);
    } else {
      ::setenv(k, v, 1);
    }
  }
};

TEST(KubeConfig, InClusterReadsTheServiceAccount) {
  TempDir sa;
  write(sa / "token", "tok-123\n");
  write(sa / "ca.crt", "PEM");
  write(sa / "namespace", "kube-system\n");
  EnvGuard env("10.96.0.1", "443");
  auto c = in_cluster_config(sa.path());
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->server, "https://10.96.0.1:443");
  EXPECT_EQ(c->token, "tok-123");
  EXPECT_EQ(c->token_file, sa / "token");
  EXPECT_EQ(c->ca_file, sa / "ca.crt");
  EXPECT_EQ(c->ns, "kube-system");
  EXPECT_EQ(c->source, "in-cluster");
}

TEST(KubeConfig, InClusterBracketsAnIPv6Host) {
  TempDir sa;
  write(sa / "token", "t");
  EnvGuard env("fd00:10:96::1", "6443");
  auto c = in_cluster_config(sa.path());
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->server, "https://[fd00:10:96::1]:6443");
  EXPECT_EQ(c->ns, "default");  // no namespace file
}

TEST(KubeConfig, InClusterOutsideAClusterIsENOENT) {
  EnvGuard env(nullptr, nullptr);
  auto c = in_cluster_config("/nonexistent");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), ENOENT);
}

TEST(KubeConfig, InClusterWithoutATokenFails) {
  TempDir sa;
  EnvGuard env("10.0.0.1", "443");
  auto c = in_cluster_config(sa.path());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find(sa / "token"), std::string::npos) << c.error().message();
}

// "aGVsbG8gY2E=" is base64 of "hello ca", "Y2VydA==" of "cert", "a2V5" of "key" (RFC 4648 by hand).
constexpr const char* kDataKubeconfig = R"(apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: c1
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority-data: aGVsbG8gY2E=
- name: c2
  cluster:
    server: http://127.0.0.1:8080
    insecure-skip-tls-verify: true
users:
- name: u1
  user:
    token: abc
    client-certificate-data: Y2VydA==
    client-key-data: a2V5
- name: u2
  user:
    tokenFile: secrets/token
contexts:
- name: dev
  context: {cluster: c1, user: u1, namespace: team-a}
- name: local
  context: {cluster: c2, user: u2}
- name: lost-user
  context: {cluster: c1, user: ghost}
)";

TEST(KubeConfig, KubeconfigDataForms) {
  TempDir d;
  write(d / "config", kDataKubeconfig);
  auto c = load_kubeconfig(d / "config");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->server, "https://10.0.0.1:6443");
  EXPECT_EQ(c->ca_data, "hello ca");
  EXPECT_EQ(c->client_cert_data, "cert");
  EXPECT_EQ(c->client_key_data, "key");
  EXPECT_EQ(c->token, "abc");
  EXPECT_EQ(c->ns, "team-a");
  EXPECT_FALSE(c->insecure_skip_tls_verify);
  EXPECT_EQ(c->source, "kubeconfig " + (d / "config") + " (context dev)");
}

TEST(KubeConfig, KubeconfigGivenContextAndRelativeTokenFile) {
  TempDir d;
  write(d / "config", kDataKubeconfig);
  std::filesystem::create_directory(d / "secrets");
  write(d / "secrets/token", "from-file\n");
  auto c = load_kubeconfig(d / "config", "local");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->server, "http://127.0.0.1:8080");
  EXPECT_TRUE(c->insecure_skip_tls_verify);
  EXPECT_EQ(c->token, "from-file");
  EXPECT_EQ(c->token_file, d / "secrets/token");
  EXPECT_EQ(c->ns, "default");
}

TEST(KubeConfig, KubeconfigFileFormsRelativeToItsFolder) {
  TempDir d;
  write(d / "config", R"(current-context: x
clusters: [{name: c, cluster: {server: "https://[fd00::1]:6443", certificate-authority: pki/ca.crt}}]
users: [{name: u, user: {client-certificate: pki/u.crt, client-key: /abs/u.key}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
)");
  auto c = load_kubeconfig(d / "config");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->ca_file, d / "pki/ca.crt");
  EXPECT_EQ(c->client_cert_file, d / "pki/u.crt");
  EXPECT_EQ(c->client_key_file, "/abs/u.key");
  EXPECT_TRUE(c->ca_data.empty());
}

TEST(KubeConfig, KubeconfigErrorsNameTheFileAndField) {
  TempDir d;
  const std::string path = d / "config";
  write(path, kDataKubeconfig);
  struct Case {
    std::string context, message;
  } cases[] = {
      {"nope", "kubeconfig " + path + ": no context named \"nope\" in contexts"},
      {"lost-user",
       "kubeconfig " + path + ": context \"lost-user\" names user \"ghost\" that is not in users"},
  };
  for (const auto& k : cases) {
    auto c = load_kubeconfig(path, k.context);
    ASSERT_FALSE(c.ok()) << k.context;
    EXPECT_EQ(c.error().code(), EINVAL);
    EXPECT_EQ(c.error().message(), k.message);
  }
}

TEST(KubeConfig, KubeconfigBadFields) {
  TempDir d;
  struct Case {
    std::string yaml, needle;
  } cases[] = {
      {"clusters: [{name: c, cluster: {server: https://a, certificate-authority-data: '!!!'}}]\n"
       "contexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n",
       "certificate-authority-data is not base64"},
      {"contexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n",
       "context \"x\" names cluster \"c\" that is not in clusters"},
      {"clusters: [{name: c, cluster: {server: ftp://a}}]\ncontexts: [{name: x, context: {cluster: c}}]\n"
       "current-context: x\n",
       "must start with https:// or http://"},
      {"clusters: [{name: c, cluster: {server: https://a}}]\ncontexts: [{name: x, context: {cluster: c}}]\n",
       "no current-context"},
      {"clusters: [{name: c, cluster: {server: https://a, insecure-skip-tls-verify: maybe}}]\n"
       "contexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n",
       "insecure-skip-tls-verify must be true or false"},
  };
  for (const auto& k : cases) {
    write(d / "config", k.yaml);
    auto c = load_kubeconfig(d / "config");
    ASSERT_FALSE(c.ok()) << k.yaml;
    EXPECT_NE(c.error().message().find(k.needle), std::string::npos) << c.error().message();
    EXPECT_NE(c.error().message().find(d / "config"), std::string::npos) << c.error().message();
  }
}

TEST(KubeConfig, UrlConfig) {
  TempDir d;
  write(d / "token", "t0\n");
  auto c = url_config("http://127.0.0.1:8080", d / "token", "");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->token, "t0");
  EXPECT_EQ(c->source, "--kube-api http://127.0.0.1:8080");
  EXPECT_EQ(url_config("ftp://x", "", "").error().code(), EINVAL);
  EXPECT_FALSE(url_config("https://x", "", d / "missing-ca").ok());
}

ConfigFlags flags(std::string kubeconfig, std::string api_url, bool in_cluster_default = true) {
  ConfigFlags f;
  f.kubeconfig = std::move(kubeconfig);
  f.api_url = std::move(api_url);
  f.in_cluster_default = in_cluster_default;
  return f;
}

TEST(KubeConfig, ResolvePrecedence) {
  TempDir d;
  write(d / "config", kDataKubeconfig);
  EnvGuard env(nullptr, nullptr);
  auto both = resolve_config(flags(d / "config", "http://127.0.0.1:1"));
  ASSERT_TRUE(both.ok() && both->has_value());
  EXPECT_EQ((*both)->server, "https://10.0.0.1:6443");  // --kubeconfig wins
  auto url = resolve_config(flags("", "http://127.0.0.1:1"));
  ASSERT_TRUE(url.ok() && url->has_value());
  EXPECT_EQ((*url)->server, "http://127.0.0.1:1");
  auto none = resolve_config({});  // in-cluster by default, but not in a cluster
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto off = resolve_config(flags("", "", false));
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->has_value());
  EXPECT_FALSE(resolve_config(flags(d / "missing", "")).ok());
}

// ---- errno, paths, keys -----------------------------------------------------------------------------

TEST(KubeErrno, Table) {
  struct Case {
    int status;
    const char* reason;
    int code;
  } cases[] = {{400, "BadRequest", EINVAL},
               {422, "Invalid", EINVAL},
               {401, "Unauthorized", EACCES},
               {403, "Forbidden", EACCES},
               {404, "NotFound", ENOENT},
               {405, "MethodNotAllowed", ENOTSUP},
               {409, "AlreadyExists", EEXIST},
               {409, "Conflict", EAGAIN},
               {410, "Expired", ESTALE},
               {429, "TooManyRequests", EBUSY},
               {500, "InternalError", EIO},
               {503, "ServiceUnavailable", EIO},
               {418, "", EIO}};
  for (const auto& k : cases)
    EXPECT_EQ(kube_errno(k.status, k.reason), k.code) << k.status << " " << k.reason;
}

TEST(KubePaths, EscapeAndPathOf) {
  EXPECT_EQ(escape("a-b.c_d~9"), "a-b.c_d~9");
  EXPECT_EQ(escape("app=a,tier!=b c/d"), "app%3Da%2Ctier%21%3Db%20c%2Fd");
  EXPECT_EQ(path_of("v1", "pods"), "/api/v1/pods");
  EXPECT_EQ(path_of("v1", "pods", "default"), "/api/v1/namespaces/default/pods");
  EXPECT_EQ(path_of("v1", "pods", "default", "p0", "binding"), "/api/v1/namespaces/default/pods/p0/binding");
  EXPECT_EQ(path_of("v1", "nodes", "", "n/1"), "/api/v1/nodes/n%2F1");
  EXPECT_EQ(path_of("events.k8s.io/v1", "events", "ns"), "/apis/events.k8s.io/v1/namespaces/ns/events");
}

TEST(KubePaths, KeyOf) {
  EXPECT_EQ(key_of(json{{"metadata", {{"name", "p"}, {"namespace", "n"}}}}), "n/p");
  EXPECT_EQ(key_of(json{{"metadata", {{"name", "node1"}}}}), "node1");
  EXPECT_EQ(key_of(json{{"metadata", {{"name", 3}}}}), "");
  EXPECT_EQ(key_of(json::array()), "");
}

// ---- the client against the stand-in ----------------------------------------------------------------

const std::string kPods = "/api/v1/namespaces/default/pods";

json pod(const std::string& name, json labels = json::object()) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "default"}, {"labels", labels}}},
          {"spec", {{"containers", json::array({{{"name", "c"}, {"image", "busybox"}}})}}}};
}

Config config_for(const FakeApiServer& s) {
  Config c;
  c.server = s.url();
  c.source = "test";
  return c;
}

TEST(KubeClient, GetCreateAndErrors) {
  FakeApiServer s;
  Client c(config_for(s));
  auto created = c.create(kPods, pod("p0"));
  ASSERT_TRUE(created.ok()) << created.error().message();
  EXPECT_FALSE((*created)["metadata"]["uid"].get<std::string>().empty());
  auto got = c.get(kPods + "/p0");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)["metadata"]["resourceVersion"], (*created)["metadata"]["resourceVersion"]);
  auto again = c.create(kPods, pod("p0"));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), EEXIST);
  EXPECT_TRUE(again.error().message().starts_with("POST " + kPods + ": 409 AlreadyExists: "))
      << again.error().message();
  auto missing = c.get(kPods + "/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), ENOENT);
  EXPECT_TRUE(missing.error().message().starts_with("GET " + kPods + "/nope: 404 NotFound"))
      << missing.error().message();
}

TEST(KubeClient, MergePatchWithAStaleResourceVersionIsConflict) {
  FakeApiServer s;
  Client c(config_for(s));
  const json p0 = s.create(kPods, pod("p0"));
  s.patch(kPods + "/p0", {{"metadata", {{"labels", {{"x", "1"}}}}}});
  json patch = {
      {"metadata", {{"resourceVersion", p0["metadata"]["resourceVersion"]}, {"labels", {{"y", "2"}}}}}};
  auto r = c.merge_patch(kPods + "/p0", patch);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), EAGAIN);
  EXPECT_TRUE(r.error().message().starts_with("PATCH " + kPods + "/p0: 409 Conflict: "))
      << r.error().message();
  const auto req = s.requests().back();
  EXPECT_EQ(req.method, "PATCH");
  EXPECT_EQ(req.content_type, "application/merge-patch+json");
  patch["metadata"]["resourceVersion"] = s.get(kPods + "/p0")["metadata"]["resourceVersion"];
  auto ok = c.merge_patch(kPods + "/p0", patch);
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  EXPECT_EQ((*ok)["metadata"]["labels"], (json{{"x", "1"}, {"y", "2"}}));
}

TEST(KubeClient, UpdateRetriesAfterAConcurrentWrite) {
  FakeApiServer s;
  Client c(config_for(s));
  s.create(kPods, pod("p0"));
  int calls = 0;
  auto r = c.update(kPods + "/p0", [&](const json& cur) -> std::optional<json> {
    if (++calls == 1) s.patch(kPods + "/p0", {{"metadata", {{"labels", {{"other", "writer"}}}}}});
    EXPECT_EQ(cur["metadata"]["labels"].contains("other"), calls > 1);
    return json{{"metadata", {{"labels", {{"mine", "yes"}}}}}};
  });
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(s.get(kPods + "/p0")["metadata"]["labels"], (json{{"mine", "yes"}, {"other", "writer"}}));
  auto nothing = c.update(kPods + "/p0", [](const json&) { return std::nullopt; });
  ASSERT_TRUE(nothing.ok());
  EXPECT_EQ(s.requests().back().method, "GET");
}

TEST(KubeClient, UpdateGivesUpAfterItsAttempts) {
  FakeApiServer s;
  Client c(config_for(s));
  s.create(kPods, pod("p0"));
  int n = 0;
  auto r = c.update(
      kPods + "/p0",
      [&](const json&) -> std::optional<json> {
        s.patch(kPods + "/p0", {{"metadata", {{"labels", {{"n", std::to_string(++n)}}}}}});
        return json{{"metadata", {{"labels", {{"mine", "yes"}}}}}};
      },
      3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), EAGAIN);
  EXPECT_EQ(n, 3);
}

TEST(KubeClient, DeleteWithPreconditions) {
  FakeApiServer s;
  Client c(config_for(s));
  const json first = s.create(kPods, pod("p0"));
  const json p0 = s.patch(kPods + "/p0", {{"metadata", {{"labels", {{"v", "2"}}}}}});
  auto wrong = c.del(kPods + "/p0", "not-the-uid");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code(), EAGAIN);
  EXPECT_FALSE(s.get(kPods + "/p0").is_null());
  auto stale = c.del(kPods + "/p0", "", first["metadata"]["resourceVersion"]);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.error().code(), EAGAIN);
  ASSERT_TRUE(c.del(kPods + "/p0", p0["metadata"]["uid"], p0["metadata"]["resourceVersion"]).ok());
  EXPECT_TRUE(s.get(kPods + "/p0").is_null());
  auto gone = c.del(kPods + "/p0");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code(), ENOENT);
}

TEST(KubeClient, BindTwiceFailsTheSecondTime) {
  FakeApiServer s;
  Client c(config_for(s));
  const json p0 = s.create(kPods, pod("p0"));
  ASSERT_TRUE(c.bind("default", "p0", p0["metadata"]["uid"], "node-1").ok());
  const json sent = json::parse(s.requests().back().body);
  EXPECT_EQ(s.requests().back().path, kPods + "/p0/binding");
  EXPECT_EQ(sent["kind"], "Binding");
  EXPECT_EQ(sent["apiVersion"], "v1");
  EXPECT_EQ(sent["metadata"]["uid"], p0["metadata"]["uid"]);
  EXPECT_EQ(sent["target"], (json{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", "node-1"}}));
  EXPECT_EQ(s.get(kPods + "/p0")["spec"]["nodeName"], "node-1");
  auto second = c.bind("default", "p0", "", "node-2");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().code(), EAGAIN);
  EXPECT_EQ(s.get(kPods + "/p0")["spec"]["nodeName"], "node-1");
}

TEST(KubeClient, Evict) {
  FakeApiServer s;
  Client c(config_for(s));
  s.create(kPods, pod("p0"));
  ASSERT_TRUE(c.evict("default", "p0").ok());
  const json sent = json::parse(s.requests().back().body);
  EXPECT_EQ(sent["apiVersion"], "policy/v1");
  EXPECT_EQ(sent["kind"], "Eviction");
  EXPECT_EQ(sent["metadata"]["name"], "p0");
  EXPECT_TRUE(s.get(kPods + "/p0").is_null());
  EXPECT_EQ(c.evict("default", "p0").error().code(), ENOENT);
}

TEST(KubeClient, EventIsStoredWithItsFields) {
  FakeApiServer s;
  Client c(config_for(s));
  Client::EventArgs e;
  e.type = "Warning";
  e.reason = "AscendPlaced";
  e.action = "Scheduling";
  e.note = std::string(1023, 'a') + "\xC3\xA9" + std::string(100, 'b');  // é: bytes 1024 and 1025
  e.ns = "default";
  e.name = "p0";
  e.uid = "uid-1";
  e.controller = "ascend.huawei.com/scheduler";
  e.instance = "sched-0";
  ASSERT_TRUE(c.event(e).ok());
  const json list = s.list("/apis/events.k8s.io/v1/namespaces/default/events");
  ASSERT_EQ(list["items"].size(), 1U);
  const json& ev = list["items"][0];
  // Named as client-go's recorder names Events: "<object>.<unix nanoseconds in hex>".
  EXPECT_TRUE(
      std::regex_match(ev["metadata"]["name"].get<std::string>(), std::regex(R"(p0\.[0-9a-f]{8,16})")))
      << ev["metadata"]["name"];
  EXPECT_EQ(ev["regarding"], (json{{"apiVersion", "v1"},
                                   {"kind", "Pod"},
                                   {"namespace", "default"},
                                   {"name", "p0"},
                                   {"uid", "uid-1"}}));
  EXPECT_EQ(ev["reason"], "AscendPlaced");
  EXPECT_EQ(ev["action"], "Scheduling");
  EXPECT_EQ(ev["type"], "Warning");
  EXPECT_EQ(ev["reportingController"], "ascend.huawei.com/scheduler");
  EXPECT_EQ(ev["reportingInstance"], "sched-0");
  EXPECT_EQ(ev["note"], std::string(1023, 'a'));  // at most 1 kB, not cutting a character
  EXPECT_TRUE(std::regex_match(ev["eventTime"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z)")))
      << ev["eventTime"];
  EXPECT_EQ(s.requests().back().path, "/apis/events.k8s.io/v1/namespaces/default/events");
}

TEST(KubeClient, RereadsARotatedTokenOn401) {
  FakeApiServer s;
  TempDir d;
  write(d / "token", "old");
  Config cfg = config_for(s);
  cfg.token = "old";
  cfg.token_file = d / "token";
  Client c(cfg);
  s.create(kPods, pod("p0"));
  s.require_token("new");
  auto denied = c.get(kPods + "/p0");
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.error().code(), EACCES);
  write(d / "token", "new\n");
  auto ok = c.get(kPods + "/p0");
  EXPECT_TRUE(ok.ok()) << ok.error().message();
}

TEST(KubeClient, NoAnswerIsEIO) {
  Config cfg;
  cfg.server = "http://127.0.0.1:1";
  Client c(cfg);
  auto r = c.get("/api/v1/pods");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), EIO);
  EXPECT_TRUE(r.error().message().starts_with("GET /api/v1/pods: ")) << r.error().message();
}

TEST(KubeClient, BadTlsMaterialIsReportedByEveryRequest) {
  Config cfg;
  cfg.server = "https://127.0.0.1:1";
  cfg.ca_data = "not a certificate";
  cfg.source = "test";
  Client c(cfg);
  auto r = c.get("/api/v1/pods");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), EINVAL);
  EXPECT_NE(r.error().message().find("certificate-authority-data"), std::string::npos) << r.error().message();
}

TEST(KubeClient, FailedRequestsAreErrorsNamingTheStatus) {
  FakeApiServer s;
  Client c(config_for(s));
  s.fail_next(500);
  auto r = c.get(kPods);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), EIO);
  EXPECT_NE(r.error().message().find(": 500"), std::string::npos) << r.error().message();
  s.fail_next(429);
  EXPECT_EQ(c.get(kPods).error().code(), EBUSY);
}

// A server of our own for what the stand-in never sends: bodies that are not JSON, odd line breaks.
class RawServer {
 public:
  explicit RawServer(std::function<void(const httplib::Request&, httplib::Response&)> h) {
    svr_.Get(".*", [h](const httplib::Request& q, httplib::Response& r) { h(q, r); });
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    // bind_to_any_port listens already: a client's connection waits in the backlog until the loop runs.
  }
  ~RawServer() {
    svr_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
};

TEST(KubeClient, AnAnswerThatIsNotJsonIsEIO) {
  RawServer raw(
      [](const httplib::Request&, httplib::Response& r) { r.set_content("<html>hi</html>", "text/html"); });
  Config cfg;
  cfg.server = raw.url();
  Client c(cfg);
  auto r = c.get("/api/v1/pods");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), EIO);
  EXPECT_EQ(r.error().message(), "GET /api/v1/pods: the API server answered something that is not JSON");
}

TEST(KubeClient, StreamDeliversWholeLinesOnly) {
  RawServer raw([](const httplib::Request&, httplib::Response& r) {
    r.set_chunked_content_provider("application/json", [](std::size_t, httplib::DataSink& sink) {
      for (std::string_view piece : {"one\ntw", "o\r\n", "\nthr", "ee\nfour-partial"})
        sink.write(piece.data(), piece.size());
      sink.done();
      return true;
    });
  });
  Config cfg;
  cfg.server = raw.url();
  Client c(cfg);
  std::vector<std::string> lines;
  auto s = c.stream("/w", [&](std::string_view l) {
    lines.emplace_back(l);
    return true;
  });
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "two", "three"}));
  lines.clear();
  ASSERT_TRUE(c.stream("/w", [&](std::string_view l) {
                 lines.emplace_back(l);
                 return false;  // stop after the first
               }).ok());
  EXPECT_EQ(lines, (std::vector<std::string>{"one"}));
}

TEST(KubeClient, StreamRefusesAnEndlessLine) {
  RawServer raw([](const httplib::Request&, httplib::Response& r) {
    r.set_chunked_content_provider("application/json", [](std::size_t off, httplib::DataSink& sink) {
      const std::string chunk(1 << 20, 'x');
      if (off > (40U << 20)) return false;
      sink.write(chunk.data(), chunk.size());
      return true;
    });
  });
  Config cfg;
  cfg.server = raw.url();
  Client c(cfg);
  auto s = c.stream("/w", [](std::string_view) { return true; });
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), EMSGSIZE);
}

// A CA, a server certificate for 127.0.0.1 and a client certificate, made by the openssl command.
class TlsFiles {
 public:
  TlsFiles() {
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    write(dir_ / "san.ext", "subjectAltName=IP:127.0.0.1\n");
    ok_ =
        run("openssl req -x509 " + ec + " -keyout ca.key -out ca.crt -days 2 -subj /CN=test-ca") &&
        run("openssl req " + ec + " -keyout srv.key -out srv.csr -subj /CN=127.0.0.1") &&
        run("openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile san.ext "
            "-out srv.crt") &&
        run("openssl req " + ec + " -keyout cli.key -out cli.csr -subj /CN=scheduler") &&
        run("openssl x509 -req -in cli.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -out cli.crt");
  }
  bool ok() const { return ok_; }
  std::string path(const std::string& name) const { return dir_ / name; }
  std::string text(const std::string& name) const {
    std::ifstream in(path(name));
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

 private:
  bool run(const std::string& cmd) {
    return std::system(("cd " + dir_.path() + " && " + cmd + " 2>/dev/null").c_str()) == 0;
  }
  TempDir dir_;
  bool ok_ = false;
};

// An https server that asks for a client certificate signed by the CA.
class TlsServer {
 public:
  explicit TlsServer(const TlsFiles& f)
      : svr_(f.path("srv.crt").c_str(), f.path("srv.key").c_str(), f.path("ca.crt").c_str()) {
    svr_.Get(".*", [](const httplib::Request&, httplib::Response& r) {
      r.set_content("{\"kind\":\"PodList\"}", "application/json");
    });
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
  }
  ~TlsServer() {
    svr_.stop();
    thread_.join();
  }
  std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::SSLServer svr_;
  int port_ = 0;
  std::thread thread_;
};

TEST(KubeClient, TlsWithCertificatesFromMemoryAndFiles) {
  TlsFiles f;
  if (!f.ok()) GTEST_SKIP() << "the openssl command could not make test certificates";
  TlsServer srv(f);
  Config data;
  data.server = srv.url();
  data.ca_data = f.text("ca.crt");
  data.client_cert_data = f.text("cli.crt");
  data.client_key_data = f.text("cli.key");
  Config files;
  files.server = srv.url();
  files.ca_file = f.path("ca.crt");
  files.client_cert_file = f.path("cli.crt");
  files.client_key_file = f.path("cli.key");
  Config insecure = data;
  insecure.ca_data.clear();
  insecure.insecure_skip_tls_verify = true;
  for (const Config* c : {&data, &files, &insecure}) {
    Client client(*c);
    auto r = client.get("/api/v1/pods");
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ((*r)["kind"], "PodList");
    ASSERT_TRUE(client.get("/api/v1/pods").ok());  // again, on a pooled connection
  }
}

TEST(KubeClient, TlsRefusals) {
  TlsFiles f;
  if (!f.ok()) GTEST_SKIP() << "the openssl command could not make test certificates";
  TlsServer srv(f);
  Config untrusted;  // the system CAs do not know the test CA
  untrusted.server = srv.url();
  untrusted.client_cert_data = f.text("cli.crt");
  untrusted.client_key_data = f.text("cli.key");
  auto r = Client(untrusted).get("/api/v1/pods");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), EIO);
  EXPECT_NE(r.error().message().find("the server's certificate is not trusted"), std::string::npos)
      << r.error().message();
  Config anonymous;  // the server wants a client certificate
  anonymous.server = srv.url();
  anonymous.ca_data = f.text("ca.crt");
  EXPECT_EQ(Client(anonymous).get("/api/v1/pods").error().code(), EIO);
  Config mismatched = untrusted;
  mismatched.ca_data = f.text("ca.crt");
  mismatched.client_key_data = f.text("srv.key");
  auto m = Client(mismatched).get("/api/v1/pods");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code(), EINVAL);
  EXPECT_NE(m.error().message().find("the client key does not belong to the client certificate"),
            std::string::npos)
      << m.error().message();
}

TEST(KubeClient, StreamWatchesAndCancelEndsIt) {
  FakeApiServer s;
  Client c(config_for(s));
  s.create(kPods, pod("p0"));
  std::mutex mu;
  std::vector<json> events;
  Status result;
  std::thread t([&] {
    result = c.stream(kPods + "?watch=true&resourceVersion=0", [&](std::string_view l) {
      std::lock_guard lock(mu);
      events.push_back(json::parse(l));
      return true;
    });
  });
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(mu);
    return events.size() == 1;
  }));
  s.create(kPods, pod("p1"));
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(mu);
    return events.size() == 2;
  }));
  EXPECT_EQ(events[0]["type"], "ADDED");
  EXPECT_EQ(events[1]["object"]["metadata"]["name"], "p1");
  c.cancel();
  t.join();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), ECANCELED);
}

TEST(KubeClient, ACancelledTokenStopsOnlyItsOwnStreams) {
  FakeApiServer s;
  Client c(config_for(s));
  CancelToken mine, theirs;
  Status r_mine, r_theirs;
  std::atomic<int> lines{0};
  auto watch = [&](CancelToken* tok, Status* out) {
    *out = c.stream(
        kPods + "?watch=true",
        [&](std::string_view) {
          ++lines;
          return true;
        },
        tok);
  };
  std::thread a(watch, &mine, &r_mine), b(watch, &theirs, &r_theirs);
  ASSERT_TRUE(eventually([&] { return s.open_watches() == 2; }));
  mine.cancel();
  a.join();
  EXPECT_EQ(r_mine.error().code(), ECANCELED);
  s.create(kPods, pod("p0"));
  ASSERT_TRUE(eventually([&] { return lines.load() == 1; }));  // the other stream still runs
  EXPECT_EQ(c.stream(
                 kPods + "?watch=true", [](std::string_view) { return true; }, &mine)
                .error()
                .code(),
            ECANCELED);
  theirs.cancel();
  b.join();
  EXPECT_EQ(r_theirs.error().code(), ECANCELED);
}

TEST(KubeClient, StreamErrorStatus) {
  FakeApiServer s;
  Client c(config_for(s));
  s.fail_next(503);
  auto r = c.stream(kPods + "?watch=true", [](std::string_view) { return true; });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), EIO);
  EXPECT_NE(r.error().message().find("503"), std::string::npos) << r.error().message();
}

// ---- the informer -----------------------------------------------------------------------------------

struct Recorded {
  EventType type;
  std::string key;
  std::string rv;
};

// The informer with a recording handler, and the checks the tests share.
class InformerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = std::make_shared<Client>(config_for(s_));
    s_.create(kPods, pod("p0", {{"app", "a"}}));
    s_.create(kPods, pod("p1", {{"app", "b"}}));
  }

  void start(InformerOptions o = {}) {
    if (o.path.empty()) o.path = kPods;
    o.name = "pods";
    o.backoff_min = backoff_min_;
    o.backoff_max = milliseconds(1000);
    inf_ = std::make_unique<Informer>(client_, o, [this](EventType t, const json& obj) {
      std::lock_guard lock(mu_);
      if (throw_next_) {
        throw_next_ = false;
        throw std::runtime_error("handler bug");
      }
      seen_.push_back({t, key_of(obj), obj["metadata"]["resourceVersion"].get<std::string>()});
    });
    inf_->start();
    ASSERT_TRUE(inf_->wait_synced(milliseconds(30'000)));
    // Faults act on open watches: the tests inject them once the informer watches.
    ASSERT_TRUE(eventually([&] { return s_.open_watches() == 1; }));
  }

  void TearDown() override {
    if (inf_) inf_->stop();  // before the handler's state goes
  }

  std::vector<Recorded> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }
  std::size_t seen_count() { return seen().size(); }

  // What a fresh LIST says, keyed as the informer keys (items with the List's kind and apiVersion).
  std::map<std::string, json> fresh_list(const std::string& collection = kPods) {
    const json l = s_.list(collection);
    std::map<std::string, json> out;
    for (json item : l["items"]) {
      item["kind"] = "Pod";
      item["apiVersion"] = "v1";
      out[key_of(item)] = item;
    }
    return out;
  }

  // The store catches up with the server (it may lag a moment behind a write).
  void expect_store_equals_list() {
    EXPECT_TRUE(eventually([&] { return inf_->synced() && inf_->snapshot() == fresh_list(); }))
        << json(inf_->snapshot()).dump() << "\nvs\n"
        << json(fresh_list()).dump();
  }

  FakeApiServer s_;
  std::shared_ptr<Client> client_;
  milliseconds backoff_min_{20};
  std::mutex mu_;
  std::vector<Recorded> seen_;
  bool throw_next_ = false;
  std::unique_ptr<Informer> inf_;  // last: destroyed (stopped) first
};

TEST_F(InformerTest, InitialListThenEventsInOrder) {
  start();
  auto first = seen();
  ASSERT_EQ(first.size(), 2U);
  EXPECT_EQ(first[0].type, EventType::kAdded);
  EXPECT_EQ(first[0].key, "default/p0");
  EXPECT_EQ(first[1].key, "default/p1");
  expect_store_equals_list();
  s_.create(kPods, pod("p2"));
  s_.patch(kPods + "/p0", {{"metadata", {{"labels", {{"v", "2"}}}}}});
  s_.remove(kPods + "/p1");
  ASSERT_TRUE(eventually([&] { return seen_count() == 5; }));
  auto all = seen();
  EXPECT_EQ(all[2].type, EventType::kAdded);
  EXPECT_EQ(all[2].key, "default/p2");
  EXPECT_EQ(all[3].type, EventType::kModified);
  EXPECT_EQ(all[3].key, "default/p0");
  EXPECT_EQ(all[4].type, EventType::kDeleted);
  EXPECT_EQ(all[4].key, "default/p1");
  expect_store_equals_list();
  EXPECT_EQ(inf_->resource_version(), std::to_string(s_.resource_version()));
  EXPECT_EQ(inf_->stats().lists, 1U);
  const auto reqs = s_.requests();
  bool watched = false;
  for (const auto& r : reqs) {
    if (r.query.find("watch=true") == std::string::npos) continue;
    watched = true;
    EXPECT_NE(r.query.find("allowWatchBookmarks=true"), std::string::npos) << r.query;
    EXPECT_NE(r.query.find("timeoutSeconds="), std::string::npos) << r.query;
  }
  EXPECT_TRUE(watched);
}

TEST_F(InformerTest, CutWatchRewatchesWithoutLoss) {
  start();
  s_.cut_watches();
  s_.create(kPods, pod("p2"));
  s_.remove(kPods + "/p0");
  ASSERT_TRUE(eventually([&] { return seen_count() == 4; }));
  EXPECT_EQ(seen()[2].key, "default/p2");
  EXPECT_EQ(seen()[3].type, EventType::kDeleted);
  expect_store_equals_list();
  EXPECT_EQ(inf_->stats().lists, 1U);  // the history was there: no re-list
  EXPECT_GE(inf_->stats().watches, 2U);
}

TEST_F(InformerTest, CompactedHistoryRelistsWithDeletes) {
  start();
  s_.fail_next(503, 1'000'000);  // the informer cannot come back until the history is gone
  s_.cut_watches();
  s_.remove(kPods + "/p0");
  s_.patch(kPods + "/p1", {{"metadata", {{"labels", {{"v", "2"}}}}}});
  s_.create(kPods, pod("p2"));
  s_.compact();
  s_.fail_next(503, 0);
  ASSERT_TRUE(eventually([&] { return seen_count() == 5; }));
  auto all = seen();
  std::map<std::string, EventType> changes;
  for (std::size_t i = 2; i < all.size(); ++i) changes[all[i].key] = all[i].type;
  EXPECT_EQ(changes, (std::map<std::string, EventType>{{"default/p0", EventType::kDeleted},
                                                       {"default/p1", EventType::kModified},
                                                       {"default/p2", EventType::kAdded}}));
  expect_store_equals_list();
  EXPECT_EQ(inf_->stats().lists, 2U);
}

TEST_F(InformerTest, RestartWithANewHistoryRelists) {
  start();
  s_.restart(1000);
  ASSERT_TRUE(eventually([&] { return inf_->stats().lists == 2 && inf_->synced(); }));
  EXPECT_EQ(seen_count(), 2U);  // nothing changed: no events from the re-list
  s_.create(kPods, pod("p2"));
  ASSERT_TRUE(eventually([&] { return seen_count() == 3; }));
  expect_store_equals_list();
  EXPECT_GE(std::stoull(inf_->resource_version()), 1000U);
}

TEST_F(InformerTest, GarbageRelists) {
  start();
  s_.garbage_watches();
  ASSERT_TRUE(eventually([&] { return inf_->stats().lists >= 2 && inf_->synced(); }));
  EXPECT_GE(inf_->stats().errors, 1U);
  expect_store_equals_list();
  EXPECT_EQ(seen_count(), 2U);  // unchanged objects: no Modified
  s_.create(kPods, pod("p2"));
  ASSERT_TRUE(eventually([&] { return seen_count() == 3; }));
  expect_store_equals_list();
}

TEST_F(InformerTest, TruncatedWatchLeavesNoPartialObject) {
  start();
  s_.truncate_watches();  // half an event line, then the connection closes
  s_.create(kPods, pod("p2"));
  ASSERT_TRUE(eventually([&] { return seen_count() == 3; }));
  EXPECT_EQ(seen()[2].key, "default/p2");
  expect_store_equals_list();
  EXPECT_EQ(inf_->stats().lists, 1U);
}

TEST_F(InformerTest, FailingListBacksOffThenSyncs) {
  s_.fail_next(500, 3);
  start();
  EXPECT_EQ(inf_->stats().lists, 4U);
  EXPECT_GE(inf_->stats().errors, 3U);
  expect_store_equals_list();
}

TEST_F(InformerTest, BookmarksMoveTheResourceVersion) {
  start();
  s_.set_bookmark_interval(milliseconds(50));
  ASSERT_TRUE(eventually([&] { return inf_->stats().bookmarks >= 1; }));
  s_.create("/api/v1/namespaces/other/pods", json{{"metadata", {{"name", "x"}, {"namespace", "other"}}}});
  // Writes elsewhere move the counter; a bookmark carries the informer along without an event.
  ASSERT_TRUE(eventually([&] { return inf_->resource_version() == std::to_string(s_.resource_version()); }));
  EXPECT_EQ(seen_count(), 2U);
}

TEST_F(InformerTest, SelectorsAndTransform) {
  InformerOptions o;
  o.label_selector = "app=a";
  o.transform = [](json obj) {
    obj.erase("spec");
    return obj;
  };
  start(o);
  auto snap = inf_->snapshot();
  ASSERT_EQ(snap.size(), 1U);
  EXPECT_TRUE(snap.contains("default/p0"));
  EXPECT_FALSE(snap["default/p0"].contains("spec"));
  EXPECT_EQ(snap["default/p0"]["kind"], "Pod");
  s_.create(kPods, pod("p3", {{"app", "a"}}));
  s_.create(kPods, pod("p4", {{"app", "b"}}));
  ASSERT_TRUE(eventually([&] { return inf_->snapshot().size() == 2; }));
  EXPECT_FALSE(inf_->snapshot()["default/p3"].contains("spec"));
  EXPECT_NE(s_.requests().front().query.find("labelSelector=app%3Da"), std::string::npos);
}

TEST_F(InformerTest, HandlerExceptionsAreContained) {
  {
    std::lock_guard lock(mu_);
    throw_next_ = true;
  }
  start();
  EXPECT_EQ(seen_count(), 1U);  // the first delivery threw
  s_.create(kPods, pod("p2"));
  ASSERT_TRUE(eventually([&] { return seen_count() == 2; }));
  expect_store_equals_list();
}

TEST_F(InformerTest, StopIsPromptAndRestartable) {
  start();
  inf_->stop();
  const auto watches = inf_->stats().watches;
  s_.create(kPods, pod("p2"));
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(seen_count(), 2U);
  inf_->start();
  ASSERT_TRUE(eventually([&] { return seen_count() == 3; }));  // the re-list finds p2
  EXPECT_GT(inf_->stats().watches, watches);
  expect_store_equals_list();
}

TEST_F(InformerTest, WrongKindRelists) {
  // The kind of each watched object is checked against the list's: a ConfigMap in a pods watch is distrusted.
  // The stand-in keeps the kind it is given, so such an object is easy to make.
  start();
  EXPECT_EQ(inf_->stats().errors, 0U);
  s_.create(kPods, json{{"kind", "ConfigMap"}, {"apiVersion", "v1"}, {"metadata", {{"name", "odd"}}}});
  ASSERT_TRUE(eventually([&] { return inf_->stats().errors >= 1 && inf_->stats().lists >= 2; }));
}

}  // namespace
}  // namespace ascend::kube
