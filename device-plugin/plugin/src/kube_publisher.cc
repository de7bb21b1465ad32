#include "ascend/plugin/kube_publisher.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <iterator>

#include "ascend/common/guarded.h"
#include "ascend/common/kube_client.h"
#include "ascend/plugin/dra_slices.h"
#include "ascend/plugin/inventory.h"
#include "ascend/plugin/plugin.h"

namespace ascend::plugin {

namespace {

constexpr std::chrono::milliseconds kStopCheck{100};

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

deviceinfo::ChipFault fault_of(const npu::Chip& c) {
  deviceinfo::ChipFault f;
  f.phy_id = c.phy_id;
  for (const auto& x : c.faults) f.codes.push_back(fmt::format("{:08X}", x.code));
  f.level = is_healthy(c.health()) ? deviceinfo::kNotHandleFault : deviceinfo::kSeparateNPU;
  return f;
}

deviceinfo::ChipFault graded_fault(const ChipFaults& c) {
  deviceinfo::ChipFault f;
  f.phy_id = c.phy_id;
  for (const auto code : c.codes) f.codes.push_back(fmt::format("{:08X}", code));
  f.level = std::string(to_string(c.level));
  return f;
}

// MindCluster's card type (its RealCardType) of a chip family.
std::string_view card_type(npu::Family f) {
  switch (f) {
    case npu::Family::k910:
      return "Ascend910";
    case npu::Family::k910B:
      return "Ascend910B";
    case npu::Family::k910_93:
      return "Ascend910A3";
    case npu::Family::k310P:
      return "Ascend310P";
  }
  return "Ascend";
}

std::string configmaps() {
  return kube::path_of("v1", "configmaps", deviceinfo::kNamespace);
}

std::string configmap_path(const std::string& node) {
  return kube::path_of("v1", "configmaps", deviceinfo::kNamespace, deviceinfo::configmap_name(node));
}

}  // namespace

// ---- pure ----

deviceinfo::NodeDevices node_devices(const npu::DeviceSnapshot& host, const std::string& resource,
                                     const std::string& node, std::int64_t now) {
  deviceinfo::NodeDevices d;
  d.node = node;
  d.resource = resource;
  d.update_time = now;
  for (const auto& c : host.chips) {  // sorted by phy id
    (is_healthy(c.health()) ? d.healthy : d.unhealthy).push_back(c.phy_id);
    if (!c.faults.empty()) d.faults.push_back(fault_of(c));
  }
  return d;
}

deviceinfo::NodeDevices node_devices(const npu::DeviceSnapshot& host, const std::vector<ChipFaults>& faults,
                                     const std::set<int>& isolated, const std::string& resource,
                                     const std::string& node, std::int64_t now) {
  deviceinfo::NodeDevices d;
  d.node = node;
  d.resource = resource;
  d.update_time = now;
  for (const auto& c : host.chips) (is_healthy(c.health()) ? d.healthy : d.unhealthy).push_back(c.phy_id);
  for (const auto& f : faults)  // sorted by phy id; an isolated chip without codes is named in the key only
    if (!f.codes.empty()) d.faults.push_back(graded_fault(f));
  d.manually_separated.assign(isolated.begin(), isolated.end());
  return d;
}

IsolationEdits isolation_edits(const std::vector<int>& listed,
                               const std::optional<std::vector<int>>& written) {
  IsolationEdits e;
  const std::set<int> now(listed.begin(), listed.end());
  const std::set<int> before = written ? std::set<int>(written->begin(), written->end()) : std::set<int>{};
  std::set_difference(now.begin(), now.end(), before.begin(), before.end(),
                      std::inserter(e.isolate, e.isolate.end()));
  std::set_difference(before.begin(), before.end(), now.begin(), now.end(),
                      std::inserter(e.clear, e.clear.end()));
  return e;
}

std::string server_type(const npu::DeviceSnapshot& host) {
  if (host.chips.empty()) return "";
  return fmt::format("{}-{}", card_type(host.family), host.chips.front().aicore_count);
}

deviceinfo::NodeFacts node_facts(const npu::DeviceSnapshot& host, const std::string& resource) {
  deviceinfo::NodeFacts f;
  f.resource = resource;
  f.chip_name = host.chips.empty() ? "" : host.chips.front().name;
  f.count = static_cast<int>(host.chips.size());
  f.driver_version = host.driver_version;
  f.server_type = server_type(host);
  return f;
}

bool configmap_due(const std::optional<deviceinfo::NodeDevices>& written, const deviceinfo::NodeDevices& now,
                   std::chrono::milliseconds since_written, std::chrono::milliseconds refresh) {
  if (!written || since_written >= refresh) return true;
  auto same_time = *written;
  same_time.update_time = now.update_time;
  return same_time != now;
}

nlohmann::json configmap_patch(const nlohmann::json& cm) {
  return {{"metadata", {{"labels", cm["metadata"]["labels"]}}},
          {"data",
           {{deviceinfo::kDataKey, cm["data"][deviceinfo::kDataKey]},
            {deviceinfo::kManuallySeparateKey, cm["data"][deviceinfo::kManuallySeparateKey]}}}};
}

std::optional<nlohmann::json> label_patch(const std::map<std::string, std::string>& want,
                                          const nlohmann::json& node) {
  nlohmann::json have = nlohmann::json::object();
  if (node.is_object() && node.contains("metadata") && node["metadata"].is_object() &&
      node["metadata"].contains("labels") && node["metadata"]["labels"].is_object())
    have = node["metadata"]["labels"];
  nlohmann::json labels = nlohmann::json::object();
  for (const auto& [k, v] : want) {
    const auto it = have.find(k);
    if (it == have.end() || !it->is_string() || *it != v) labels[k] = v;
  }
  if (labels.empty()) return std::nullopt;
  return nlohmann::json{{"metadata", {{"labels", labels}}}};
}

// ---- the thread ----

KubePublisher::KubePublisher(Plugin& plugin, kube::Client& client, std::string node,
                             KubePublisherOptions opts)
    : plugin_(plugin),
      client_(client),
      node_(std::move(node)),
      resource_(plugin.resources().front().name),
      opts_(opts),
      thread_([this] { loop(); }) {}

KubePublisher::~KubePublisher() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  plugin_.wake_all();  // the loop may be waiting for a change
  thread_.join();
}

KubePublisher::Stats KubePublisher::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void KubePublisher::count(int Stats::*field) {
  std::lock_guard lock(mu_);
  ++(stats_.*field);
}

bool KubePublisher::stopping() const {
  std::lock_guard lock(mu_);
  return stop_;
}

bool KubePublisher::sleep(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, d, [this] { return stop_; });
}

Result<bool> KubePublisher::create_configmap(const nlohmann::json& cm) {
  auto r = client_.create(configmaps(), cm);
  if (r.ok()) return false;
  if (r.error().code() == EEXIST) return true;
  if (r.error().code() == ENOENT) {
    return Error(ENOENT, fmt::format("namespace {} does not exist in the API server (create it, or run the "
                                     "plugin with --no-kube): {}",
                                     deviceinfo::kNamespace, r.error().message()));
  }
  return r.error();
}

Status KubePublisher::write_configmap(const deviceinfo::NodeDevices& d) {
  const auto cm = deviceinfo::to_configmap(d);
  const std::string what =
      fmt::format("publish ConfigMap {}/{}", deviceinfo::kNamespace, deviceinfo::configmap_name(d.node));
  if (!exists_) {
    ASCEND_ASSIGN(const bool there, create_configmap(cm), what);
    exists_ = true;
    if (!there) return {};
  }
  auto patch = configmap_patch(cm);
  // Precondition on the version whose ManuallySeparateNPU was read: an operator's edit made in between is
  // read again on the retry, not overwritten.
  if (!read_version_.empty()) patch["metadata"]["resourceVersion"] = read_version_;
  auto r = client_.merge_patch(configmap_path(d.node), patch);
  if (r.ok()) return {};
  if (r.error().code() == ENOENT) exists_ = false;  // deleted since: created again on the next try
  return Status(r.error()).context(what);
}

Status KubePublisher::reconcile_labels(const deviceinfo::NodeFacts& facts) {
  const std::string path = kube::path_of("v1", "nodes", "", node_);
  const std::string what = "label Node " + node_;
  auto node = client_.get(path);
  if (!node.ok()) {
    if (node.error().code() == ENOENT)
      return Error(ENOENT,
                   fmt::format("{}: the API server has no Node {} (is --node-name right?)", what, node_));
    return Status(node.error()).context(what);
  }
  const auto patch = label_patch(deviceinfo::node_labels(facts), *node);
  if (patch) {
    auto r = client_.merge_patch(path, *patch);
    if (!r.ok()) return Status(r.error()).context(what);
    count(&Stats::label_patches);
    spdlog::info("labelled Node {}: {}", node_, (*patch)["metadata"]["labels"].dump());
  }
  labelled_ = facts;
  const auto& meta = (*node)["metadata"];
  if (meta.is_object() && meta.contains("uid") && meta["uid"].is_string()) node_uid_ = meta["uid"];
  return {};
}

Status KubePublisher::sync_isolation() {
  read_version_.clear();
  auto cm = client_.get(configmap_path(node_));
  if (!cm.ok()) {
    if (cm.error().code() == ENOENT) return {};  // created by this pass's write
    return Status(cm.error()).context("read ManuallySeparateNPU");
  }
  read_version_.clear();
  const auto& meta = (*cm)["metadata"];
  if (meta.is_object() && meta.contains("resourceVersion") && meta["resourceVersion"].is_string())
    read_version_ = meta["resourceVersion"];
  auto listed = deviceinfo::manually_separated(*cm, resource_);
  if (!listed) {
    const std::string msg =
        fmt::format("{}/{}: {}; ignored, and written again from the plugin's isolated chips",
                    deviceinfo::kNamespace, deviceinfo::configmap_name(node_), listed.error().message());
    if (msg != last_list_error_) spdlog::warn("{}", msg);
    last_list_error_ = msg;
    return {};
  }
  last_list_error_.clear();
  const auto edits = isolation_edits(*listed, separated_);
  for (int phy : edits.isolate)
    plugin_.isolate(phy,
                    fmt::format("named in {} of the device ConfigMap", deviceinfo::kManuallySeparateKey));
  for (int phy : edits.clear) plugin_.clear_isolation(phy);
  return {};
}

void KubePublisher::post_events() {
  for (const auto& c : plugin_.take_level_changes()) {
    kube::Client::EventArgs e;
    e.type = makes_unhealthy(c.to) ? "Warning" : "Normal";
    e.reason = "AscendFaultLevel";
    e.action = "FaultGrading";
    e.note = fmt::format("{}: fault level {} -> {} ({}): {}", deviceinfo::chip_name(resource_, c.phy_id),
                         to_string(c.from), to_string(c.to), makes_unhealthy(c.to) ? "Unhealthy" : "usable",
                         c.why);
    e.kind = "Node";
    e.name = node_;
    e.uid = node_uid_;
    e.controller = "ascend.huawei.com/device-plugin";
    e.instance = "ascend-device-plugin-" + node_;
    if (auto st = client_.event(e); !st.ok()) spdlog::warn("Event for {}: {}", e.note, st.error().message());
  }
}

std::chrono::milliseconds KubePublisher::since_written() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               written_at_);
}

Status KubePublisher::publish() {
  ASCEND_CHECK(sync_isolation(), "");
  const auto host = plugin_.host();
  const auto d = node_devices(host, plugin_.chip_faults(), plugin_.isolated(), resource_, node_, unix_now());
  const auto facts = node_facts(host, resource_);
  const bool due = configmap_due(written_, d, since_written(), opts_.refresh_every);
  if (opts_.dra_slices) ASCEND_CHECK(publish_slices(host), "");
  if (!due && labelled_ == facts) {  // the version moved, but not what is published
    if (!node_uid_.empty()) post_events();
    return {};
  }
  count(&Stats::passes);
  if (due) {
    ASCEND_CHECK(write_configmap(d), "");
    separated_ = d.manually_separated;
    if (!written_ || written_->unhealthy != d.unhealthy || written_->faults != d.faults)
      spdlog::info("published {}/{}: {} healthy, {} unhealthy chips", deviceinfo::kNamespace,
                   deviceinfo::configmap_name(node_), d.healthy.size(), d.unhealthy.size());
    written_ = d;
    written_at_ = std::chrono::steady_clock::now();
    count(&Stats::configmap_writes);
  }
  // The labels are read again whenever the ConfigMap is refreshed, so that a label removed by hand returns.
  ASCEND_CHECK(reconcile_labels(facts), "");
  post_events();
  return {};
}

Status KubePublisher::publish_slices(const npu::DeviceSnapshot& host) {
  auto node = client_.get(kube::path_of("v1", "nodes", "", node_));
  if (!node.ok()) return node.error().context("read Node " + node_ + " for its ResourceSlices");
  const dra::SliceNode owner = dra::slice_node(*node);
  std::set<int> unusable = plugin_.isolated();
  for (const auto& c : host.chips)
    if (!is_healthy(c.health())) unusable.insert(c.phy_id);
  const std::string list_path =
      std::string(dra::kSlicesPath) + "?fieldSelector=" +
      kube::escape(std::string("spec.driver=") + dra::kDriver + ",spec.nodeName=" + node_);
  // At most: the probe, then the vNPUs (or the chips alone again when a write lost its counters).
  for (int round = 0; round < 3; ++round) {
    auto listed = client_.get(list_path);
    if (!listed.ok()) return listed.error().context("list the ResourceSlices of node " + node_);
    std::vector<nlohmann::json> have;
    if (listed->contains("items") && (*listed)["items"].is_array()) {
      for (const auto& item : (*listed)["items"]) {
        have.push_back(item);
        if (item.contains("spec") && item["spec"].contains("pool") &&
            item["spec"]["pool"].contains("generation") &&
            item["spec"]["pool"]["generation"].is_number_integer())
          slice_generation_ =
              std::max(slice_generation_, item["spec"]["pool"]["generation"].get<std::int64_t>());
        if (opts_.dra_vnpu && !partitionable_ && dra::has_counters(item)) partitionable_ = true;
      }
    }
    dra::SliceVnpus mode = dra::SliceVnpus::kNone;
    if (opts_.dra_vnpu)
      mode = !partitionable_ ? dra::SliceVnpus::kCountersOnly
                             : (*partitionable_ ? dra::SliceVnpus::kTemplates : dra::SliceVnpus::kNone);
    if (dra::slices_match(have, dra::resource_slices(host, unusable, owner, slice_generation_, mode)))
      return {};
    // Something differs: the whole pool again under a new generation (a reader takes the newest complete
    // one).
    const auto want = dra::resource_slices(host, unusable, owner, ++slice_generation_, mode);
    ASCEND_ASSIGN(const bool kept, write_slices(have, want), "");
    if (mode != dra::SliceVnpus::kNone && !kept) {
      partitionable_ = false;
      if (!said_gate_off_)
        spdlog::warn(
            "the API server dropped the shared counters of node {}'s ResourceSlices: its feature gate "
            "DRAPartitionableDevices is off, so no vNPU is published (--dra-vnpu), the chips alone are; turn "
            "the gate on (API server, kube-scheduler, kubelet) and restart the plugin to publish vNPUs",
            node_);
      said_gate_off_ = true;
      continue;  // the chips alone, without counters (a match: what the server kept)
    }
    if (mode == dra::SliceVnpus::kCountersOnly) {
      partitionable_ = true;
      spdlog::info("the API server keeps shared counters (DRAPartitionableDevices is on): publishing vNPUs");
      continue;
    }
    std::size_t healthy = host.chips.size();
    for (const auto& c : host.chips) healthy -= unusable.count(c.phy_id);
    std::size_t devices = 0;
    for (const auto& s : want) devices += s["spec"]["devices"].size();
    const std::string vnpus = mode == dra::SliceVnpus::kTemplates
                                  ? fmt::format(", {} vNPU devices", devices - host.chips.size())
                                  : "";
    spdlog::info("published the ResourceSlices of node {} (driver {}, generation {}): {} chips, {} healthy{}",
                 node_, dra::kDriver, slice_generation_, host.chips.size(), healthy, vnpus);
    return {};
  }
  return {};
}

Result<bool> KubePublisher::write_slices(const std::vector<nlohmann::json>& have,
                                         const std::vector<nlohmann::json>& want) {
  std::map<std::string, std::string> versions;  // name -> resourceVersion of the slices there now
  for (const auto& s : have) {
    // The API server's answer is not trusted to have every field (a const operator[] on a missing key is
    // undefined): a slice without a name is not one of ours to replace.
    const nlohmann::json meta =
        s.is_object() ? s.value("metadata", nlohmann::json::object()) : nlohmann::json();
    if (!meta.is_object() || !meta.contains("name") || !meta["name"].is_string()) continue;
    const nlohmann::json rv = meta.value("resourceVersion", nlohmann::json());
    versions[meta["name"].get<std::string>()] = rv.is_string() ? rv.get<std::string>() : "";
  }
  bool kept = true;
  for (auto slice : want) {
    const std::string name = slice["metadata"]["name"];
    const std::string path = std::string(dra::kSlicesPath) + "/" + kube::escape(name);
    Result<nlohmann::json> stored = nlohmann::json();
    if (auto it = versions.find(name); it != versions.end()) {
      slice["metadata"]["resourceVersion"] = it->second;
      stored = client_.replace(path, slice);
      if (!stored.ok()) return stored.error().context("update ResourceSlice " + name);
      versions.erase(it);
    } else {
      stored = client_.create(dra::kSlicesPath, slice);
      if (!stored.ok()) return stored.error().context("create ResourceSlice " + name);
    }
    kept = kept && dra::counters_kept(slice, *stored);
    count(&Stats::slice_writes);
  }
  for (const auto& [name, rv] : versions) {  // slices of a larger pool before
    auto st = client_.del(std::string(dra::kSlicesPath) + "/" + kube::escape(name), "", rv);
    if (!st.ok() && st.error().code() != ENOENT) return st.error().context("delete ResourceSlice " + name);
    count(&Stats::slice_writes);
  }
  return kept;
}

void KubePublisher::loop() {
  auto backoff = opts_.backoff_first;
  std::string last_failure;   // said once per distinct message
  std::string threw;          // the last exception's text (guarded.h)
  std::uint64_t settled = 0;  // the plugin version the API server has (0: none yet)
  while (!stopping()) {
    const std::uint64_t seen = plugin_.version();
    const auto since = since_written();
    if (seen == settled && since < opts_.refresh_every) {
      // Up to date: wait for a change or the refresh. The short wait bounds how long a stop that raced with
      // this loop (its wake_all came before the wait began) goes unnoticed.
      plugin_.wait_change(seen,
                          std::clamp(opts_.refresh_every - since, std::chrono::milliseconds(1), kStopCheck));
      continue;
    }
    Status st;
    // A bug, not the API server: logged, and retried after the backoff as a failure would be.
    if (!run_guarded(
            "API server publisher", [&] { st = publish(); }, "retrying", &threw)) {
      count(&Stats::failures);
      if (sleep(backoff)) break;
      backoff = std::min(backoff * 2, opts_.backoff_max);
      continue;
    }
    if (st.ok()) {
      if (!last_failure.empty()) spdlog::info("the API server has node {}'s chips again", node_);
      last_failure.clear();
      backoff = opts_.backoff_first;
      settled = seen;
      continue;
    }
    count(&Stats::failures);
    if (st.error().message() != last_failure) spdlog::warn("{}; retrying", st.error().message());
    last_failure = st.error().message();
    if (sleep(backoff)) break;
    backoff = std::min(backoff * 2, opts_.backoff_max);
  }
}

}  // namespace ascend::plugin
