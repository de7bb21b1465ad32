#include "loop.h"

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "grpc_allocate.h"

extern char** environ;

namespace ascend::loop {

namespace ht = ascend::hook::testing;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

constexpr const char* kEndpoint = "ascend-Ascend910.sock";

// Starts argv with stdout and stderr to `log` (and stdout also to `out_fd` when given).
pid_t spawn(const std::vector<std::string>& argv, const std::string& log, int stdout_fd = -1) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (stdout_fd >= 0) {
    posix_spawn_file_actions_adddup2(&fa, stdout_fd, 1);
  } else {
    posix_spawn_file_actions_adddup2(&fa, 2, 1);
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

void stop(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
}

}  // namespace

std::string loop_script() {
  return "sh /probe.sh\necho RT-START\ncat /etc/ascend/hccl.json\necho\necho RT-END\n"
         "env | grep -E '^(RANK_|NODE_RANK|NNODES|NPROC_PER_NODE|WORLD_SIZE|ASCEND_JOB)' | sed 's/^/JOBENV "
         "/'\n";
}

std::string Loop::host_root(int i) const {
  return dir_ + "/node-" + std::to_string(i) + "/host";
}

Loop::Loop(std::string dir, int nodes) : dir_(std::move(dir)) {
  runc_ = std::make_unique<ht::Runner>(dir_ + "/runc-state");
  std::string cluster = dir_ + "/cluster.yaml";
  std::string text = "name: loop\nnodes:\n";
  for (int i = 0; i < nodes; ++i) {
    text += "  - {name: node-" + std::to_string(i) + ", profile: atlas800t-a2, leaf: leaf-" +
            std::to_string(i / 2) + "}\n";
  }
  ht::spit(cluster, text);
  // The scheduler first: the plugins report to it from their start.
  int fds[2];
  if (pipe(fds) != 0) {
    error_ = "pipe failed";
    return;
  }
  scheduler_ = spawn({ht::bin("ascend-scheduler"), "serve", "--cluster", cluster, "--listen", "127.0.0.1:0",
                      "--extender-listen", "127.0.0.1:0"},
                     dir_ + "/scheduler.log", fds[1]);
  close(fds[1]);
  // Two lines: the plugins' listener ("serving URL"), then kube-scheduler's ("extender URL").
  auto read_line = [&] {
    std::string line;
    char c = 0;
    while (read(fds[0], &c, 1) == 1 && c != '\n') line += c;
    return line;
  };
  std::string line = read_line();
  std::string ext_line = read_line();
  close(fds[0]);
  auto at = line.find("serving ");
  auto ext_at = ext_line.find("extender ");
  if (scheduler_ < 0 || at == std::string::npos || ext_at == std::string::npos) {
    error_ = "the scheduler did not start: " + ht::slurp(dir_ + "/scheduler.log");
    return;
  }
  url_ = line.substr(at + 8);
  extender_url_ = ext_line.substr(ext_at + 9);
  for (int i = 0; i < nodes; ++i) {
    Node n;
    n.dir = dir_ + "/node-" + std::to_string(i);
    ::mkdir(n.dir.c_str(), 0755);
    ::mkdir((n.dir + "/device-plugins").c_str(), 0755);
    n.host = std::make_unique<ht::EmulatedHost>(host_root(i), "atlas800t-a2",
                                                std::vector<std::string>{"--node-index", std::to_string(i)});
    if (!n.host->ok()) {
      error_ = "npu-sim load: " + n.host->error();
      return;
    }
    n.hook_config = ht::write_hook_config(n.dir, host_root(i));
    n.kubelet = std::make_unique<testing::FakeKubelet>(n.dir + "/device-plugins");
    n.kubelet->start();
    n.plugin = spawn(
        {ht::bin("ascend-device-plugin"), "--kubelet-socket-dir", n.dir + "/device-plugins", "--host-root",
         host_root(i), "--scheduler-url", url_, "--node-name", node_name(i), "--ranktable-dir",
         n.dir + "/ranktables", "--pod-resources-socket", "", "--log-file", n.dir + "/plugin.log"},
        n.dir + "/plugin.stderr");
    if (n.plugin < 0 || !n.kubelet->wait_registrations(1, 10s)) {
      error_ = "the device plugin of " + node_name(i) +
               " did not register: " + ht::slurp(n.dir + "/plugin.stderr") + ht::slurp(n.dir + "/plugin.log");
      nodes_.push_back(std::move(n));
      return;
    }
    nodes_.push_back(std::move(n));
  }
  // Every plugin's first report has arrived when the scheduler knows every node.
  for (int k = 0; k < 200; ++k) {
    json v = get("/v1/cluster");
    int reported = 0;
    for (const auto& n : v["nodes"]) reported += n.value("reported", false) ? 1 : 0;
    if (reported == nodes) return;
    std::this_thread::sleep_for(25ms);
  }
  error_ = "the device plugins did not report to the scheduler";
}

Loop::~Loop() {
  for (auto& n : nodes_) stop(n.plugin);
  for (auto& n : nodes_) {
    if (n.kubelet) n.kubelet->stop(true);
  }
  stop(scheduler_);
}

json Loop::get(const std::string& path) const {
  httplib::Client cli(url_);
  auto r = cli.Get(path.c_str());
  if (!r) return json();
  return json::parse(r->body, nullptr, false);
}

int Loop::node_index(const std::string& node) const {
  return std::stoi(node.substr(5));
}

bool Loop::wait_reported_unhealthy(const std::string& node, int unhealthy, int timeout_ms) const {
  for (int waited = 0; waited <= timeout_ms; waited += 20) {
    json v = get("/v1/cluster");
    for (const auto& n : v["nodes"]) {
      if (n["name"] != node) continue;
      int sick = 0;
      for (const auto& c : n["chips"]) sick += c["unhealthy"].get<bool>() ? 1 : 0;
      if (sick == unhealthy) return true;
    }
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

Scheduled Loop::schedule(const json& pod) {
  Scheduled s;
  std::vector<std::string> names;
  for (int i = 0; i < node_count(); ++i) names.push_back(node_name(i));
  httplib::Client cli(extender_url_);
  json args = {{"Pod", pod}, {"NodeNames", names}};
  auto f = cli.Post("/filter", args.dump(), "application/json");
  if (!f) return s;
  s.filter = json::parse(f->body, nullptr, false);
  if (!s.filter.is_object() || !s.filter["NodeNames"].is_array() || s.filter["NodeNames"].empty()) return s;
  args["NodeNames"] = s.filter["NodeNames"];
  auto p = cli.Post("/prioritize", args.dump(), "application/json");
  if (!p) return s;
  s.priorities = json::parse(p->body, nullptr, false);
  int best = -1;
  for (const auto& h : s.priorities) {
    if (h["Score"].get<int>() > best) {
      best = h["Score"].get<int>();
      s.node = h["Host"];
    }
  }
  json bind = {{"PodName", pod["metadata"]["name"]},
               {"PodNamespace", pod["metadata"].value("namespace", "default")},
               {"PodUID", pod["metadata"].value("uid", "")},
               {"Node", s.node}};
  auto b = cli.Post("/bind", bind.dump(), "application/json");
  s.bind_error = b ? json::parse(b->body, nullptr, false).value("Error", "?") : "no answer";
  return s;
}

Admitted Loop::admit(const std::string& node, int chips) {
  Admitted a;
  Node& n = nodes_[static_cast<std::size_t>(node_index(node))];
  // What the kubelet offers: the healthy devices of the plugin's current list that no container holds.
  auto watch = n.kubelet->watch(kEndpoint);
  v1beta1::ListAndWatchResponse list;
  if (!watch->wait_for([](const auto& l) { return l.devices_size() > 0; }, 5s, &list)) {
    a.error = "no ListAndWatch list";
    return a;
  }
  watch->cancel();
  for (const auto& d : list.devices()) {
    if (d.health() == "Healthy" && held_[node].count(d.id()) == 0) a.offered.push_back(d.id());
  }
  if (static_cast<int>(a.offered.size()) < chips) {
    a.error = "UnexpectedAdmissionError: requested " + std::to_string(chips) + ", available " +
              std::to_string(a.offered.size());
    return a;
  }
  auto stub = n.kubelet->plugin(kEndpoint);
  v1beta1::PreferredAllocationRequest preq;
  auto* pr = preq.add_container_requests();
  for (const auto& id : a.offered) pr->add_available_deviceids(id);
  pr->set_allocation_size(chips);
  grpc::ClientContext pctx;
  v1beta1::PreferredAllocationResponse presp;
  auto ps = stub->GetPreferredAllocation(&pctx, preq, &presp);
  if (ps.ok() && presp.container_responses_size() == 1) {
    for (const auto& id : presp.container_responses(0).deviceids()) a.preferred.push_back(id);
  }
  // The kubelet falls back to its own choice when the plugin has no preference.
  std::vector<std::string> ids = a.preferred;
  if (static_cast<int>(ids.size()) != chips) ids.assign(a.offered.begin(), a.offered.begin() + chips);
  v1beta1::AllocateResponse resp;
  auto s = ascend::testing::send_allocate(*stub, ascend::testing::allocate_request({ids}), &resp);
  if (!s.ok()) {
    a.error = s.error_message();
    return a;
  }
  for (const auto& id : ids) held_[node].insert(id);
  a.response = resp.container_responses(0);
  a.ok = true;
  return a;
}

Started Loop::start(const std::string& node, const v1beta1::ContainerAllocateResponse& a,
                    const std::string& name) {
  Node& n = nodes_[static_cast<std::size_t>(node_index(node))];
  ht::Bundle b(dir_ + "/bundle-" + std::to_string(bundles_++));
  ht::spit(b.rootfs() + "/probe.sh", ht::probe_script());
  ht::spit(b.rootfs() + "/loop.sh", loop_script());
  b.set_args({"/bin/sh", "/loop.sh"});
  for (const auto& [k, v] : a.envs()) b.add_env(k + "=" + v);
  for (const auto& m : a.mounts()) {
    json opts = json::array({"rbind"});
    if (m.read_only()) opts.push_back("ro");
    b.spec()["mounts"].push_back({{"destination", m.container_path()},
                                  {"type", "bind"},
                                  {"source", m.host_path()},
                                  {"options", opts}});
  }
  b.save();
  Started s;
  s.output =
      runc_->run({ht::bin("ascend-docker-runtime"), "--config", n.hook_config}, b, ht::unique_id(name));
  s.probe = ht::parse_probe(s.output.out);
  std::istringstream in(s.output.out);
  std::string line;
  bool in_rt = false;
  while (std::getline(in, line)) {
    if (line == "RT-START") {
      in_rt = true;
    } else if (line == "RT-END") {
      in_rt = false;
    } else if (in_rt) {
      s.ranktable += line + "\n";
    } else if (line.rfind("JOBENV ", 0) == 0) {
      auto eq = line.find('=');
      s.env[line.substr(7, eq - 7)] = line.substr(eq + 1);
    }
  }
  return s;
}

}  // namespace ascend::loop
