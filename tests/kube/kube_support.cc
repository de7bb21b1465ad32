#include "kube_support.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <random>
#include <sstream>
#include <thread>

namespace ascend::kube::testing {

namespace ht = ascend::hook::testing;
using nlohmann::json;

std::string source_dir() {
  return ASCEND_SOURCE_DIR;
}

std::string kube_bin_dir() {
  auto r = ht::run({source_dir() + "/tests/kube/build-binaries", "--check"});
  if (r.exit_code != 0) return "";
  std::string out = r.out;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

namespace {

// The environment of the cluster script: PATH, and the binaries' folder.
std::vector<std::string> script_env(const std::string& bin) {
  const char* path = ::getenv("PATH");
  return {"PATH=" + std::string(path != nullptr ? path : "/usr/bin:/bin"), "ASCEND_KUBE_BIN=" + bin};
}

}  // namespace

bool wait_until(const std::function<bool()>& f, std::chrono::milliseconds timeout,
                std::chrono::milliseconds every) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (f()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(every);
  }
}

Cluster::Cluster(std::string dir, const std::string& runtime_config) : dir_(std::move(dir)) {
  bin_ = kube_bin_dir();
  if (bin_.empty()) {
    error_ = "the Kubernetes binaries are not built (tests/kube/build-binaries)";
    return;
  }
  std::vector<std::string> env = script_env(bin_);
  if (!runtime_config.empty()) {
    env.push_back("ASCEND_RUNTIME_BIN=" + ht::bin(""));
    env.push_back("ASCEND_RUNTIME_CONFIG=" + runtime_config);
  }
  ht::RunOptions o;
  o.env = env;
  o.timeout = std::chrono::minutes(4);
  auto r = ht::run({source_dir() + "/tests/kube/cluster", "start", dir_}, o);
  if (r.exit_code != 0) {
    error_ = "tests/kube/cluster start failed (exit " + std::to_string(r.exit_code) + "):\n" + r.err + r.out;
    return;
  }
  ok_ = true;
}

Cluster::~Cluster() {
  ht::RunOptions o;
  o.timeout = std::chrono::minutes(2);
  ht::run({source_dir() + "/tests/kube/cluster", "stop", dir_}, o);
}

std::string Cluster::log(const std::string& daemon) const {
  return ht::slurp(dir_ + "/logs/" + daemon + ".log");
}

Output Cluster::kubectl(const std::vector<std::string>& args, const std::string& input) const {
  // Its discovery cache in the cluster's folder (the test's environment has no HOME: it would be ./.kube).
  std::vector<std::string> argv = {bin("kubectl"), "--kubeconfig", kubeconfig(), "--cache-dir",
                                   dir_ + "/kubectl-cache"};
  argv.insert(argv.end(), args.begin(), args.end());
  ht::RunOptions o;
  o.input = input;
  o.timeout = std::chrono::seconds(60);
  return ht::run(argv, o);
}

json Cluster::get(const std::vector<std::string>& args) const {
  std::vector<std::string> a = {"get"};
  a.insert(a.end(), args.begin(), args.end());
  a.insert(a.end(), {"-o", "json"});
  auto r = kubectl(a);
  if (r.exit_code != 0) return json(json::value_t::discarded);
  return json::parse(r.out, nullptr, false);
}

std::unique_ptr<httplib::SSLClient> Cluster::api_client() const {
  auto cli = std::make_unique<httplib::SSLClient>("127.0.0.1", kApiPort, dir_ + "/pki/admin.crt",
                                                  dir_ + "/pki/admin.key");
  cli->set_ca_cert_path(ca_file().c_str());
  cli->enable_server_certificate_verification(true);
  cli->set_connection_timeout(2);
  return cli;
}

json Cluster::api_get(const std::string& path) const {
  auto r = api_client()->Get(path.c_str());
  if (!r || r->status != 200) return json(json::value_t::discarded);
  return json::parse(r->body, nullptr, false);
}

Output Cluster::script(const std::string& command, const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {source_dir() + "/tests/kube/cluster", command, dir_};
  argv.insert(argv.end(), args.begin(), args.end());
  ht::RunOptions o;
  o.timeout = std::chrono::minutes(3);
  o.env = script_env(bin_);
  return ht::run(argv, o);
}

std::string Cluster::token_kubeconfig(const std::string& name, const std::string& token) const {
  std::string path = dir_ + "/" + name + ".kubeconfig";
  ht::spit(path, "apiVersion: v1\nkind: Config\nclusters:\n  - name: test\n    cluster:\n      server: " +
                     api_url() + "\n      certificate-authority: " + ca_file() +
                     "\nusers:\n  - name: " + name + "\n    user:\n      token: " + token +
                     "\ncontexts:\n  - name: test\n    context: {cluster: test, user: " + name +
                     "}\ncurrent-context: test\n");
  ::chmod(path.c_str(), 0600);
  return path;
}

// ---- the test bed -----------------------------------------------------------------------------------------

using namespace std::chrono_literals;

const std::vector<std::string>& api_only_nodes() {
  static const std::vector<std::string> n = {"kube-node-1", "kube-node-2", "kube-node-3"};
  return n;
}

std::string deploy(const std::string& file) {
  return source_dir() + "/deploy/kubernetes/" + file;
}

json npu_pod(const std::string& name, int npus, const std::string& script, const std::string& scheduler,
             const std::string& node) {
  json p = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"namespace", "default"}}},
      {"spec",
       {{"schedulerName", scheduler},
        {"runtimeClassName", "ascend"},
        {"restartPolicy", "Never"},
        {"terminationGracePeriodSeconds", 1},
        {"containers", json::array({{{"name", "main"},
                                     {"image", "docker.io/library/busybox:test"},
                                     {"imagePullPolicy", "Never"},
                                     {"command", json::array({"sh", "-c", script})},
                                     {"resources", {{"limits", {{kResource, std::to_string(npus)}}}}}}})}}}};
  if (!node.empty()) p["spec"]["nodeSelector"] = {{"kubernetes.io/hostname", node}};
  return p;
}

json tp4pp2dp2_job(const std::string& name, const std::string& script, const std::string& scheduler) {
  json pod_spec = npu_pod(name, 4, script, scheduler, "")["spec"];
  pod_spec["containers"][0]["name"] = "trainer";
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata", {{"name", name}, {"namespace", "default"}}},
          {"spec",
           {{"completionMode", "Indexed"},
            {"completions", 4},
            {"parallelism", 4},
            {"backoffLimit", 0},
            {"template",
             {{"metadata",
               {{"annotations",
                 {{"ascend.huawei.com/job", name},
                  {"ascend.huawei.com/job-pods", "4"},
                  {"ascend.huawei.com/parallel", "tp=4,pp=2,dp=2"}}}}},
              {"spec", pod_spec}}}}}};
}

Testbed::Testbed() = default;

Testbed::~Testbed() {
  stopping_ = true;
  if (heartbeat_.joinable()) heartbeat_.join();
  stop_plugin();
  stop_serve();
  cluster_.reset();  // every daemon of the cluster stopped
  host_.reset();
}

std::string Testbed::path(const std::string& rel) const {
  return tmp_->path() + "/" + rel;
}

std::string Testbed::start() {
  tmp_ = std::make_unique<ht::TempDir>("kube");
  ::chmod(tmp_->path().c_str(), 0755);
  host_ = std::make_unique<ht::EmulatedHost>(host_root(), "atlas800t-a2");
  if (!host_->ok()) return "npu-sim load: " + host_->error();
  // The runtime's config as deploy/kubernetes/node-config.yaml has it for a shared node, on this host.
  ::mkdir(path("runtime").c_str(), 0755);
  runtime_config_ = ht::write_hook_config(path("runtime"), host_root(), {}, "spec",
                                          "accept-env-when-unprivileged: false\nruntime-path: runc\n");
  cluster_ = std::make_unique<Cluster>(path("k"), runtime_config_);
  if (!cluster_->ok()) return cluster_->error();
  Cluster& c = *cluster_;

  // deploy/: every object but the workloads (their images cannot be pulled here: the test bed runs the same
  // binaries on the host), as an operator applies them.
  json objects = json::array();
  for (const char* f :
       {"ascend-device-plugin-rbac.yaml", "ascend-device-plugin.yaml", "ascend-scheduler.yaml",
        "runtimeclass.yaml", "dra-deviceclass.yaml", "dra-vnpu-deviceclasses.yaml"}) {
    auto r = c.kubectl({"create", "--dry-run=client", "-o", "json", "-f", deploy(f)});
    if (r.exit_code != 0) return std::string(f) + ": " + r.err;
    // One JSON document per object, one after the other.
    std::istringstream in(r.out);
    try {
      while ((in >> std::ws).peek() != std::char_traits<char>::eof()) {
        json o;
        in >> o;
        std::string kind = o.at("kind");
        if (kind != "Deployment" && kind != "DaemonSet" && kind != "Job") objects.push_back(std::move(o));
      }
    } catch (const json::exception& e) {
      return std::string(f) + ": kubectl printed what is not JSON objects: " + e.what();
    }
  }
  auto a = c.kubectl({"apply", "-f", "-"},
                     json{{"apiVersion", "v1"}, {"kind", "List"}, {"items", objects}}.dump());
  if (a.exit_code != 0) return "kubectl apply of deploy/'s objects: " + a.err;
  applied_ = a.out;

  // The plugins' token, and the scheduler's service account token (its Bindings, under deploy/'s RBAC).
  token_file_ = path("plugins-token");
  ht::spit(token_file_, "kube-test-" + std::to_string(std::random_device{}()) + "\n");
  ::chmod(token_file_.c_str(), 0600);
  auto t = c.kubectl({"-n", "kube-system", "create", "token", "ascend-scheduler", "--duration", "4h"});
  if (t.exit_code != 0) return "kubectl create token: " + t.err;
  std::string token = t.out.substr(0, t.out.find_last_not_of('\n') + 1);
  sa_token_file_ = path("sa-token");
  ht::spit(sa_token_file_, token);
  ::chmod(sa_token_file_.c_str(), 0600);
  auto pt = c.kubectl({"-n", "kube-system", "create", "token", "ascend-device-plugin", "--duration", "4h"});
  if (pt.exit_code != 0) return "kubectl create token ascend-device-plugin: " + pt.err;
  plugin_token_file_ = path("plugin-sa-token");
  ht::spit(plugin_token_file_, pt.out.substr(0, pt.out.find_last_not_of('\n') + 1));
  ::chmod(plugin_token_file_.c_str(), 0600);

  for (const auto& n : api_only_nodes()) put_api_only_node(n);
  heartbeat_ = std::thread([this] { heartbeat(); });
  std::string text = "name: kube-test\nnodes:\n";
  std::vector<std::string> names = {c.node()};
  names.insert(names.end(), api_only_nodes().begin(), api_only_nodes().end());
  for (std::size_t i = 0; i < names.size(); ++i) {
    text += "  - {name: " + names[i] + ", profile: atlas800t-a2, leaf: leaf-" + std::to_string(i / 2) +
            ", spine: spine-0}\n";
  }
  cluster_file_ = path("cluster.yaml");
  ht::spit(cluster_file_, text);
  start_serve();
  if (!wait_until([&] { return serve_healthy(); }, 10s)) {
    return "ascend-scheduler serve did not start: " + ht::slurp(path("scheduler.log"));
  }

  // kube-scheduler: the configuration from deploy/'s ConfigMap, as the API server stores it, with the
  // ascend-scheduler service account's credentials (deploy/'s RBAC is what it runs under).
  auto cfg = c.kubectl({"-n", "kube-system", "get", "configmap", "ascend-scheduler-config", "-o",
                        "jsonpath={.data.scheduler-config\\.yaml}"});
  if (cfg.exit_code != 0) return "the scheduler's ConfigMap: " + cfg.err;
  scheduler_config_ = path("scheduler-config.yaml");
  ht::spit(scheduler_config_, cfg.out);
  scheduler_kubeconfig_ = c.token_kubeconfig("ascend-scheduler", token);
  auto s = c.script("scheduler", {scheduler_config_, scheduler_kubeconfig_});
  if (s.exit_code != 0) return "kube-scheduler: " + s.err + s.out;

  start_plugin();
  if (!wait_until([&] { return npus_of(c.node()) == std::pair{8, 8}; }, 20s)) {
    return "the device plugin did not register with the kubelet: " + ht::slurp(path("plugin.log"));
  }
  return "";
}

std::string Testbed::serve_url() const {
  return "http://127.0.0.1:" + std::to_string(kPluginsPort);
}

void Testbed::start_serve() {
  serve_pid_ = start_replica(kPluginsPort, kExtenderListen, "scheduler.log");
}

int Testbed::start_replica(int port, const std::string& extender_listen, const std::string& log) const {
  // No --state: the API server holds every record (issue 22); the cache is rebuilt from it on a start.
  return ht::spawn_background({ht::bin("ascend-scheduler"),
                               "serve",
                               "--cluster",
                               cluster_file_,
                               "--listen",
                               "127.0.0.1:" + std::to_string(port),
                               "--extender-listen",
                               extender_listen,
                               "--token-file",
                               token_file_,
                               "--kube-api",
                               cluster_->api_url(),
                               "--kube-token-file",
                               sa_token_file_,
                               "--kube-ca-file",
                               cluster_->ca_file(),
                               "--instance",
                               log.substr(0, log.find('.')),
                               "--reservation-ttl",
                               "20"},
                              path(log));
}

void Testbed::kill_serve() {
  if (serve_pid_ > 0) {
    ::kill(serve_pid_, SIGKILL);
    ht::stop_process(serve_pid_, 5s);
  }
  serve_pid_ = -1;
}

bool Testbed::serve_ready(int port) const {
  httplib::Client cli("http://127.0.0.1:" + std::to_string(port));
  cli.set_connection_timeout(1);
  auto r = cli.Get("/readyz");
  return r && r->status == 200;
}

void Testbed::stop_serve() {
  if (serve_pid_ > 0) ::kill(serve_pid_, SIGCONT);  // a test may have stopped it
  ht::stop_process(serve_pid_, 5s);
  serve_pid_ = -1;
}

bool Testbed::serve_healthy() const {
  httplib::Client cli(serve_url());
  cli.set_connection_timeout(1);
  auto r = cli.Get("/healthz");
  return r && r->status == 200;
}

httplib::Headers Testbed::bearer() const {
  std::string tok = ht::slurp(token_file_);
  tok = tok.substr(0, tok.find_last_not_of('\n') + 1);
  return {{"Authorization", "Bearer " + tok}};
}

json Testbed::scheduler_get(const std::string& p, int port) const {
  httplib::Client cli("http://127.0.0.1:" + std::to_string(port));
  cli.set_connection_timeout(2);
  auto r = cli.Get(p.c_str(), bearer());
  if (!r || r->status != 200) return json(json::value_t::discarded);
  return json::parse(r->body, nullptr, false);
}

json Testbed::scheduler_post(const std::string& p, const json& body, int port) const {
  httplib::Client cli("http://127.0.0.1:" + std::to_string(port));
  cli.set_connection_timeout(2);
  auto r = cli.Post(p.c_str(), bearer(), body.dump(), "application/json");
  if (!r) return json(json::value_t::discarded);
  json out = json::parse(r->body, nullptr, false);
  if (r->status != 200) return json{{"status", r->status}, {"body", out}};
  return out;
}

bool Testbed::wait_real_node_free(std::chrono::milliseconds timeout) const {
  return wait_until(
      [&] {
        json v = scheduler_get("/v1/cluster");
        if (!v.is_object()) return false;
        for (const auto& n : v["nodes"]) {
          if (n["name"] != cluster_->node()) continue;
          int free = 0;
          for (const auto& c : n["chips"]) free += c["state"] == "free" ? 1 : 0;
          return free == 8;
        }
        return false;
      },
      timeout);
}

void Testbed::start_plugin(const std::vector<std::string>& extra, bool scheduler_http) {
  std::vector<std::string> argv = {
      ht::bin("ascend-device-plugin"), "--kubelet-socket-dir", "/var/lib/kubelet/device-plugins",
      "--host-root", host_root(), "--backend", "emulator", "--node-name", cluster_->node(),
      // Its device ConfigMap and Node labels, under deploy/'s RBAC.
      "--kube-api", cluster_->api_url(), "--kube-token-file", plugin_token_file_, "--kube-ca-file",
      cluster_->ca_file(), "--ranktable-dir", path("ranktables"), "--pod-resources-socket",
      cluster_->dir() + "/kubelet/pod-resources/kubelet.sock", "--health-interval", "200"};
  if (scheduler_http) {
    for (const std::string& a :
         {std::string("--scheduler-url"), serve_url(), std::string("--scheduler-token-file"), token_file_})
      argv.push_back(a);
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  plugin_pid_ = ht::spawn_background(argv, path("plugin.log"));
}

void Testbed::stop_plugin() {
  if (plugin_pid_ > 0) ::kill(plugin_pid_, SIGCONT);  // a paused one could not act on SIGTERM
  ht::stop_process(plugin_pid_, 5s);
  plugin_pid_ = -1;
}

void Testbed::pause_plugin() {
  if (plugin_pid_ > 0) ::kill(plugin_pid_, SIGSTOP);
}

void Testbed::kill_plugin() {
  if (plugin_pid_ > 0) {
    ::kill(plugin_pid_, SIGKILL);
    ht::stop_process(plugin_pid_, 5s);
  }
  plugin_pid_ = -1;
}

std::pair<int, int> Testbed::npus_of(const std::string& node, const std::string& resource) const {
  json n = cluster_->get({"node", node});
  if (n.is_discarded()) return {-1, -1};
  auto num = [&](const char* field) {
    const json& m = n["status"][field];
    if (!m.is_object() || !m.contains(resource)) return -1;
    return std::stoi(m[resource].get<std::string>());
  };
  return {num("capacity"), num("allocatable")};
}

json Testbed::pod(const std::string& name, const std::string& ns) const {
  return cluster_->get({"pod", name, "-n", ns});
}

std::string Testbed::phase_of(const std::string& name) const {
  json p = pod(name);
  return p.is_discarded() ? "" : p["status"].value("phase", "");
}

std::string Testbed::events_of(const std::string& name, const std::string& ns) const {
  json l = cluster_->get({"events", "-n", ns, "--field-selector", "involvedObject.name=" + name});
  std::string out;
  if (l.is_discarded()) return out;
  for (const auto& e : l["items"]) out += e.value("reason", "") + ": " + e.value("message", "") + "\n";
  return out;
}

Output Testbed::apply_json(const json& object) const {
  return cluster_->kubectl({"apply", "-f", "-"}, object.dump());
}

void Testbed::force_delete(const std::string& kind, const std::string& name, const std::string& ns) const {
  cluster_->kubectl(
      {"delete", kind, name, "-n", ns, "--force", "--grace-period=0", "--ignore-not-found", "--wait=false"});
}

void Testbed::put_api_only_node(const std::string& name) const {
  json node = {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}, {"type", "api-only"}}}}}};
  cluster_->kubectl({"create", "-f", "-"}, node.dump());
  const json resources = {{"cpu", "8"}, {"memory", "64Gi"}, {"pods", "110"}, {kResource, "8"}};
  json status = {{"status",
                  {{"capacity", resources},
                   {"allocatable", resources},
                   {"conditions", json::array({{{"type", "Ready"},
                                                {"status", "True"},
                                                {"reason", "KubeletReady"},
                                                {"message", "kept by the test bed"}}})}}}};
  cluster_->kubectl({"patch", "node", name, "--subresource=status", "--type=merge", "-p", status.dump()});
}

void Testbed::heartbeat() {
  auto now = [] {
    auto t = std::chrono::system_clock::now();
    std::time_t secs = std::chrono::system_clock::to_time_t(t);
    std::tm tm{};
    ::gmtime_r(&secs, &tm);
    char buf[40];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count() % 1000000;
    char out[64];
    std::snprintf(out, sizeof out, "%s.%06lldZ", buf, static_cast<long long>(us));
    return std::string(out);
  };
  while (!stopping_) {
    auto cli = cluster_->api_client();
    for (const auto& n : api_only_nodes()) {
      std::string path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/" + n;
      json patch = {{"spec", {{"holderIdentity", n}, {"leaseDurationSeconds", 40}, {"renewTime", now()}}}};
      auto r = cli->Patch(path.c_str(), patch.dump(), "application/merge-patch+json");
      if (r && r->status == 404) {
        json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                      {"kind", "Lease"},
                      {"metadata", {{"name", n}, {"namespace", "kube-node-lease"}}},
                      {"spec", patch["spec"]}};
        cli->Post("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", lease.dump(),
                  "application/json");
      }
    }
    for (int i = 0; i < 50 && !stopping_; ++i) std::this_thread::sleep_for(100ms);
  }
}

std::string Testbed::set_api_only_node_in_use(const std::string& name, const std::vector<int>& in_use) const {
  std::string free = std::to_string(8 - static_cast<int>(in_use.size()));
  json status = {{"status", {{"allocatable", {{kResource, free}}}}}};
  auto r =
      cluster_->kubectl({"patch", "node", name, "--subresource=status", "--type=merge", "-p", status.dump()});
  if (r.exit_code != 0) return "patching " + name + "'s allocatable: " + r.err;
  json chips = json::array();
  for (int c = 0; c < 8; ++c) {
    bool used = std::find(in_use.begin(), in_use.end(), c) != in_use.end();
    chips.push_back({{"phy_id", c}, {"healthy", true}, {"in_use", used}});
  }
  httplib::Client cli(serve_url());
  auto a = cli.Put(("/v1/nodes/" + name).c_str(), bearer(),
                   json{{"resource", kResource}, {"chips", chips}}.dump(), "application/json");
  if (!a || a->status != 200) return "the inventory of " + name + ": " + (a ? a->body : "no answer");
  return "";
}

std::string Testbed::logs_tail(std::size_t bytes) const {
  std::string out;
  auto tail = [&](const std::string& name, std::string l) {
    if (l.size() > bytes) l = l.substr(l.size() - bytes);
    out += "---- the end of " + name + " ----\n" + l + "\n";
  };
  if (cluster_) {
    for (const char* d : {"kube-scheduler", "kubelet", "containerd", "kube-controller-manager"}) {
      tail(d, cluster_->log(d));
    }
  }
  if (tmp_) {
    tail("ascend-scheduler serve", ht::slurp(path("scheduler.log")));
    tail("ascend-device-plugin", ht::slurp(path("plugin.log")));
    tail("ascend-docker-runtime", ht::slurp(path("runtime/log/ascend.log")));
  }
  return out;
}

}  // namespace ascend::kube::testing
