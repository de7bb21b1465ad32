// The DRA driver's kubelet side (dra_service.h) as the kubelet meets it: a grpc++ client over the unix
// sockets (the registration socket in a plugins_registry folder, the DRA socket it names) against the API
// server stand-in holding the ResourceClaims. GetInfo's fields; a claim prepared to its CDI ids, the same
// answer again (no second read), after a restart from the checkpoint, over v1beta1 too; unprepare (also of an
// unknown claim); each wrong claim its own error; the bounds; a corrupt checkpoint set aside (two in one
// second both kept); the sockets' mode and a peer that is neither root nor us refused; a checkpoint written
// by hand. And the chips the daemon lets it hand out (dra_usable_chips) on an emulated host: faults,
// isolation, the driver away. Every expected value is written out here.
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "ascend/common/fs.h"
#include "ascend/common/kube_client.h"
#include "ascend/npu/device_query.h"
#include "ascend/plugin/dra_service.h"
#include "dra/dra_v1.grpc.pb.h"
#include "dra/dra_v1beta1.grpc.pb.h"
#include "fake_apiserver.h"
#include "log_capture.h"
#include "plugin_on_api.h"
#include "pluginregistration/v1/pluginregistration_v1.grpc.pb.h"
#include "test_dir.h"

namespace ascend::plugin {
namespace {

using nlohmann::json;
using testing::LogCapture;
using testing::TempDir;
namespace drav1 = k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = k8s::io::kubelet::pkg::apis::dra::v1beta1;

constexpr const char* kNode = "worker-1";
constexpr const char* kClaims = "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims";

json result(const std::string& request, const std::string& device, const std::string& pool = kNode,
            const std::string& driver = "npu.ascend.huawei.com") {
  return {{"request", request}, {"driver", driver}, {"pool", pool}, {"device", device}};
}

// A ResourceClaim in team-a; `results` null: not allocated.
json claim_object(const std::string& name, const json& results) {
  json c = {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceClaim"},
            {"metadata", {{"name", name}, {"namespace", "team-a"}}},
            {"spec", {{"devices", {{"requests", json::array({{{"name", "npus"}}})}}}}}};
  if (!results.is_null()) c["status"] = {{"allocation", {{"devices", {{"results", results}}}}}};
  return c;
}

struct Expected {
  std::vector<std::string> requests;
  std::string device;
  std::string cdi;
};

template <typename Answer>
void expect_devices(const Answer& a, const std::vector<Expected>& want) {
  EXPECT_EQ(a.error(), "");
  ASSERT_EQ(a.devices_size(), static_cast<int>(want.size()));
  for (int i = 0; i < a.devices_size(); ++i) {
    const auto& d = a.devices(i);
    const auto& w = want[static_cast<std::size_t>(i)];
    EXPECT_EQ(std::vector<std::string>(d.request_names().begin(), d.request_names().end()), w.requests);
    EXPECT_EQ(d.pool_name(), "worker-1");
    EXPECT_EQ(d.device_name(), w.device);
    ASSERT_EQ(d.cdi_device_ids_size(), 1);
    EXPECT_EQ(d.cdi_device_ids(0), w.cdi);
  }
}

class DraServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cfg = kube::url_config(api.url(), "", "");
    ASSERT_TRUE(cfg.ok()) << cfg.error().message();
    client = std::make_unique<kube::Client>(*cfg);
    opts.node_name = kNode;
    opts.registry_dir = tmp / "plugins_registry";
    opts.plugin_dir = tmp / "plugins/npu.ascend.huawei.com";
  }

  void start() {
    svc = std::make_unique<DraService>(opts, *client, [this]() -> Result<std::vector<int>> { return chips; });
    auto st = svc->start();
    ASSERT_TRUE(st.ok()) << st.error().message();
    dra = grpc::CreateChannel("unix://" + tmp / "plugins/npu.ascend.huawei.com/dra.sock",
                              grpc::InsecureChannelCredentials());
  }

  // Creates the claim in the API server; its uid.
  std::string make_claim(const std::string& name, const json& results) {
    return api.create(kClaims, claim_object(name, results))["metadata"]["uid"].get<std::string>();
  }

  static void add_claim(drav1::NodePrepareResourcesRequest& req, const std::string& name,
                        const std::string& uid, const std::string& ns = "team-a") {
    auto* c = req.add_claims();
    c->set_namespace_(ns);
    c->set_name(name);
    c->set_uid(uid);
  }

  grpc::Status prepare(const drav1::NodePrepareResourcesRequest& req,
                       drav1::NodePrepareResourcesResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return drav1::DRAPlugin::NewStub(dra)->NodePrepareResources(&ctx, req, resp);
  }

  // One claim's answer, the call expected to succeed.
  drav1::NodePrepareResourceResponse prepare_one(const std::string& name, const std::string& uid) {
    drav1::NodePrepareResourcesRequest req;
    add_claim(req, name, uid);
    drav1::NodePrepareResourcesResponse resp;
    auto s = prepare(req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.claims_size(), 1);
    return resp.claims().contains(uid) ? resp.claims().at(uid) : drav1::NodePrepareResourceResponse();
  }

  std::string unprepare_one(const std::string& name, const std::string& uid) {
    drav1::NodeUnprepareResourcesRequest req;
    auto* c = req.add_claims();
    c->set_namespace_("team-a");
    c->set_name(name);
    c->set_uid(uid);
    drav1::NodeUnprepareResourcesResponse resp;
    grpc::ClientContext ctx;
    auto s = drav1::DRAPlugin::NewStub(dra)->NodeUnprepareResources(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(resp.claims().contains(uid));
    return resp.claims().contains(uid) ? resp.claims().at(uid).error() : "(no answer)";
  }

  // How many times the API server was asked for claim `name`.
  int reads_of(const std::string& name) const {
    int n = 0;
    for (const auto& r : api.requests())
      n += (r.method == "GET" && r.path == std::string(kClaims) + "/" + name);
    return n;
  }

  json checkpoint() const {
    std::ifstream in(tmp / "plugins/npu.ascend.huawei.com/checkpoint.json");
    return json::parse(in, nullptr, false);
  }

  TempDir tmp;
  ascend::testing::FakeApiServer api;
  std::unique_ptr<kube::Client> client;
  DraOptions opts;
  std::vector<int> chips = {0, 1, 2, 3, 4, 5, 6, 7};
  std::unique_ptr<DraService> svc;
  std::shared_ptr<grpc::Channel> dra;
};

TEST_F(DraServiceTest, GetInfoNamesTheDriverItsSocketAndBothVersions) {
  start();
  auto reg = grpc::CreateChannel("unix://" + tmp / "plugins_registry/npu.ascend.huawei.com-reg.sock",
                                 grpc::InsecureChannelCredentials());
  auto stub = pluginregistration::Registration::NewStub(reg);
  grpc::ClientContext ctx;
  pluginregistration::PluginInfo info;
  ASSERT_TRUE(stub->GetInfo(&ctx, pluginregistration::InfoRequest(), &info).ok());
  EXPECT_EQ(info.type(), "DRAPlugin");
  EXPECT_EQ(info.name(), "npu.ascend.huawei.com");
  EXPECT_EQ(info.endpoint(), tmp.path() + "/plugins/npu.ascend.huawei.com/dra.sock");
  EXPECT_EQ(std::vector<std::string>(info.supported_versions().begin(), info.supported_versions().end()),
            (std::vector<std::string>{"v1.DRAPlugin", "v1beta1.DRAPlugin"}));

  LogCapture log;
  pluginregistration::RegistrationStatus status;
  pluginregistration::RegistrationStatusResponse sr;
  status.set_plugin_registered(true);
  grpc::ClientContext c1;
  ASSERT_TRUE(stub->NotifyRegistrationStatus(&c1, status, &sr).ok());
  EXPECT_TRUE(svc->registered());
  status.set_plugin_registered(false);
  status.set_error("endpoint already registered");
  grpc::ClientContext c2;
  ASSERT_TRUE(stub->NotifyRegistrationStatus(&c2, status, &sr).ok());
  EXPECT_FALSE(svc->registered());
  EXPECT_EQ(log.count("the kubelet did not register it: endpoint already registered"), 1);

  // Both sockets: only root (and the kubelet is root) can connect.
  for (const char* s :
       {"plugins_registry/npu.ascend.huawei.com-reg.sock", "plugins/npu.ascend.huawei.com/dra.sock"}) {
    struct stat st {};
    ASSERT_EQ(::lstat((tmp / s).c_str(), &st), 0) << s;
    EXPECT_TRUE(S_ISSOCK(st.st_mode)) << s;
    EXPECT_EQ(st.st_mode & 07777, 0600U) << s;
  }
  svc->stop();
  EXPECT_FALSE(std::filesystem::exists(tmp / "plugins_registry/npu.ascend.huawei.com-reg.sock"));
  EXPECT_FALSE(std::filesystem::exists(tmp / "plugins/npu.ascend.huawei.com/dra.sock"));
}

TEST_F(DraServiceTest, PreparesTheChipsOfThisNodeOnceAndAgainAfterARestart) {
  start();
  // npu-1 and npu-3 for request "npus" (the second through a subrequest, named by its base request), and a
  // device of another driver, which is that driver's to prepare.
  const std::string uid =
      make_claim("train", json::array({result("npus", "npu-1"), result("npus/eight", "npu-3"),
                                       result("nics", "nic-0", kNode, "nic.example.com")}));
  const std::vector<Expected> want = {{{"npus"}, "npu-1", "huawei.com/npu=1"},
                                      {{"npus"}, "npu-3", "huawei.com/npu=3"}};
  LogCapture log;
  expect_devices(prepare_one("train", uid), want);
  EXPECT_EQ(log.count("prepared claim team-a/train (" + uid + ")"), 1);

  // The kubelet repeats it: the same answer, from the checkpoint, without reading the claim again.
  expect_devices(prepare_one("train", uid), want);
  EXPECT_EQ(reads_of("train"), 1);
  const json cp = checkpoint();
  EXPECT_EQ(cp["format"], "ascend-dra-checkpoint");
  EXPECT_EQ(cp["version"], 1);
  EXPECT_EQ(cp["claims"][uid]["name"], "train");
  struct stat st {};
  ASSERT_EQ(::lstat((tmp / "plugins/npu.ascend.huawei.com/checkpoint.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600U);

  // A restart: a new service on the same folder answers from its checkpoint, even with the claim gone from
  // the API server.
  svc.reset();
  ASSERT_TRUE(api.remove(std::string(kClaims) + "/train"));
  api.clear_requests();
  start();
  expect_devices(prepare_one("train", uid), want);
  EXPECT_EQ(reads_of("train"), 0);

  // The same answer over v1beta1.
  drav1::NodePrepareResourcesRequest req;
  auto* c = req.add_claims();
  c->set_namespace_("team-a");
  c->set_name("train");
  c->set_uid(uid);
  drav1::NodePrepareResourcesResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(drav1beta1::DRAPlugin::NewStub(dra)->NodePrepareResources(&ctx, req, &resp).ok());
  ASSERT_TRUE(resp.claims().contains(uid));
  expect_devices(resp.claims().at(uid), want);
}

TEST_F(DraServiceTest, UnprepareForgetsTheClaimAndAnUnknownOneIsASuccess) {
  start();
  const std::string uid = make_claim("train", json::array({result("npus", "npu-2")}));
  expect_devices(prepare_one("train", uid), {{{"npus"}, "npu-2", "huawei.com/npu=2"}});
  LogCapture log;
  EXPECT_EQ(unprepare_one("train", uid), "");
  EXPECT_EQ(log.count("unprepared claim team-a/train (" + uid + "): npu-2"), 1);
  EXPECT_FALSE(checkpoint()["claims"].contains(uid));
  EXPECT_EQ(unprepare_one("train", uid), "");  // again: the kubelet's retry
  EXPECT_EQ(unprepare_one("never", "0b9d3c1e-0000-4000-8000-000000000001"), "");

  // Prepared again after an unprepare: read from the API server again.
  expect_devices(prepare_one("train", uid), {{{"npus"}, "npu-2", "huawei.com/npu=2"}});
  EXPECT_EQ(reads_of("train"), 2);

  // A claim the API server does not have.
  const auto ghost = prepare_one("ghost", "0b9d3c1e-0000-4000-8000-000000000002");
  EXPECT_EQ(ghost.devices_size(), 0);
  EXPECT_NE(ghost.error().find("read ResourceClaim team-a/ghost"), std::string::npos) << ghost.error();
  EXPECT_NE(ghost.error().find("not found"), std::string::npos) << ghost.error();
}

TEST_F(DraServiceTest, EachWrongClaimGetsItsOwnError) {
  start();
  const std::string replaced = make_claim("replaced", json::array({result("npus", "npu-0")}));
  const std::string unallocated = make_claim("unallocated", nullptr);
  const std::string elsewhere = make_claim("elsewhere", json::array({result("npus", "npu-0", "worker-2")}));
  const std::string others =
      make_claim("others", json::array({result("gpus", "gpu-0", kNode, "gpu.example.com")}));
  const std::string missing = make_claim("missing", json::array({result("npus", "npu-99")}));
  const std::string good = make_claim("good", json::array({result("npus", "npu-5")}));
  // A request longer than the API server allows (two DNS labels and a '/'): no checkpoint would read it back.
  const std::string long_request =
      make_claim("long-request", json::array({result(std::string(128, 'r'), "npu-6")}));
  const std::string long_name(300, 'a');

  drav1::NodePrepareResourcesRequest req;
  add_claim(req, "replaced", "0b9d3c1e-0000-4000-8000-0000000000aa");  // the uid of a claim deleted before
  add_claim(req, "unallocated", unallocated);
  add_claim(req, "elsewhere", elsewhere);
  add_claim(req, "others", others);
  add_claim(req, "missing", missing);
  add_claim(req, long_name, "0b9d3c1e-0000-4000-8000-0000000000bb");
  add_claim(req, "long-request", long_request);
  add_claim(req, "good", good);
  drav1::NodePrepareResourcesResponse resp;
  ASSERT_TRUE(prepare(req, &resp).ok());
  ASSERT_EQ(resp.claims_size(), 8);
  const std::map<std::string, std::string> want = {
      {"0b9d3c1e-0000-4000-8000-0000000000aa",
       "claim team-a/replaced is another one than asked for: uid " + replaced +
           ", not 0b9d3c1e-0000-4000-8000-0000000000aa (deleted and made again)"},
      {unallocated, "claim team-a/unallocated is not allocated (no status.allocation)"},
      {elsewhere,
       "claim team-a/elsewhere: device npu-0 is allocated in pool \"worker-2\", not in this node's "
       "(worker-1)"},
      {others, "claim team-a/others has no device of driver npu.ascend.huawei.com"},
      {missing,
       "claim team-a/missing: device npu-99 is not a usable chip of this node (usable: 0,1,2,3,4,5,6,7)"},
      {"0b9d3c1e-0000-4000-8000-0000000000bb", "the claim's name must be 1 to 253 bytes, not 300"},
      {long_request,
       "claim team-a/long-request: device npu-6: its request is 128 bytes, longer than the API server allows "
       "(127)"},
  };
  for (const auto& [uid, error] : want) {
    ASSERT_TRUE(resp.claims().contains(uid)) << uid;
    EXPECT_EQ(resp.claims().at(uid).error(), error);
    EXPECT_EQ(resp.claims().at(uid).devices_size(), 0);
  }
  expect_devices(resp.claims().at(good), {{{"npus"}, "npu-5", "huawei.com/npu=5"}});
  EXPECT_EQ(checkpoint()["claims"].size(), 1U);  // only the good one is prepared

  // A chip the node cannot hand out now (unhealthy) is refused like one it does not have.
  chips = {0, 1, 2, 3, 4, 6, 7};
  const std::string sick = make_claim("sick", json::array({result("npus", "npu-5")}));
  EXPECT_EQ(prepare_one("sick", sick).error(),
            "claim team-a/sick: device npu-5 is not a usable chip of this node (usable: 0,1,2,3,4,6,7)");
}

TEST_F(DraServiceTest, RefusesAnOversizedCallAsInvalidArgument) {
  start();
  drav1::NodePrepareResourcesRequest req;
  for (int i = 0; i < 129; ++i) add_claim(req, fmt::format("c{}", i), fmt::format("uid-{}", i));
  drav1::NodePrepareResourcesResponse resp;
  auto s = prepare(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "NodePrepareResources: 129 claims in one call; at most 128");
  EXPECT_EQ(api.requests().size(), 0U);  // refused before anything was read

  // A uid the answer cannot be keyed by.
  drav1::NodePrepareResourcesRequest bad_uid;
  add_claim(bad_uid, "train", std::string(200, 'u'));
  s = prepare(bad_uid, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            "NodePrepareResources: claim team-a/train: a claim uid must be 1 to 128 bytes, not 200");

  drav1::NodeUnprepareResourcesRequest unprep;
  for (int i = 0; i < 129; ++i) unprep.add_claims()->set_uid(fmt::format("uid-{}", i));
  drav1::NodeUnprepareResourcesResponse uresp;
  grpc::ClientContext ctx;
  s = drav1::DRAPlugin::NewStub(dra)->NodeUnprepareResources(&ctx, unprep, &uresp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(DraServiceTest, ACorruptCheckpointIsSetAside) {
  ASSERT_TRUE(make_dirs(tmp / "plugins/npu.ascend.huawei.com", 0750).ok());
  ASSERT_TRUE(atomic_replace(tmp / "plugins/npu.ascend.huawei.com/checkpoint.json",
                             "{\"format\": \"ascend-dra-chec", 0600)
                  .ok());
  LogCapture log;
  start();
  EXPECT_EQ(log.count("DRA: the checkpoint " + tmp / "plugins/npu.ascend.huawei.com/checkpoint.json" +
                      " is unusable (not JSON); moved to "),
            1);
  int aside = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp / "plugins/npu.ascend.huawei.com")) {
    aside += e.path().filename().string().starts_with("checkpoint.json.corrupt-");
  }
  EXPECT_EQ(aside, 1);
  const std::string uid = make_claim("train", json::array({result("npus", "npu-4")}));
  expect_devices(prepare_one("train", uid), {{{"npus"}, "npu-4", "huawei.com/npu=4"}});
  EXPECT_TRUE(checkpoint()["claims"].contains(uid));
}

// Two unusable checkpoints set aside within one second each keep their own file: the second never overwrites
// the first. Files of that second's name are made beforehand (for every second the test can take), so the
// names with a counter are what is met, whatever the clock does.
TEST_F(DraServiceTest, CheckpointsSetAsideInTheSameSecondAreBothKept) {
  const std::string dir = tmp / "plugins/npu.ascend.huawei.com";
  ASSERT_TRUE(make_dirs(dir, 0750).ok());
  const std::time_t now = std::time(nullptr);
  std::map<std::string, std::string> before;  // file name -> content
  for (std::time_t t = now - 1; t <= now + 60; ++t) {
    const std::string name = fmt::format("checkpoint.json.corrupt-{}", t);
    before[name] = "set aside before, " + name;
    ASSERT_TRUE(atomic_replace(dir + "/" + name, before[name], 0600).ok());
  }
  for (const char* text : {"{\"format\": \"first", "[\"second"}) {
    SCOPED_TRACE(text);
    ASSERT_TRUE(atomic_replace(dir + "/checkpoint.json", text, 0600).ok());
    LogCapture log;
    start();
    EXPECT_EQ(log.count("is unusable (not JSON); moved to " + dir + "/checkpoint.json.corrupt-"), 1);
    EXPECT_FALSE(std::filesystem::exists(dir + "/checkpoint.json"));
    svc.reset();
  }
  std::map<std::string, std::string> after;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename();
    if (!name.starts_with("checkpoint.json.corrupt-")) continue;
    std::ifstream in(e.path());
    after[name] = std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::vector<std::string> added;
  for (const auto& [name, content] : after) {
    if (before.contains(name)) {
      EXPECT_EQ(content, before[name]) << name << " was overwritten";
    } else {
      added.push_back(content);
      // <unix seconds>-<n>: the plain name of each second is taken.
      EXPECT_NE(name.find('-', std::string("checkpoint.json.corrupt-").size()), std::string::npos) << name;
    }
  }
  EXPECT_EQ(after.size(), before.size() + 2);
  std::sort(added.begin(), added.end());
  EXPECT_EQ(added, (std::vector<std::string>{"[\"second", "{\"format\": \"first"}));
}

// The kubelet prepares the claims of several pods at once: each call is answered, and the checkpoint holds
// every claim (no write lost to another), as a restart shows.
TEST_F(DraServiceTest, ConcurrentPreparesAllReachTheCheckpoint) {
  start();
  std::vector<std::string> uids;
  for (int i = 0; i < 8; ++i)
    uids.push_back(
        make_claim(fmt::format("pod-{}", i), json::array({result("npus", fmt::format("npu-{}", i))})));
  std::vector<std::string> got(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      const auto a = prepare_one(fmt::format("pod-{}", i), uids[static_cast<std::size_t>(i)]);
      got[static_cast<std::size_t>(i)] =
          a.error().empty() && a.devices_size() == 1 ? a.devices(0).cdi_device_ids(0) : a.error();
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(got[static_cast<std::size_t>(i)], fmt::format("huawei.com/npu={}", i));
  EXPECT_EQ(checkpoint()["claims"].size(), 8U);
  svc.reset();
  api.clear_requests();
  start();
  for (int i = 0; i < 8; ++i) {
    expect_devices(prepare_one(fmt::format("pod-{}", i), uids[static_cast<std::size_t>(i)]),
                   {{{"npus"}, fmt::format("npu-{}", i), fmt::format("huawei.com/npu={}", i)}});
  }
  EXPECT_EQ(api.requests().size(), 0U);
}

// A checkpoint of format 1 written out by hand: a restarted plugin answers its claims as they were prepared,
// without the API server.
TEST_F(DraServiceTest, ReadsACheckpointOfFormatOne) {
  ASSERT_TRUE(make_dirs(tmp / "plugins/npu.ascend.huawei.com", 0750).ok());
  ASSERT_TRUE(atomic_replace(tmp / "plugins/npu.ascend.huawei.com/checkpoint.json", R"({
  "format": "ascend-dra-checkpoint",
  "version": 1,
  "claims": {
    "0b9d3c1e-0000-4000-8000-0000000000c1": {
      "namespace": "team-a",
      "name": "train",
      "devices": [
        {"request_names": ["npus"], "pool_name": "worker-1", "device_name": "npu-6",
         "cdi_device_ids": ["huawei.com/npu=6"]},
        {"request_names": ["npus"], "pool_name": "worker-1", "device_name": "npu-7",
         "cdi_device_ids": ["huawei.com/npu=7"]}
      ]
    }
  }
})",
                             0600)
                  .ok());
  LogCapture log;
  start();
  EXPECT_EQ(log.count("; 1 claims prepared before"), 1);
  expect_devices(prepare_one("train", "0b9d3c1e-0000-4000-8000-0000000000c1"),
                 {{{"npus"}, "npu-6", "huawei.com/npu=6"}, {{"npus"}, "npu-7", "huawei.com/npu=7"}});
  EXPECT_EQ(reads_of("train"), 0);
}

TEST_F(DraServiceTest, EachUnusableCheckpointIsSetAsideWithItsReason) {
  struct Case {
    std::string text;
    std::string why;
  };
  const std::vector<Case> cases = {
      {R"({"format": "ascend-dra-chec)", "not JSON"},
      {R"({"format": "other", "version": 1, "claims": {}})", "format is not \"ascend-dra-checkpoint\""},
      {R"({"format": "ascend-dra-checkpoint", "version": 2, "claims": {}})", "version is not 1"},
      {R"({"format": "ascend-dra-checkpoint", "version": 4294967297, "claims": {}})", "version is not 1"},
      {R"({"format": "ascend-dra-checkpoint", "version": 1.0, "claims": {}})", "version is not 1"},
      {R"({"format": "ascend-dra-checkpoint", "version": 1, "claims": []})",
       "claims: not an object of at most 1024"},
      {R"({"format": "ascend-dra-checkpoint", "version": 1, "claims": {"u1": {"namespace": "team-a", "name": "train",
          "devices": [{"request_names": ["npus"], "pool_name": "worker-1", "device_name": 6, "cdi_device_ids": []}]}}})",
       "claims: u1: claim team-a/train: device: device_name: not a string of at most 256 bytes"},
      {std::string(20, '[') + std::string(20, ']'), "nested deeper than 8"},
  };
  const std::string dir = tmp / "plugins/npu.ascend.huawei.com";
  for (const auto& c : cases) {
    SCOPED_TRACE(c.why);
    ASSERT_TRUE(make_dirs(dir, 0750).ok());
    ASSERT_TRUE(atomic_replace(dir + "/checkpoint.json", c.text, 0600).ok());
    LogCapture log;
    start();
    EXPECT_EQ(
        log.count("DRA: the checkpoint " + dir + "/checkpoint.json is unusable (" + c.why + "); moved to "),
        1);
    EXPECT_FALSE(std::filesystem::exists(dir + "/checkpoint.json"));
    svc.reset();
    std::filesystem::remove_all(dir);
  }
}

TEST_F(DraServiceTest, AnotherUsersConnectionIsClosedBeforeItIsRead) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: a peer of another uid is made with setuid";
  start();
  const std::string path = tmp / "plugins/npu.ascend.huawei.com/dra.sock";
  // Past the file mode (which alone keeps others out), as a process that inherited a way in would be.
  ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  ASSERT_EQ(::chmod(tmp.path().c_str(), 0755), 0);
  ASSERT_EQ(::chmod((tmp / "plugins").c_str(), 0755), 0);
  ASSERT_EQ(::chmod((tmp / "plugins/npu.ascend.huawei.com").c_str(), 0755), 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
  LogCapture log;
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Only system calls here: the parent has threads.
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) ::_exit(3);
    static const char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    if (::write(fd, kPreface, sizeof(kPreface) - 1) < 0) ::_exit(0);  // already closed
    char buf[64];
    ::_exit(::read(fd, buf, sizeof(buf)) <= 0 ? 0 : 4);  // closed, never answered
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(log.count("DRA plugin: refused a connection from uid 65534"), 1);
}

// The chips the daemon lets the DRA service hand out (dra_usable_chips): the plugin's healthy ones, as
// Allocate hands them out; none while the driver is away.
class DraOnPlugin : public api_test::PluginOnApi {};

TEST_F(DraOnPlugin, UsableChipsFollowFaultsIsolationAndTheDriver) {
  using std::chrono::seconds;
  start_plugin(std::chrono::milliseconds(50));
  const DraNodeChips chips = dra_usable_chips(*plugin);
  auto are = [&](const std::vector<int>& want) {
    return api_test::wait_until(
        [&] {
          auto c = chips();
          return c.ok() && *c == want;
        },
        seconds(10));
  };
  EXPECT_TRUE(are({0, 1, 2, 3, 4, 5, 6, 7}));
  // A fault at SeparateNPU level (the code's level in the table) takes its chip out.
  ASSERT_TRUE(emu.set_fault(3, 0x80E18402, npu::Health::kCritical).ok());
  EXPECT_TRUE(are({0, 1, 2, 4, 5, 6, 7}));
  plugin->isolate(6, "by hand");
  EXPECT_TRUE(are({0, 1, 2, 4, 5, 7}));
  ASSERT_TRUE(emu.unload().ok());
  EXPECT_TRUE(api_test::wait_until(
      [&] {
        auto c = chips();
        return !c.ok() && c.error().message().starts_with("the NPU driver is unavailable: ");
      },
      seconds(10)));
}

// --dra-vnpu on an emulated Atlas 800T A2 (8 x 910B3: templates vir10_3c_32g, 10 AICores and 32 GB, and
// vir05_1c_16g, 5 AICores and 16 GB, of a chip's 20 AICores and 64 GB; the vNPU template reference). A vNPU
// gets the lowest free id of its chip's range 100 + 16 * phy .. + 15 (the driver's rule, reference
// vnpu-templates): the first on chip 2 is 132, on chip 3 148. Its owner is "dra-claim/<uid>/<device>".
class DraVnpuService : public api_test::PluginOnApi {
 protected:
  static constexpr const char* kClaimsPath = "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims";

  void SetUp() override {
    start_plugin(std::chrono::milliseconds(50));
    opts.node_name = kNode;
    opts.registry_dir = tmp / "plugins_registry";
    opts.plugin_dir = tmp / "plugins/npu.ascend.huawei.com";
  }

  void start() {
    DraVnpus v;
    v.query = query.get();
    v.healthy = dra_healthy_chips(*plugin);
    v.cdi_dir = tmp / "cdi";
    svc = std::make_unique<DraService>(opts, *client, dra_usable_chips(*plugin), std::move(v));
    auto st = svc->start();
    ASSERT_TRUE(st.ok()) << st.error().message();
  }

  std::string make_claim(const std::string& name, const std::vector<std::string>& devices) {
    json results = json::array();
    for (const auto& d : devices) results.push_back(result("npus", d));
    return api.create(kClaimsPath, claim_object(name, results))["metadata"]["uid"].get<std::string>();
  }

  DraPrepared prepare(const std::string& name, const std::string& uid) {
    auto r = svc->prepare({{"team-a", uid, name}});
    EXPECT_TRUE(r.ok()) << r.error().message();
    return r.ok() && r->contains(uid) ? r->at(uid) : DraPrepared{{}, "(no answer)"};
  }

  std::string unprepare(const std::string& name, const std::string& uid) {
    auto r = svc->unprepare({{"team-a", uid, name}});
    EXPECT_TRUE(r.ok()) << r.error().message();
    return r.ok() && r->contains(uid) ? r->at(uid) : "(no answer)";
  }

  std::vector<npu::Vnpu> vnpus() {
    auto s = query->snapshot();
    EXPECT_TRUE(s.ok());
    return s.ok() ? s->vnpus : std::vector<npu::Vnpu>{};
  }

  json cdi_spec(const std::string& uid) {
    std::ifstream in(tmp / ("cdi/npu.ascend.huawei.com-claim_" + uid + ".json"));
    return in ? json::parse(in, nullptr, false) : json();
  }

  json checkpoint_claims() {
    std::ifstream in(tmp / "plugins/npu.ascend.huawei.com/checkpoint.json");
    const json doc = json::parse(in, nullptr, false);
    return doc.is_object() ? doc["claims"] : json();
  }

  DraOptions opts;
  std::unique_ptr<DraService> svc;
};

TEST_F(DraVnpuService, PrepareMakesTheVnpuWritesItsCdiSpecAndCheckpointsItAndUnprepareDestroysIt) {
  start();
  const std::string uid = make_claim("infer", {"npu-2-vir05-1c-16g-1"});
  const auto a = prepare("infer", uid);
  ASSERT_EQ(a.error, "");
  ASSERT_EQ(a.devices.size(), 1u);
  EXPECT_EQ(a.devices[0].device_name, "npu-2-vir05-1c-16g-1");
  EXPECT_EQ(a.devices[0].pool_name, kNode);
  EXPECT_EQ(a.devices[0].request_names, std::vector<std::string>{"npus"});
  EXPECT_EQ(a.devices[0].cdi_device_ids,
            std::vector<std::string>{"npu.ascend.huawei.com/claim=" + uid + "-npu-2-vir05-1c-16g-1"});
  auto v = vnpus();
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].id, 132);
  EXPECT_EQ(v[0].phy_id, 2);
  EXPECT_EQ(v[0].template_name, "vir05_1c_16g");
  EXPECT_EQ(v[0].owner.container_id, "dra-claim/" + uid + "/npu-2-vir05-1c-16g-1");
  EXPECT_EQ(v[0].status, 1) << "in use";

  const json spec = cdi_spec(uid);
  ASSERT_TRUE(spec.is_object());
  // CDI (SPEC.md): the fully-qualified name is "<kind>=<device name>"; only the fields the spec defines.
  EXPECT_EQ(spec["kind"].get<std::string>() + "=" + spec["devices"][0]["name"].get<std::string>(),
            a.devices[0].cdi_device_ids[0])
      << "the id answered is the spec's";
  for (const auto& [k, v] : spec.items())
    EXPECT_TRUE(k == "cdiVersion" || k == "kind" || k == "devices" || k == "containerEdits") << k;
  EXPECT_EQ(spec["kind"], "npu.ascend.huawei.com/claim");
  EXPECT_EQ(spec["cdiVersion"], "0.5.0") << "a device name that may start with a digit";
  ASSERT_EQ(spec["devices"].size(), 1u);
  EXPECT_EQ(spec["devices"][0]["name"], uid + "-npu-2-vir05-1c-16g-1");
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["deviceNodes"],
            json::parse(R"([{"path":"/dev/davinci132","hostPath":")" + root +
                        R"(/dev/vdavinci132","type":"c","permissions":"rw"}])"))
      << "the host's vdavinci is the container's davinci, as the Ascend runtime does";
  std::vector<std::string> control;
  for (const auto& n : spec["containerEdits"]["deviceNodes"]) control.push_back(n["path"]);
  EXPECT_EQ(control, (std::vector<std::string>{"/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"}));
  bool npu_smi = false;
  for (const auto& m : spec["containerEdits"]["mounts"])
    npu_smi = npu_smi || (m["containerPath"] == "/usr/local/bin/npu-smi" &&
                          m["hostPath"] == root + "/usr/local/bin/npu-smi");
  EXPECT_TRUE(npu_smi) << spec["containerEdits"].dump();
  EXPECT_EQ(checkpoint_claims()[uid]["devices"][0]["vnpu_id"], 132) << "checkpointed before the answer";

  // The kubelet repeats the call: the same answer, no second vNPU.
  const auto again = prepare("infer", uid);
  EXPECT_EQ(again.error, "");
  EXPECT_EQ(again.devices, a.devices);
  EXPECT_EQ(vnpus().size(), 1u);
  // The chip holds a vNPU: it is not a whole chip to hand out now.
  auto usable = dra_usable_chips(*plugin);
  EXPECT_TRUE(api_test::wait_until(
      [&] {
        auto c = usable();
        return c.ok() && *c == std::vector<int>{0, 1, 3, 4, 5, 6, 7};
      },
      std::chrono::seconds(10)));

  EXPECT_EQ(unprepare("infer", uid), "");
  EXPECT_TRUE(vnpus().empty());
  EXPECT_TRUE(cdi_spec(uid).is_null()) << "the spec is removed";
  EXPECT_FALSE(checkpoint_claims().contains(uid));
  EXPECT_EQ(unprepare("infer", uid), "") << "again: unknown, a success";
}

TEST_F(DraVnpuService, ARestartedPluginAnswersFromTheCheckpointAndUnprepareDestroysTheRecordedVnpu) {
  start();
  const std::string uid = make_claim("infer", {"npu-3-vir10-3c-32g-0", "npu-3-vir05-1c-16g-2"});
  const auto a = prepare("infer", uid);
  ASSERT_EQ(a.error, "");
  ASSERT_EQ(vnpus().size(), 2u);
  EXPECT_EQ(vnpus()[0].id, 148);
  EXPECT_EQ(vnpus()[1].id, 149);
  svc.reset();  // the plugin restarts
  start();
  api.clear_requests();
  const auto b = prepare("infer", uid);
  EXPECT_EQ(b.error, "");
  EXPECT_EQ(b.devices, a.devices);
  EXPECT_EQ(vnpus().size(), 2u) << "no second vNPU";
  EXPECT_TRUE(api.requests().empty()) << "answered from the checkpoint";
  svc.reset();
  start();
  EXPECT_EQ(unprepare("infer", uid), "");
  EXPECT_TRUE(vnpus().empty()) << "the recorded vNPUs are destroyed";
  EXPECT_TRUE(cdi_spec(uid).is_null());
}

TEST_F(DraVnpuService, AVnpuMadeBeforeACrashIsTakenOverNotMadeTwice) {
  start();
  const std::string uid = make_claim("infer", {"npu-2-vir05-1c-16g-0"});
  // The plugin made the vNPU, then died before its checkpoint: the vNPU carries the claim's tag.
  npu::VnpuOwner tag;
  tag.container_id = "dra-claim/" + uid + "/npu-2-vir05-1c-16g-0";
  ASSERT_TRUE(query->create_vnpu(2, "vir05_1c_16g", std::nullopt, tag).ok());
  const auto a = prepare("infer", uid);
  ASSERT_EQ(a.error, "");
  ASSERT_EQ(vnpus().size(), 1u);
  EXPECT_EQ(checkpoint_claims()[uid]["devices"][0]["vnpu_id"], 132);
  EXPECT_EQ(unprepare("infer", uid), "");
  EXPECT_TRUE(vnpus().empty());
}

TEST_F(DraVnpuService, UnprepareOfAClaimNeverCheckpointedDestroysTheVnpusLeftWithItsTag) {
  start();
  const std::string uid = make_claim("infer", {"npu-5-vir05-1c-16g-0"});
  // The plugin made the vNPU and died before its checkpoint; the pod went meanwhile.
  npu::VnpuOwner tag;
  tag.container_id = "dra-claim/" + uid + "/npu-5-vir05-1c-16g-0";
  ASSERT_TRUE(query->create_vnpu(5, "vir05_1c_16g", std::nullopt, tag).ok());
  npu::VnpuOwner other;
  other.container_id = "dra-claim/another-uid/npu-5-vir05-1c-16g-1";
  ASSERT_TRUE(query->create_vnpu(5, "vir05_1c_16g", std::nullopt, other).ok());
  // While the host cannot be read, whether the claim left vNPUs is unknown: an error, so the kubelet asks
  // again, not a success that would leave them.
  const std::string state = root + "/" + npu::kStateFile;
  ASSERT_EQ(::rename(state.c_str(), (state + ".away").c_str()), 0);
  EXPECT_NE(unprepare("infer", uid).find("read the NPU host for the claim's vNPUs"), std::string::npos);
  ASSERT_EQ(::rename((state + ".away").c_str(), state.c_str()), 0);
  EXPECT_EQ(vnpus().size(), 2u);
  EXPECT_EQ(unprepare("infer", uid), "");
  const auto left = vnpus();
  ASSERT_EQ(left.size(), 1u) << "another claim's vNPU stays";
  EXPECT_EQ(left[0].owner.container_id, "dra-claim/another-uid/npu-5-vir05-1c-16g-1");
}

TEST_F(DraVnpuService, AClaimWhoseVnpuIsGoneGetsAClearErrorAndUnprepareStillSucceeds) {
  start();
  const std::string uid = make_claim("infer", {"npu-2-vir05-1c-16g-0"});
  ASSERT_EQ(prepare("infer", uid).error, "");
  svc.reset();
  ASSERT_TRUE(query->destroy_vnpu(132, 2, std::nullopt).ok());  // by hand, while the plugin was away
  start();
  const auto a = prepare("infer", uid);
  EXPECT_EQ(a.error,
            "claim team-a/infer: device npu-2-vir05-1c-16g-0: its vNPU 132 no longer exists "
            "(destroyed outside the plugin, or the host restarted); the claim cannot be prepared "
            "again: delete its pod so that it is unprepared and allocated anew");
  EXPECT_TRUE(a.devices.empty());
  EXPECT_TRUE(checkpoint_claims().contains(uid)) << "kept for the unprepare";
  EXPECT_EQ(unprepare("infer", uid), "");
  EXPECT_FALSE(checkpoint_claims().contains(uid));
  EXPECT_TRUE(cdi_spec(uid).is_null());
}

TEST_F(DraVnpuService, AClaimThatDoesNotFitLeavesNothingBehind) {
  start();
  // Two vir10_3c_32g take chip 3's 20 AICores; a vir05_1c_16g beside them does not fit (the seam's
  // over-commit check, which the allocator's counters never let happen): the two made are destroyed again.
  const std::string uid =
      make_claim("big", {"npu-3-vir10-3c-32g-0", "npu-3-vir10-3c-32g-1", "npu-3-vir05-1c-16g-0"});
  const auto a = prepare("big", uid);
  EXPECT_NE(a.error.find("device npu-3-vir05-1c-16g-0: create a vir05_1c_16g vNPU on chip 3"),
            std::string::npos)
      << a.error;
  EXPECT_NE(a.error.find("AICore"), std::string::npos) << a.error;
  EXPECT_TRUE(vnpus().empty());
  EXPECT_TRUE(cdi_spec(uid).is_null());
  EXPECT_FALSE(checkpoint_claims().is_object() && checkpoint_claims().contains(uid));
}

TEST_F(DraVnpuService, AVnpuOfAnUnhealthyChipOrOfAnUnknownTemplateIsRefused) {
  start();
  ASSERT_TRUE(emu.set_fault(4, 0x80E18402, npu::Health::kCritical).ok());
  auto healthy = dra_healthy_chips(*plugin);
  ASSERT_TRUE(api_test::wait_until(
      [&] {
        auto c = healthy();
        return c.ok() && *c == std::vector<int>{0, 1, 2, 3, 5, 6, 7};
      },
      std::chrono::seconds(10)));
  const std::string sick = make_claim("sick", {"npu-4-vir05-1c-16g-0"});
  EXPECT_EQ(
      prepare("sick", sick).error,
      "claim team-a/sick: device npu-4-vir05-1c-16g-0 is a vNPU of chip 4, which is not a healthy chip of "
      "this node (healthy: 0,1,2,3,5,6,7)");
  const std::string odd = make_claim("odd", {"npu-1-vir05-1c-8g-0"});  // a 910B4's template, not a 910B3's
  EXPECT_NE(prepare("odd", odd).error.find("no template of this host has that name"), std::string::npos);
  EXPECT_TRUE(vnpus().empty());
}

TEST_F(DraServiceTest, AVnpuClaimWithoutDraVnpuIsThatClaimsError) {
  start();
  const std::string uid = make_claim("v", json::array({result("npus", "npu-0-vir05-1c-16g-0")}));
  const auto a = prepare_one("v", uid);
  EXPECT_EQ(a.error(),
            "claim team-a/v: device npu-0-vir05-1c-16g-0 is a vNPU, and this node's plugin does not publish "
            "vNPUs (--dra-vnpu)");
}

}  // namespace
}  // namespace ascend::plugin
