#include "ascend/plugin/plugin.h"

#include <spdlog/spdlog.h>

#include "ascend/plugin/metrics.h"
#include "ascend/plugin/preferred.h"

namespace ascend::plugin {

Result<std::unique_ptr<Plugin>> Plugin::create(npu::DeviceQuery& query, Config cfg, Metrics* metrics) {
  ASCEND_CHECK(validate(cfg), "");
  ASCEND_ASSIGN(npu::HostState host, query.snapshot(), "read the devices");
  ASCEND_ASSIGN(auto resources, plan_resources(host, cfg), "");
  if (metrics != nullptr) metrics->update_chips(host);
  return std::unique_ptr<Plugin>(
      new Plugin(query, std::move(cfg), metrics, std::move(host), std::move(resources)));
}

Plugin::Plugin(npu::DeviceQuery& query, Config cfg, Metrics* metrics, npu::HostState host,
               std::vector<ResourceSpec> resources)
    : query_(query),
      cfg_(std::move(cfg)),
      metrics_(metrics),
      resources_(std::move(resources)),
      host_(std::move(host)) {}

Plugin::~Plugin() {
  subscription_.reset();
}

Status Plugin::watch() {
  ASCEND_ASSIGN(auto sub, query_.subscribe([this](const npu::HostState& s) { on_host_change(s); }),
                "watch device health");
  std::lock_guard lock(mu_);
  subscription_ = std::move(sub);
  return {};
}

Plugin::Listing Plugin::list(const ResourceSpec& res) const {
  std::lock_guard lock(mu_);
  Listing out;
  out.version = version_;
  for (auto& e : device_table(host_, res, ledger_)) {
    if (e.withheld.empty()) out.devices.push_back(std::move(e));
  }
  return out;
}

std::uint64_t Plugin::version() const {
  std::lock_guard lock(mu_);
  return version_;
}

void Plugin::wait_change(std::uint64_t seen, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  const std::uint64_t wakeups = wakeups_;
  cv_.wait_for(lock, timeout, [&] { return version_ != seen || wakeups_ != wakeups; });
}

void Plugin::wake_all() const {
  {
    std::lock_guard lock(mu_);
    ++wakeups_;
  }
  cv_.notify_all();
}

Result<std::vector<std::vector<std::string>>> Plugin::preferred(
    const ResourceSpec& res, const std::vector<PreferredRequest>& requests) const {
  std::lock_guard lock(mu_);
  std::vector<std::vector<std::string>> out;
  for (const auto& r : requests) {
    ASCEND_ASSIGN(auto ids, preferred_allocation(host_, res, ledger_, r.available, r.must_include, r.size),
                  "");
    out.push_back(std::move(ids));
  }
  return out;
}

Result<std::vector<ContainerAllocation>> Plugin::allocate(
    const ResourceSpec& res, const std::vector<std::vector<std::string>>& requests) {
  std::unique_lock lock(mu_);
  auto out = plugin::allocate(host_, query_, cfg_, res, ledger_, requests, Clock::now());
  // Dynamic mode changes what the other resource advertises (a chip's cores or the whole chip).
  const bool changed = out.ok() && cfg_.vnpu == VnpuMode::kDynamic;
  if (changed) ++version_;
  lock.unlock();
  if (changed) cv_.notify_all();
  return out;
}

void Plugin::on_host_change(const npu::HostState& host) {
  {
    std::lock_guard lock(mu_);
    host_ = host;
    ++version_;
  }
  cv_.notify_all();
  if (metrics_ != nullptr) metrics_->update_chips(host);
  spdlog::debug("device state generation {}", host.generation);
}

int Plugin::reconcile(const std::map<std::string, std::set<std::string>>& in_use,
                      std::chrono::milliseconds grace) {
  int ended = 0;
  {
    std::lock_guard lock(mu_);
    if (cfg_.vnpu != VnpuMode::kDynamic) return 0;
    ended = ledger_.reconcile(in_use, resources_.front().name, kCoreResource, Clock::now(), grace);
    if (ended > 0) ++version_;
  }
  if (ended > 0) {
    cv_.notify_all();
    spdlog::info("{} dynamic vNPU promise(s) ended: the kubelet no longer lists them", ended);
  }
  return ended;
}

npu::HostState Plugin::host() const {
  std::lock_guard lock(mu_);
  return host_;
}

Ledger Plugin::ledger() const {
  std::lock_guard lock(mu_);
  return ledger_;
}

}  // namespace ascend::plugin
