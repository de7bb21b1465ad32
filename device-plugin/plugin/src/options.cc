#include "ascend/plugin/options.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <memory>
#include <sstream>

#include "ascend/common/cli_check.h"

namespace ascend::plugin {
namespace {

// CLI11's config reader for YAML: a mapping of flag names (without dashes) to scalars. Unknown keys and
// values that are not scalars are refused here, with the file's name and the valid keys, before CLI11 applies
// the values through each option's own checks.
class YamlConfig final : public CLI::Config {
 public:
  explicit YamlConfig(const CLI::App& app) : app_(app) {}

  std::string to_config(const CLI::App* /*app*/, bool /*defaults*/, bool /*descriptions*/,
                        std::string /*prefix*/) const override {
    return {};  // never written: the shipped ConfigMaps are the examples
  }

  std::vector<CLI::ConfigItem> from_config(std::istream& in) const override {
    const std::string where = "config file " + file();
    YAML::Node root;
    try {
      root = YAML::Load(in);
    } catch (const YAML::Exception& e) {
      throw CLI::ConfigError(where + ": " + e.what());
    }
    std::vector<CLI::ConfigItem> items;
    if (root.IsNull()) return items;
    if (!root.IsMap()) throw CLI::ConfigError(where + ": expected a mapping of flag names to values");
    for (const auto& kv : root) {
      if (!kv.first.IsScalar()) throw CLI::ConfigError(where + ": a key is not a string");
      const auto key = kv.first.as<std::string>();
      const CLI::Option* opt = app_.get_option_no_throw("--" + key);
      if (opt == nullptr || !opt->get_configurable() || key == "config" || key == "help") {
        throw CLI::ConfigError(fmt::format("{}: unknown key '{}' (valid: {})", where, key, valid_keys()));
      }
      if (!kv.second.IsScalar()) throw CLI::ConfigError(fmt::format("{}: '{}' must be a string", where, key));
      CLI::ConfigItem item;
      item.name = key;
      item.inputs = {kv.second.as<std::string>()};
      items.push_back(std::move(item));
    }
    return items;
  }

 private:
  std::string file() const {
    const CLI::Option* c = app_.get_config_ptr();
    return c != nullptr && !c->results().empty() ? c->results().front() : "";
  }
  std::string valid_keys() const {
    std::vector<std::string> names;
    for (const CLI::Option* o : app_.get_options()) {
      const std::string n = o->get_single_name();
      if (o->get_configurable() && n != "config" && n != "help" && !o->get_lnames().empty())
        names.push_back(n);
    }
    std::sort(names.begin(), names.end());
    std::string out;
    for (const auto& n : names) out.append(out.empty() ? "" : ", ").append(n);
    return out;
  }

  const CLI::App& app_;
};

}  // namespace

Options::Options(CLI::App& app)
    : health_ms_(cfg_.health_interval.count()),
      gc_s_(cfg_.vnpu_gc_interval.count()),
      telegraf_s_(cfg_.telegraf_interval.count()) {
  app.set_config("--config", "", "YAML file with any of the flags below (without the dashes)");
  app.config_formatter(std::make_shared<YamlConfig>(app));
  app.add_option("--kubelet-socket-dir", cfg_.kubelet_socket_dir, "the kubelet's device-plugins folder")
      ->capture_default_str();
  app.add_option("--host-root", cfg_.host_root, "root of the (emulated) host");
  app.add_option("--backend", cfg_.backend, "device backend: auto | emulator | dcmi")->capture_default_str();
  app.add_option("--dcmi-library", cfg_.dcmi_library,
                 "libdcmi.so for --backend dcmi (default: the driver's under --host-root)");
  app.add_option("--resource-name", cfg_.resource_name, "whole-chip resource (default: from the chip)");
  app.add_option("--allocate-mode", allocate_mode_, "runtime | device-spec | cdi")
      ->check(parsed_by(parse_allocate_mode, "MODE"))
      ->capture_default_str();
  app.add_option("--vnpu", vnpu_, "off | static | dynamic")
      ->check(parsed_by(parse_vnpu_mode, "MODE"))
      ->capture_default_str();
  app.add_option("--metrics-addr", cfg_.metrics_addr, "serve /metrics on host:port (default: off)");
  app.add_flag(
      "--metrics-only", cfg_.metrics_only,
      "serve only /metrics, for a host without a kubelet: no plugin sockets, scheduler or API server");
  app.add_flag(
      "--telegraf", cfg_.telegraf,
      "Telegraf's execd input: NPU Exporter's Telegraf lines on stdout until stdin closes (no kubelet, "
      "scheduler or API server, as --metrics-only)");
  app.add_option("--telegraf-interval", telegraf_s_,
                 "s between --telegraf gathers (also one per line on stdin)")
      ->check(CLI::Range(1L, 3600L))
      ->capture_default_str();
  app.add_option(
         "--pod-resources-socket", cfg_.pod_resources_socket,
         "kubelet pod-resources socket (which allocations ended: dynamic vNPUs; chips and rank tables "
         "with a scheduler)")
      ->capture_default_str();
  app.add_option("--log-level", cfg_.log_level, "trace|debug|info|warn|error")->capture_default_str();
  app.add_option("--log-file", cfg_.log_file, "log file (default: stderr)");
  app.add_option("--scheduler-url", cfg_.scheduler_url,
                 "scheduler extender, http(s)://host:port (default: none, work alone)");
  app.add_option(
      "--node-name", cfg_.node_name,
      "this node's name for the scheduler and the API server (default: $NODE_NAME, else the host name)");
  app.add_option("--scheduler-token-file", cfg_.scheduler_token_file,
                 "file holding the scheduler's bearer token");
  app.add_option("--scheduler-ca-file", cfg_.scheduler_ca_file,
                 "CA certificate(s) for an https scheduler (default: the system's)");
  app.add_flag("--insecure-scheduler-http", cfg_.insecure_scheduler_http,
               "allow an http:// --scheduler-url that is not loopback (token and answers in clear text)");
  app.add_option(
      "--fault-codes", cfg_.fault_codes,
      "fault-code table (YAML) read over the built-in one: levels of chip fault codes, escalation");
  app.add_option("--ranktable-dir", cfg_.ranktable_dir, "where job rank tables are written")
      ->capture_default_str();
  app.add_option("--ranktable-group", cfg_.ranktable_group,
                 "group id the rank tables (0640) get: the job containers' user's group when they do not "
                 "run as root (default: the plugin's)")
      ->check(CLI::Range(0, 2147483647));
  app.add_option("--kubeconfig", cfg_.kubeconfig,
                 "kubeconfig for the API server, where the node's chips are published (MindCluster's "
                 "kube-system/mindx-dl-deviceinfo-<node> ConfigMap and the Node's labels); default: the "
                 "in-cluster service account when KUBERNETES_SERVICE_HOST is set");
  app.add_option("--kube-api", cfg_.kube_api, "the API server's URL (instead of --kubeconfig)");
  app.add_option("--kube-token-file", cfg_.kube_token_file, "bearer token file for --kube-api");
  app.add_option("--kube-ca-file", cfg_.kube_ca_file, "CA certificate(s) of an https --kube-api");
  app.add_flag(
      "--dra", cfg_.dra,
      "Dynamic Resource Allocation (Kubernetes 1.34): the chips go out as ResourceSlices of driver "
      "npu.ascend.huawei.com and through the kubelet's DRA plugin API instead of huawei.com/Ascend910 "
      "(needs the API server)");
  app.add_option("--dra-registry-dir", cfg_.dra_registry_dir,
                 "the kubelet's plugin registration folder (--dra)")
      ->capture_default_str();
  app.add_option("--dra-plugin-dir", cfg_.dra_plugin_dir,
                 "the DRA socket's and the prepared claims' checkpoint's folder (--dra)")
      ->capture_default_str();
  app.add_flag("--dra-vnpu", cfg_.dra_vnpu,
               "with --dra, the chips' vNPU templates as DRA devices too (partitionable devices: the cluster "
               "needs the DRAPartitionableDevices feature gate, else the chips alone are published); a vNPU "
               "is created when its claim is prepared and destroyed when it is unprepared");
  app.add_option("--dra-cdi-dir", cfg_.dra_cdi_dir,
                 "where the CDI spec of each claim's vNPUs is written (--dra-vnpu; the container "
                 "runtime's CDI spec folder)")
      ->capture_default_str();
  app.add_flag("--no-kube", cfg_.no_kube,
               "publish nothing to an API server, even in a cluster (the scheduler's HTTP inventory stays)");
  app.add_option("--health-interval", health_ms_,
                 "ms between checks that the driver is there (devices Unhealthy when not)")
      ->check(CLI::Range(10L, 60000L))
      ->capture_default_str();
  app.add_option("--vnpu-gc-interval", gc_s_,
                 "s between destroying dynamic vNPUs whose container is gone (0: never)")
      ->check(CLI::Range(0L, 86400L))
      ->capture_default_str();
}

Config Options::config() const {
  Config c = cfg_;
  c.allocate_mode = *parse_allocate_mode(allocate_mode_);  // checked while parsing
  c.vnpu = *parse_vnpu_mode(vnpu_);
  c.health_interval = std::chrono::milliseconds(health_ms_);
  c.vnpu_gc_interval = std::chrono::seconds(gc_s_);
  c.telegraf_interval = std::chrono::seconds(telegraf_s_);
  return c;
}

Result<Config> parse_options(const std::vector<std::string>& args) {
  CLI::App app;
  Options opts(app);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
  try {
    app.parse(reversed);
  } catch (const CLI::FileError& e) {
    return Error::not_found(e.what());
  } catch (const CLI::Error& e) {
    return Error::invalid(e.what());
  }
  return opts.config();
}

}  // namespace ascend::plugin
