#include "ascend/plugin/kube_publisher.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <exception>

#include "ascend/common/kube_client.h"
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
          {"data", {{deviceinfo::kDataKey, cm["data"][deviceinfo::kDataKey]}}}};
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

KubePublisher::KubePublisher(const Plugin& plugin, kube::Client& client, std::string node,
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
  auto r = client_.merge_patch(configmap_path(d.node), configmap_patch(cm));
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
  return {};
}

std::chrono::milliseconds KubePublisher::since_written() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               written_at_);
}

Status KubePublisher::publish() {
  const auto host = plugin_.host();
  const auto d = node_devices(host, resource_, node_, unix_now());
  const auto facts = node_facts(host, resource_);
  const bool due = configmap_due(written_, d, since_written(), opts_.refresh_every);
  if (!due && labelled_ == facts) return {};  // the version moved, but not what is published
  count(&Stats::passes);
  if (due) {
    ASCEND_CHECK(write_configmap(d), "");
    if (!written_ || written_->unhealthy != d.unhealthy || written_->faults != d.faults)
      spdlog::info("published {}/{}: {} healthy, {} unhealthy chips", deviceinfo::kNamespace,
                   deviceinfo::configmap_name(node_), d.healthy.size(), d.unhealthy.size());
    written_ = d;
    written_at_ = std::chrono::steady_clock::now();
    count(&Stats::configmap_writes);
  }
  // The labels are read again whenever the ConfigMap is refreshed, so that a label removed by hand returns.
  ASCEND_CHECK(reconcile_labels(facts), "");
  return {};
}

void KubePublisher::loop() {
  auto backoff = opts_.backoff_first;
  std::string last_failure;   // said once per distinct message
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
    try {
      st = publish();
    } catch (const std::exception& e) {  // a bug, not the API server: logged, and the thread carries on
      st = Error(EIO, fmt::format("publishing to the API server threw: {}", e.what()));
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
