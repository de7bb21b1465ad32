// `ascend-scheduler serve` as a hostile client sees it (issue 31): from an address of this host that is not
// loopback and without a credential, every extender verb and every view is refused, before the request's
// body is read, and nothing is reserved; the extender listener serves loopback peers, or over TLS only a
// client certificate from --extender-client-ca; names outside Kubernetes' limits are a 400 naming the field
// and change neither the scheduler's memory nor its state file. The expected limits are Kubernetes' own
// (k8s.io/apimachinery/pkg/util/validation: DNS-1123 label 63, subdomain 253, annotations 256 KiB).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "ascend/scheduler/server.h"
#include "eventually.h"
#include "extender_util.h"
#include "run_command.h"

namespace ascend::scheduler {
namespace {

namespace fs = std::filesystem;
using ascend::testing::run_command;
using nlohmann::json;
using testing::job_pod;
using testing::plain_pod;
using testing::temp_dir;
using testing::write;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::vector<std::string> node_names(int n) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.push_back("node-" + std::to_string(i));
  return v;
}

// A TEST-NET-2 address (RFC 5737) on one end of a veth pair made for this test: a peer of this host that is
// not loopback. Needs root (CAP_NET_ADMIN); removed when the test ends.
class OutsideAddress {
 public:
  OutsideAddress() {
    if (geteuid() != 0) {
      why_ = "needs root to add a veth pair with a non-loopback address (ip link add ... type veth)";
      return;
    }
    if (run_command({"sh", "-c", "command -v ip"}).exit_code != 0) {
      missing_tool_ = true;
      why_ = "iproute2 is not installed (scripts/deps installs it)";
      return;
    }
    int tag = static_cast<int>(getpid() % 250);
    dev_ = "ascx" + std::to_string(getpid() % 100000);  // at most 15 characters (IFNAMSIZ)
    address_ = "198.51.100." + std::to_string(tag + 2);
    for (const auto& cmd : std::vector<std::vector<std::string>>{
             {"ip", "link", "add", dev_, "type", "veth", "peer", "name", dev_ + "p"},
             {"ip", "addr", "add", address_ + "/32", "dev", dev_},
             {"ip", "link", "set", dev_, "up"},
             {"ip", "link", "set", dev_ + "p", "up"}}) {
      auto r = run_command(cmd);
      if (r.exit_code != 0) {
        why_ = "cannot make a test interface (" + cmd[0] + " " + cmd[1] + " " + cmd[2] + "): " + r.err;
        return;
      }
    }
    made_ = true;
  }
  ~OutsideAddress() {
    if (!dev_.empty()) (void)run_command({"ip", "link", "del", dev_});
  }
  OutsideAddress(const OutsideAddress&) = delete;
  OutsideAddress& operator=(const OutsideAddress&) = delete;
  bool ok() const { return made_; }
  // Root, but the tool is missing: a broken set-up, not a reason to skip the attack.
  bool missing_tool() const { return missing_tool_; }
  const std::string& why() const { return why_; }
  const std::string& address() const { return address_; }
  const std::string& device() const { return dev_; }

 private:
  std::string dev_, address_, why_;
  bool made_ = false;
  bool missing_tool_ = false;
};

struct Served {
  std::unique_ptr<Server> server;
  std::thread thread;
  std::string error;
  Served(const ServeOptions& o, int nodes) {
    auto s = Server::create(o, testing::small_cluster(nodes), nullptr);
    if (!s.ok()) {
      error = s.error().message();
      return;
    }
    server = std::move(*s);
    thread = std::thread([this] { (void)server->run(); });
  }
  ~Served() {
    if (server) server->stop();
    if (thread.joinable()) thread.join();
  }
  Served(const Served&) = delete;
  Served& operator=(const Served&) = delete;
};

// The attack of issue 31: a made-up job that asks for every chip of the cluster.
json attacker_filter(int nodes) {
  json pod = job_pod("fake", 0, 8, "tp=8,dp=" + std::to_string(nodes), nodes, "attacker");
  return {{"Pod", pod}, {"NodeNames", node_names(nodes)}};
}

// Sends only a request's head over a raw socket, announcing `content_length` bytes that never come, and
// returns what the server answers within two seconds: a server that reads the body first answers nothing.
std::string head_only(const std::string& addr, int port, const std::string& method, const std::string& path,
                      std::size_t content_length, bool expect_continue) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(port));
  inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
  std::string got;
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
    std::string head = method + " " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
                       "Content-Length: " + std::to_string(content_length) + "\r\n" +
                       (expect_continue ? "Expect: 100-continue\r\n" : "") + "\r\n";
    if (send(fd, head.data(), head.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(head.size())) {
      char buf[4096];
      ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n > 0) got.assign(buf, static_cast<std::size_t>(n));
    }
  }
  close(fd);
  return got;
}

int status_of(const httplib::Result& r) {
  return r ? r->status : -1;
}

TEST(ExtenderAccess, FromOutsideWithoutACredentialEveryVerbAndViewIsRefusedAndNothingIsReserved) {
  OutsideAddress outside;
  if (outside.missing_tool()) FAIL() << outside.why();
  if (!outside.ok()) GTEST_SKIP() << outside.why();
  std::string dir = temp_dir("hostile");
  write(dir + "/token", "s3cret-token\n");
  ServeOptions o;
  o.listen = "0.0.0.0:0";
  o.extender_listen = "127.0.0.1:0";
  o.token_file = dir + "/token";
  o.state = dir + "/state.json";
  Served s(o, 16);
  ASSERT_TRUE(s.server) << s.error;
  int port = s.server->port();
  int ext_port = s.server->extender_port();

  httplib::Client hostile(outside.address(), port);
  json filter = attacker_filter(16);
  json binding = {{"PodName", "fake-0"}, {"PodNamespace", "attacker"}, {"PodUID", "u"}, {"Node", "node-0"}};
  for (const char* verb : {"/filter", "/prioritize", "/preempt"}) {
    EXPECT_EQ(status_of(hostile.Post(verb, filter.dump(), "application/json")), 404) << verb;
  }
  EXPECT_EQ(status_of(hostile.Post("/bind", binding.dump(), "application/json")), 404);
  for (const char* view : {"/v1/cluster", "/v1/jobs/attacker/fake/placement",
                           "/v1/jobs/attacker/fake/ranktable", "/v1/jobs/attacker/fake/env?pod=0", "/"}) {
    EXPECT_EQ(status_of(hostile.Get(view)), 401) << view;
  }
  json inv = {{"chips", json::array({{{"phy_id", 0}, {"healthy", false}}})}};
  EXPECT_EQ(status_of(hostile.Put("/v1/nodes/node-0", inv.dump(), "application/json")), 401);
  EXPECT_EQ(status_of(hostile.Get("/v1/nodes/node-0/reservations")), 401);
  EXPECT_EQ(status_of(hostile.Delete("/v1/pods/default/x")), 401);
  httplib::Headers wrong = {{"Authorization", "Bearer s3cret"}};
  EXPECT_EQ(status_of(hostile.Get("/v1/cluster", wrong)), 401) << "a wrong token is no token";
  EXPECT_EQ(status_of(hostile.Post("/filter", wrong, filter.dump(), "application/json")), 404)
      << "not even with a token: the verbs are not on this listener";

  // The probes answer anyone, and say nothing of nodes, pods or jobs.
  EXPECT_EQ(status_of(hostile.Get("/healthz")), 200);
  // Ready once both listeners' loops run (the other may start a moment after this one answers).
  EXPECT_TRUE(ascend::testing::eventually([&] { return status_of(hostile.Get("/readyz")) == 200; }));
  auto m = hostile.Get("/metrics");
  ASSERT_EQ(status_of(m), 200);
  for (const char* name : {"node-", "attacker", "fake", "leaf-"}) {
    EXPECT_EQ(m->body.find(name), std::string::npos) << name << " in /metrics:\n" << m->body;
  }
  EXPECT_NE(
      m->body.find("ascend_scheduler_refused_requests_total{listener=\"plugin\",reason=\"extender-verb\"}"),
      std::string::npos)
      << m->body;

  // Refused before the body is read: the answer comes at once although the announced body never does.
  for (bool expect : {false, true}) {
    std::string a = head_only(outside.address(), port, "POST", "/filter", 50U << 20, expect);
    EXPECT_EQ(a.rfind("HTTP/1.1 404", 0), 0U) << (expect ? "Expect: 100-continue: " : "") << a;
    std::string b = head_only(outside.address(), port, "PUT", "/v1/nodes/node-0", 50U << 20, expect);
    EXPECT_EQ(b.rfind("HTTP/1.1 401", 0), 0U) << b;
  }

  // The extender listener is not on that address at all, and refuses a non-loopback peer even on loopback's.
  httplib::Client direct(outside.address(), ext_port);
  direct.set_connection_timeout(std::chrono::seconds(2));
  EXPECT_FALSE(direct.Post("/filter", filter.dump(), "application/json"));
  httplib::Client sourced("127.0.0.1", ext_port);
  sourced.set_interface(outside.device());
  sourced.set_connection_timeout(std::chrono::seconds(2));
  auto r = sourced.Post("/filter", filter.dump(), "application/json");
  EXPECT_TRUE(!r || r->status == 403) << r->status << " " << r->body;

  // Asked with the token: nothing was reserved, and no state was written for it.
  httplib::Client admin("127.0.0.1", port);
  httplib::Headers right = {{"Authorization", "Bearer s3cret-token"}};
  auto v = admin.Get("/v1/cluster", right);
  ASSERT_EQ(status_of(v), 200);
  json view = json::parse(v->body);
  EXPECT_EQ(view["chips"]["free"], 16 * 8);
  EXPECT_TRUE(view["jobs"].empty());
  for (const auto& n : view["nodes"]) {
    for (const auto& c : n["chips"]) EXPECT_EQ(c["state"], "free") << n["name"];
  }
  EXPECT_FALSE(fs::exists(o.state)) << "nothing changed, nothing persisted";

  // From loopback the extender works as before.
  httplib::Client kube_scheduler("127.0.0.1", ext_port);
  auto f = kube_scheduler.Post(
      "/filter", json({{"Pod", job_pod("train", 0, 8, "tp=8,dp=2")}, {"NodeNames", node_names(16)}}).dump(),
      "application/json");
  ASSERT_EQ(status_of(f), 200);
  EXPECT_EQ(json::parse(f->body)["NodeNames"].size(), 1U);
  fs::remove_all(dir);
}

TEST(ExtenderAccess, TheExtenderListenerServesNoPluginEndpointAndNeedsTlsOffLoopback) {
  ServeOptions o;
  o.listen = "127.0.0.1:0";
  o.extender_listen = "0.0.0.0:0";
  auto bad = Server::create(o, testing::small_cluster(2), nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), EINVAL);
  EXPECT_NE(bad.error().message().find("--extender-listen 0.0.0.0:0: the extender verbs reserve chips"),
            std::string::npos)
      << bad.error().message();
  o.extender_listen = "127.0.0.1:0";
  Served s(o, 2);
  ASSERT_TRUE(s.server) << s.error;
  httplib::Client ext("127.0.0.1", s.server->extender_port());
  json inv = {{"chips", json::array({{{"phy_id", 0}}})}};
  EXPECT_EQ(status_of(ext.Put("/v1/nodes/node-0", inv.dump(), "application/json")), 404);
  EXPECT_EQ(status_of(ext.Delete("/v1/pods/default/x")), 404);
  EXPECT_EQ(status_of(ext.Get("/v1/cluster")), 200) << "the views are served to loopback there";
  EXPECT_TRUE(ascend::testing::eventually([&] { return status_of(ext.Get("/readyz")) == 200; }));
}

// A CA, a server certificate for 127.0.0.1 and the test's outside address, a client certificate from the
// CA, and a client certificate from another CA, all made with the openssl CLI for this test only.
struct Certs {
  std::string dir, error;
  explicit Certs(const std::string& d, const std::string& extra_ip) : dir(d) {
    std::string san = "subjectAltName=IP:127.0.0.1" + (extra_ip.empty() ? "" : ",IP:" + extra_ip);
    write(dir + "/server.ext", san + "\nextendedKeyUsage=serverAuth\n");
    write(dir + "/client.ext", "extendedKeyUsage=clientAuth\n");
    std::vector<std::string> ec = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"};
    auto req = [&](std::vector<std::string> head, const std::vector<std::string>& tail) {
      head.insert(head.end(), ec.begin(), ec.end());
      head.insert(head.end(), tail.begin(), tail.end());
      return head;
    };
    std::vector<std::vector<std::string>> cmds = {
        req({"openssl", "req", "-x509"},
            {"-days", "1", "-subj", "/CN=test-ca", "-keyout", dir + "/ca.key", "-out", dir + "/ca.pem"}),
        req({"openssl", "req", "-x509"}, {"-days", "1", "-subj", "/CN=rogue-ca", "-keyout",
                                          dir + "/rogue-ca.key", "-out", dir + "/rogue-ca.pem"}),
    };
    for (const auto& [name, ca, ext] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {"server", "ca", "server.ext"},
             {"client", "ca", "client.ext"},
             {"rogue", "rogue-ca", "client.ext"}}) {
      cmds.push_back(req({"openssl", "req"}, {"-subj", "/CN=" + name, "-keyout", dir + "/" + name + ".key",
                                              "-out", dir + "/" + name + ".csr"}));
      cmds.push_back({"openssl", "x509", "-req", "-in", dir + "/" + name + ".csr", "-CA",
                      dir + "/" + ca + ".pem", "-CAkey", dir + "/" + ca + ".key", "-CAcreateserial", "-days",
                      "1", "-extfile", dir + "/" + ext, "-out", dir + "/" + name + ".pem"});
    }
    for (const auto& c : cmds) {
      auto r = run_command(c);
      if (r.exit_code != 0) {
        error = c[1] + ": " + r.err;
        return;
      }
    }
  }
  std::string at(const std::string& f) const { return dir + "/" + f; }
};

TEST(ExtenderAccess, OverTlsAGoodClientCertificateIsServedAndABadOrMissingOneIsNot) {
  OutsideAddress outside;  // optional here: the TLS listener is also tried from off loopback when possible
  std::string dir = temp_dir("mtls");
  Certs certs(dir, outside.ok() ? outside.address() : "");
  ASSERT_EQ(certs.error, "");
  ServeOptions o;
  o.listen = "127.0.0.1:0";
  o.extender_listen = "0.0.0.0:0";  // on the network: allowed only with TLS and a client CA
  o.extender_tls_cert = certs.at("server.pem");
  o.extender_tls_key = certs.at("server.key");
  o.extender_client_ca = certs.at("ca.pem");
  Served s(o, 4);
  ASSERT_TRUE(s.server) << s.error;
  int ext_port = s.server->extender_port();
  json filter = {{"Pod", job_pod("train", 0, 8, "tp=8,dp=2")}, {"NodeNames", node_names(4)}};

  auto client = [&](const std::string& host, const std::string& cert, const std::string& key) {
    auto c = cert.empty()
                 ? std::make_unique<httplib::SSLClient>(host, ext_port)
                 : std::make_unique<httplib::SSLClient>(host, ext_port, certs.at(cert), certs.at(key));
    c->set_ca_cert_path(certs.at("ca.pem").c_str());
    c->enable_server_certificate_verification(true);
    c->set_connection_timeout(std::chrono::seconds(5));
    return c;
  };
  // Missing, or from another CA: the handshake fails, no request is served.
  auto none = client("127.0.0.1", "", "");
  EXPECT_FALSE(none->Post("/filter", filter.dump(), "application/json")) << "no client certificate";
  auto rogue = client("127.0.0.1", "rogue.pem", "rogue.key");
  EXPECT_FALSE(rogue->Post("/filter", filter.dump(), "application/json")) << "a certificate from another CA";
  httplib::Client plain("127.0.0.1", ext_port);
  auto p = plain.Post("/filter", filter.dump(), "application/json");
  EXPECT_TRUE(!p || p->status >= 400) << "plain HTTP on the TLS listener";
  {
    // Nothing was reserved by the refused ones.
    httplib::Client local("127.0.0.1", s.server->port());
    EXPECT_EQ(json::parse(local.Get("/v1/cluster")->body)["chips"]["free"], 32);
  }
  // kube-scheduler's certificate: the extender works as on loopback.
  auto good = client("127.0.0.1", "client.pem", "client.key");
  auto f = good->Post("/filter", filter.dump(), "application/json");
  ASSERT_TRUE(f) << httplib::to_string(f.error());
  ASSERT_EQ(f->status, 200) << f->body;
  json fj = json::parse(f->body);
  ASSERT_EQ(fj["NodeNames"].size(), 1U);
  auto b = good->Post(
      "/bind",
      json({{"PodName", "train-0"}, {"PodNamespace", "default"}, {"Node", fj["NodeNames"][0]}}).dump(),
      "application/json");
  ASSERT_TRUE(b);
  EXPECT_EQ(json::parse(b->body)["Error"], "");
  if (outside.ok()) {
    auto remote = client(outside.address(), "client.pem", "client.key");
    auto r = remote->Post("/prioritize", filter.dump(), "application/json");
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200) << "from off loopback with the certificate";
    auto remote_none = client(outside.address(), "", "");
    EXPECT_FALSE(remote_none->Post("/filter", filter.dump(), "application/json"));
  }
  fs::remove_all(dir);
}

// ---- names ------------------------------------------------------------------------------------------------

class Names : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir("names");
    ServeOptions o;
    o.listen = "127.0.0.1:0";
    o.extender_listen = "127.0.0.1:0";
    o.state = dir_ + "/state.json";
    served_ = std::make_unique<Served>(o, 12);
    ASSERT_TRUE(served_->server) << served_->error;
    ext_ = std::make_unique<httplib::Client>("127.0.0.1", served_->server->extender_port());
    plugin_ = std::make_unique<httplib::Client>("127.0.0.1", served_->server->port());
    // Something held, so that "as they were" is not trivially empty.
    auto f = ext_->Post(
        "/filter", json({{"Pod", job_pod("keep", 0, 8, "tp=8,dp=2")}, {"NodeNames", node_names(12)}}).dump(),
        "application/json");
    ASSERT_EQ(status_of(f), 200);
  }
  void TearDown() override {
    served_.reset();
    fs::remove_all(dir_);
  }
  std::string view() { return plugin_->Get("/v1/cluster")->body; }
  std::string state() { return slurp(dir_ + "/state.json"); }

  std::string dir_;
  std::unique_ptr<Served> served_;
  std::unique_ptr<httplib::Client> ext_, plugin_;
};

std::string label(std::size_t n) {
  return std::string(n, 'a');
}

TEST_F(Names, NamesOutsideKubernetesLimitsAre400NamingTheFieldAndChangeNothing) {
  std::string view_before = view();
  std::string state_before = state();
  ASSERT_FALSE(state_before.empty());
  auto pod_named = [](const std::string& ns, const std::string& name) {
    json p = plain_pod(name, 1, "huawei.com/Ascend910", ns);
    p["metadata"]["uid"] = "3f1b8a4e-0000-4000-8000-000000000001";
    return p;
  };
  auto args = [](const json& pod, const std::vector<std::string>& nodes) {
    return json{{"Pod", pod}, {"NodeNames", nodes}};
  };
  json big_annotations = job_pod("t", 0, 8, "tp=8,dp=2");
  big_annotations["metadata"]["annotations"]["example.com/blob"] = std::string(256 * 1024, 'x');
  json long_job = job_pod(label(64), 0, 8, "tp=8,dp=2");
  json long_value = job_pod("t", 0, 8, "tp=8,dp=2");
  long_value["metadata"]["annotations"]["ascend.huawei.com/parallel"] = "tp=8,dp=2" + std::string(300, ' ');
  std::vector<std::string> thirteen = node_names(13);
  struct Case {
    std::string path;
    json body;
    std::string field;
  };
  std::vector<Case> cases = {
      {"/filter", args(pod_named("default", label(254)), {"node-0"}), "Pod.metadata.name"},
      {"/filter", args(pod_named("default", "Train-0"), {"node-0"}), "Pod.metadata.name"},
      {"/filter", args(pod_named("default", "a/b"), {"node-0"}), "Pod.metadata.name"},
      {"/filter", args(pod_named(label(64), "p"), {"node-0"}), "Pod.metadata.namespace"},
      {"/filter", args(pod_named("a/b", "p"), {"node-0"}), "Pod.metadata.namespace"},
      {"/filter", args(pod_named("..", "p"), {"node-0"}), "Pod.metadata.namespace"},
      {"/filter",
       args(pod_named("../../../apis/x/v1/namespaces/kube-system/thing?dryRun=All&a=", "p"), {"node-0"}),
       "Pod.metadata.namespace"},
      {"/filter", args(pod_named("default", "p"), {"node-0", label(254)}), "ExtenderArgs.NodeNames[1]"},
      {"/filter", args(pod_named("default", "p"), {"node-0", "../x"}), "ExtenderArgs.NodeNames[1]"},
      {"/filter", args(pod_named("default", "p"), thirteen),
       "ExtenderArgs.NodeNames: 13 nodes, more than the 12"},
      {"/prioritize", args(pod_named("default", "p"), thirteen), "ExtenderArgs.NodeNames: 13 nodes"},
      {"/filter", args(big_annotations, node_names(12)), "Pod.metadata.annotations: more than 262144 bytes"},
      {"/filter", args(long_job, node_names(12)), "Pod.metadata.annotations.ascend.huawei.com/job"},
      {"/filter", args(long_value, node_names(12)), "Pod.metadata.annotations.ascend.huawei.com/parallel"},
      {"/bind",
       {{"PodName", "p"}, {"PodNamespace", "../../../apis/x"}, {"Node", "node-0"}},
       "ExtenderBindingArgs.PodNamespace"},
      {"/bind", {{"PodName", "a/../b"}, {"Node", "node-0"}}, "ExtenderBindingArgs.PodName"},
      {"/bind", {{"PodName", label(254)}, {"Node", "node-0"}}, "ExtenderBindingArgs.PodName"},
      {"/bind", {{"PodName", "p"}, {"Node", label(254)}}, "ExtenderBindingArgs.Node"},
      {"/bind",
       {{"PodName", "p"}, {"Node", "node-0"}, {"PodUID", std::string(37, 'a')}},
       "ExtenderBindingArgs.PodUID"},
  };
  for (const auto& c : cases) {
    auto r = ext_->Post(c.path.c_str(), c.body.dump(), "application/json");
    ASSERT_TRUE(r) << c.field;
    EXPECT_EQ(r->status, 400) << c.field << ": " << r->body.substr(0, 300);
    json e = json::parse(r->body, nullptr, false);
    EXPECT_NE(e.value("error", "").find(c.field), std::string::npos) << e.dump().substr(0, 300);
    EXPECT_LT(r->body.size(), 1024U) << "the answer does not echo an oversized name";
  }
  // The plugin endpoints' path names too (here with no token file, from loopback).
  json inv = {{"chips", json::array({{{"phy_id", 0}}})}};
  EXPECT_EQ(status_of(plugin_->Put(("/v1/nodes/" + label(254)).c_str(), inv.dump(), "application/json")),
            400);
  EXPECT_EQ(status_of(plugin_->Delete("/v1/pods/../p")), 400);
  EXPECT_EQ(status_of(plugin_->Delete("/v1/pods/..%2F..%2Fx/p")), 404)
      << "decoded, a '/' makes it a path of no endpoint";
  EXPECT_EQ(status_of(plugin_->Delete(("/v1/pods/" + label(64) + "/p").c_str())), 400);
  EXPECT_EQ(status_of(plugin_->Get("/v1/jobs/A/keep/placement")), 400);

  EXPECT_EQ(view(), view_before) << "nothing was reserved or remembered as held";
  EXPECT_EQ(state(), state_before) << "the state file is as it was";
  // Nor was any of the refused pods remembered: a bind of the one with valid names (refused for its node
  // list) finds it unknown.
  auto b = ext_->Post("/bind", json({{"PodName", "p"}, {"Node", "node-0"}}).dump(), "application/json");
  ASSERT_EQ(status_of(b), 200);
  EXPECT_NE(json::parse(b->body)["Error"].get<std::string>().find("unknown"), std::string::npos) << b->body;
}

TEST_F(Names, TheLongestNamesKubernetesAllowsAreServed) {
  json pod = plain_pod(label(253), 1, "huawei.com/Ascend910", label(63));
  pod["metadata"]["uid"] = "3f1b8a4e-0000-4000-8000-000000000002";
  auto f =
      ext_->Post("/filter", json({{"Pod", pod}, {"NodeNames", node_names(12)}}).dump(), "application/json");
  ASSERT_EQ(status_of(f), 200) << f->body.substr(0, 300);
  auto b = ext_->Post("/bind",
                      json({{"PodName", label(253)}, {"PodNamespace", label(63)}, {"Node", "node-3"}}).dump(),
                      "application/json");
  ASSERT_EQ(status_of(b), 200);
  EXPECT_EQ(json::parse(b->body)["Error"], "");
  json job = job_pod(label(63), 0, 8, "tp=8");
  auto j =
      ext_->Post("/filter", json({{"Pod", job}, {"NodeNames", node_names(12)}}).dump(), "application/json");
  ASSERT_EQ(status_of(j), 200);
  EXPECT_EQ(json::parse(j->body)["NodeNames"].size(), 1U) << "a job name of 63 bytes is placed";
  auto del = plugin_->Delete(("/v1/pods/" + label(63) + "/" + label(253)).c_str());
  EXPECT_EQ(status_of(del), 200) << del->body;
}

}  // namespace
}  // namespace ascend::scheduler
