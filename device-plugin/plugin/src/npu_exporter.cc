#include "ascend/plugin/npu_exporter.h"

#include <fmt/format.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "ascend/common/guarded.h"
#include "ascend/plugin/plugin.h"

namespace ascend::plugin {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// NPU Exporter's HELP texts, verbatim (npu_exporter.h names the files).
constexpr std::string_view kHelpNums = "Amount of npu installed on the machine.";
constexpr std::string_view kHelpUtil = "the ai core utilization";
constexpr std::string_view kHelpHbmUsed = "the npu hbm used memory";
constexpr std::string_view kHelpHbmTotal = "the npu hbm total memory";
constexpr std::string_view kHelpTemp = "the npu temperature";
constexpr std::string_view kHelpPower = "the npu power";
constexpr std::string_view kHelpHealth = "the npu health status";
constexpr std::string_view kHelpError = "the npu error code";
constexpr std::string_view kHelpNetwork = "the npu network health status";
constexpr std::string_view kHelpLink = "the npu link status";
constexpr std::string_view kHelpContainerInfo = "the container name and deviceID relationship";
constexpr std::string_view kHelpCtrUtil = "npu ai core utilization in container, unit is '%'";
constexpr std::string_view kHelpCtrTotal = "npu total memory in container, unit is 'MB'";
constexpr std::string_view kHelpCtrUsed = "the npu used memory in container, unit is 'MB'";

// The chip labels in the order Go's client sorts them (byte order of the names).
std::vector<ClientMetric::Label> card_labels(const ChipIdentity& c, const PodRef* holder) {
  const PodRef none;
  const PodRef& p = holder != nullptr ? *holder : none;
  return {{"container_name", p.container}, {"id", std::to_string(c.phy_id)},   {"model_name", c.model_name},
          {"namespace", p.pod_namespace},  {"pcie_bus_info", c.pcie_bus_info}, {"pod_name", p.pod},
          {"vdie_id", c.vdie_id}};
}

// npu_container_info's labels: the card labels with id named npuID, and the container's id and
// "<namespace>_<pod>_<container>" name (sorted the same way).
std::vector<ClientMetric::Label> container_labels(const ChipIdentity& c, const PodRef& p) {
  return {{"containerID", ""},
          {"containerName", p.pod_namespace + "_" + p.pod + "_" + p.container},
          {"container_name", p.container},
          {"model_name", c.model_name},
          {"namespace", p.pod_namespace},
          {"npuID", std::to_string(c.phy_id)},
          {"pcie_bus_info", c.pcie_bus_info},
          {"pod_name", p.pod},
          {"vdie_id", c.vdie_id}};
}

class Families {
 public:
  void add(std::string_view name, std::string_view help, std::vector<ClientMetric::Label> labels, double v) {
    auto it = by_name_.find(std::string(name));
    if (it == by_name_.end()) {
      MetricFamily f;
      f.name = std::string(name);
      f.help = std::string(help);
      f.type = MetricType::Gauge;
      it = by_name_.emplace(f.name, std::move(f)).first;
    }
    ClientMetric m;
    m.label = std::move(labels);
    m.gauge.value = v;
    it->second.metric.push_back(std::move(m));
  }
  std::vector<MetricFamily> take() {
    std::vector<MetricFamily> out;
    out.reserve(by_name_.size());
    for (auto& [name, f] : by_name_) out.push_back(std::move(f));  // std::map: sorted by name
    return out;
  }

 private:
  std::map<std::string, MetricFamily> by_name_;
};

// One line of InfluxDB line protocol: the measurement's commas and spaces escaped (its names have none),
// fields in byte order of their names.
class Line {
 public:
  void integer(std::string_view key, long long v) { fields_[std::string(key)] = fmt::format("{}i", v); }
  // As Go's strconv.FormatFloat(v, 'f', -1, 64) writes it: the shortest text that reads back as `v`.
  void real(std::string_view key, double v) { fields_[std::string(key)] = fmt::format("{}", v); }
  std::string text(std::string_view measurement, std::int64_t nanos) const {
    std::string out;
    for (char ch : measurement) {
      if (ch == ',' || ch == ' ' || ch == '\\') out += '\\';
      out += ch;
    }
    char sep = ' ';
    for (const auto& [k, v] : fields_) {
      out += sep;
      out += k;
      out += '=';
      out += v;
      sep = ',';
    }
    out += fmt::format(" {}\n", nanos);
    return out;
  }

 private:
  std::map<std::string, std::string> fields_;
};

// All of `text` to `fd`, through short writes and signals.
Status write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno(errno, "writing the Telegraf lines");
    }
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return ok_status();
}

}  // namespace

Attribution attribute(const std::vector<PodDevices>& pods, const std::map<std::string, int>& phy_of_id) {
  Attribution out;
  for (const auto& p : pods) {
    for (const auto& id : p.ids) {
      auto it = phy_of_id.find(id);
      if (it != phy_of_id.end()) out[it->second] = PodRef{p.pod_namespace, p.pod, p.container};
    }
  }
  return out;
}

std::vector<ChipIdentity> identities(const npu::DeviceSnapshot& s) {
  std::vector<ChipIdentity> out;
  out.reserve(s.chips.size());
  for (const auto& c : s.chips) {
    ChipIdentity id;
    id.phy_id = c.phy_id;
    // NPU Exporter's GetNpuName: "<chip_name>-<chip_type>-<chip_ver>" of DCMI's chip info.
    id.model_name = c.name + "-" + s.chip_type + "-" + c.chip_version;
    id.vdie_id = c.vdie_id;
    id.pcie_bus_info = c.bus_id;
    id.has_hbm = c.hbm_total_mb > 0;
    out.push_back(std::move(id));
  }
  return out;
}

std::vector<MetricFamily> npu_families(const std::vector<ChipIdentity>& chips,
                                       const std::vector<npu::ChipTelemetry>& telemetry,
                                       const Attribution& holders) {
  Families f;
  f.add("machine_npu_nums", kHelpNums, {}, static_cast<double>(chips.size()));
  for (const auto& t : telemetry) {
    auto it =
        std::find_if(chips.begin(), chips.end(), [&](const ChipIdentity& c) { return c.phy_id == t.phy_id; });
    ChipIdentity unknown;
    unknown.phy_id = t.phy_id;
    const ChipIdentity& c = it != chips.end() ? *it : unknown;
    auto h = holders.find(t.phy_id);
    const PodRef* holder = h != holders.end() ? &h->second : nullptr;
    const auto labels = card_labels(c, holder);
    f.add("npu_chip_info_utilization", kHelpUtil, labels, t.aicore_pct);
    f.add("npu_chip_info_temperature", kHelpTemp, labels, t.temp_c);
    if (t.power_w) f.add("npu_chip_info_power", kHelpPower, labels, *t.power_w);
    // NPU Exporter: healthy only when the driver's health is 0 (getHealth: health != 0 is UnHealthy).
    f.add("npu_chip_info_health_status", kHelpHealth, labels, t.health == npu::Health::kOk ? 1 : 0);
    f.add("npu_chip_info_error_code", kHelpError, labels, t.error_codes.empty() ? 0 : t.error_codes[0]);
    for (std::size_t i = 1; i < t.error_codes.size(); ++i)
      f.add("npu_chip_info_error_code_" + std::to_string(i), kHelpError, labels, t.error_codes[i]);
    f.add("npu_chip_info_network_status", kHelpNetwork, labels, t.link_up ? 1 : 0);
    f.add("npu_chip_info_link_status", kHelpLink, labels, t.link_up ? 1 : 0);
    if (c.has_hbm) {
      f.add("npu_chip_info_hbm_used_memory", kHelpHbmUsed, labels, static_cast<double>(t.memory_used_mb));
      f.add("npu_chip_info_hbm_total_memory", kHelpHbmTotal, labels, static_cast<double>(t.memory_total_mb));
    }
    if (holder != nullptr) {
      f.add("npu_container_info", kHelpContainerInfo, container_labels(c, *holder), 1);
      f.add("container_npu_utilization", kHelpCtrUtil, labels, t.aicore_pct);
      f.add("container_npu_total_memory", kHelpCtrTotal, labels, static_cast<double>(t.memory_total_mb));
      f.add("container_npu_used_memory", kHelpCtrUsed, labels, static_cast<double>(t.memory_used_mb));
    }
  }
  return f.take();
}

std::string telegraf_lines(const std::vector<ChipIdentity>& chips,
                           const std::vector<npu::ChipTelemetry>& telemetry, std::string_view device_prefix,
                           std::int64_t unix_nanos) {
  std::string out;
  for (const auto& t : telemetry) {
    auto it =
        std::find_if(chips.begin(), chips.end(), [&](const ChipIdentity& c) { return c.phy_id == t.phy_id; });
    Line l;
    l.integer("npu_chip_info_health_status", t.health == npu::Health::kOk ? 1 : 0);
    l.integer("npu_chip_info_network_status", t.link_up ? 1 : 0);
    l.integer("npu_chip_info_link_status", t.link_up ? 1 : 0);
    l.real("npu_chip_info_utilization", t.aicore_pct);
    l.real("npu_chip_info_temperature", t.temp_c);
    if (t.power_w) l.real("npu_chip_info_power", *t.power_w);
    if (it != chips.end() && it->has_hbm && t.memory_total_mb > 0) {
      // A whole percent, as DCMI's utilization rate is.
      const long long pct = t.memory_used_mb * 100 / t.memory_total_mb;
      l.real("npu_chip_info_hbm_utilization", static_cast<double>(pct));
      l.integer("npu_chip_info_hbm_used_memory", t.memory_used_mb * 1024 * 1024);
    }
    for (std::size_t i = 0; i < t.error_codes.size(); ++i)
      l.integer("npu_chip_info_error_code_" + std::to_string(i), t.error_codes[i]);
    out += l.text(fmt::format("{}-{}", device_prefix, t.phy_id), unix_nanos);
  }
  return out;
}

Status run_telegraf(const NpuExporter::Sources& sources, std::string device_prefix,
                    std::chrono::milliseconds interval, int in_fd, int out_fd, int stop_fd) {
  using Steady = std::chrono::steady_clock;
  bool failing = false;  // said once per outage
  auto gather = [&]() -> Status {
    auto telemetry = sources.telemetry();
    if (!telemetry) {
      if (!failing) spdlog::warn("telegraf: no telemetry, nothing written: {}", telemetry.error().message());
      failing = true;
      return ok_status();
    }
    if (failing) spdlog::info("telegraf: telemetry is back");
    failing = false;
    const auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
    return write_all(out_fd, telegraf_lines(identities(sources.host()), *telemetry, device_prefix, nanos));
  };
  auto next = Steady::now();
  while (true) {
    if (Steady::now() >= next) {
      ASCEND_CHECK(gather(), "");
      next = std::max(next + interval, Steady::now());
    }
    pollfd fds[2] = {{stop_fd, POLLIN, 0}, {in_fd, POLLIN, 0}};
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - Steady::now());
    const int n = ::poll(fds, in_fd >= 0 ? 2 : 1, static_cast<int>(std::max<long long>(0, wait.count())));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno(errno, "poll");
    }
    if (fds[0].revents != 0) return ok_status();
    if (in_fd < 0 || fds[1].revents == 0) continue;
    char buf[4096];
    const ssize_t got = ::read(in_fd, buf, sizeof buf);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) return ok_status();  // Telegraf closed our input: it stops the plugin
    if (std::memchr(buf, '\n', static_cast<std::size_t>(got)) != nullptr) {
      ASCEND_CHECK(gather(), "");  // Telegraf's STDIN signal: a gather now
      next = Steady::now() + interval;
    }
  }
}

NpuExporter::Sources plugin_sources(const npu::DeviceQuery& query, const Plugin& plugin,
                                    std::string pod_resources_socket) {
  NpuExporter::Sources s;
  s.telemetry = [&query] { return query.telemetry(); };
  s.host = [&plugin] { return plugin.host(); };
  s.holders = [&plugin, socket = std::move(pod_resources_socket)]() -> Attribution {
    if (socket.empty() || ::access(socket.c_str(), F_OK) != 0) return {};
    auto pods = list_pod_devices(socket, std::chrono::milliseconds(500));
    if (!pods) {
      spdlog::debug("metrics: no pod labels: {}", pods.error().message());
      return {};
    }
    std::map<std::string, int> phy_of_id;
    for (const auto& res : plugin.resources()) {
      if (res.kind != DeviceKind::kChip) continue;
      for (const auto& d : plugin.list(res).devices) phy_of_id[d.id] = d.phy;
    }
    return attribute(*pods, phy_of_id);
  };
  return s;
}

NpuExporter::NpuExporter(Sources sources) : sources_(std::move(sources)) {}

std::vector<MetricFamily> NpuExporter::Collect() const {
  // Called on the metrics server's threads: a scrape that throws is logged and answered without the NPU
  // families (not a failed scrape: the plugin's own families still go out); the next scrape carries on.
  std::vector<MetricFamily> out;
  run_guarded(
      "metrics scrape", [&] { out = collect(); }, "answering without the NPU metrics");
  return out;
}

std::vector<MetricFamily> NpuExporter::collect() const {
  const std::vector<ChipIdentity> chips = identities(sources_.host());
  auto telemetry = sources_.telemetry();
  if (!telemetry) {
    spdlog::debug("metrics: {}", telemetry.error().message());
    return npu_families(chips, {}, {});
  }
  const Attribution holders = sources_.holders ? sources_.holders() : Attribution{};
  return npu_families(chips, *telemetry, holders);
}

}  // namespace ascend::plugin
