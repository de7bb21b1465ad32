#include "ascend/hook/shim.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "ascend/common/dev_char.h"
#include "ascend/common/fs.h"
#include "ascend/hook/cli.h"
#include "ascend/hook/devices.h"
#include "ascend/hook/executor.h"
#include "ascend/hook/oci.h"
#include "ascend/hook/request.h"
#include "ascend/hook/spec_edit.h"
#include "ascend/hook/spec_scan.h"
#include "ascend/hook/trust.h"
#include "ascend/npu/vnpu_gc.h"

namespace ascend::hook {

namespace {

// runc's global options that take a value.
bool global_takes_value(const std::string& opt) {
  return opt == "--root" || opt == "--log" || opt == "--log-format" || opt == "--criu" || opt == "--rootless";
}

// Options of runc create/run that take a value (the others are flags).
bool verb_takes_value(const std::string& opt) {
  return opt == "--bundle" || opt == "-b" || opt == "--console-socket" || opt == "--pid-file" ||
         opt == "--preserve-fds";
}

#if defined(ASCEND_TEST_HOOKS) && ASCEND_TEST_HOOKS
// The test switch ASCEND_RUNTIME_ABORT_AT (shim.h), in the test build only.
void abort_if_asked(const char* step) {
  const char* at = std::getenv("ASCEND_RUNTIME_ABORT_AT");
  if (at != nullptr && std::strcmp(at, step) == 0) {
    flush_logs();
    ::kill(::getpid(), SIGKILL);
  }
}
#else
// The shipped shim: no test switch.
void abort_if_asked(const char* /*step*/) {}
#endif

std::string current_dir() {
  char buf[4096];
  if (::getcwd(buf, sizeof buf) == nullptr) return ".";
  return buf;
}

// Destroys a vNPU made for a container unless the container's spec was written.
class VnpuGuard {
 public:
  VnpuGuard(npu::DeviceQuery& dq, npu::Vnpu vnpu) : dq_(dq), vnpu_(std::move(vnpu)) {}
  VnpuGuard(const VnpuGuard&) = delete;
  VnpuGuard& operator=(const VnpuGuard&) = delete;
  ~VnpuGuard() {
    if (dismissed_) return;
    // The node's numbers are read before the destroy: afterwards the seam no longer knows the vNPU.
    std::optional<npu::DeviceNode> node;
    if (auto host = dq_.snapshot(); host && host->vnpu(vnpu_.id) != nullptr) node = host->vnpu_node(vnpu_.id);
    if (auto st = dq_.destroy_vnpu(vnpu_.id, std::nullopt, vnpu_.owner); !st) {
      spdlog::error("could not destroy vNPU {} after a failure: {}", vnpu_.id, st.error().message());
      return;
    }
    if (node) (void)remove_stale_dev_char_link(dq_.host_path("/"), node->path, node->major, node->minor);
  }
  void dismiss() { dismissed_ = true; }

 private:
  npu::DeviceQuery& dq_;
  npu::Vnpu vnpu_;
  bool dismissed_ = false;
};

// /dev/char links for the nodes the container gets (dev_char.h says why). A failure is logged, not fatal:
// the container works, only a systemd daemon-reload may take its devices away.
void link_dev_char(const std::vector<DeviceEntry>& devices, const npu::DeviceQuery& dq) {
  const std::string root = dq.host_path("/");
  for (const auto& d : devices) {
    auto made = ensure_dev_char_link(root, d.host_path, d.major, d.minor);
    if (!made) {
      spdlog::warn("/dev/char link for {}: {}", d.host_path, made.error().message());
    } else if (*made) {
      spdlog::info("linked /dev/char/{}:{} to {}", d.major, d.minor, d.host_path);
    }
  }
}

// The hook runs as root in every container start: it must be executable, and only root may be able to
// replace it (checked on the opened file; runc then executes it by path).
Status check_hook_binary(const std::string& path) {
  if (::access(path.c_str(), X_OK) != 0) {
    return Error::from_errno(errno, "hook " + path + " (set hook-path in the config)");
  }
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Error::from_errno(errno, "open hook " + path);
  return check_protected(fd.get(), path, "hook");
}

// runc 1.1 creates /dev/ptmx, /dev/fd and /dev/std* by path, so an image whose /dev is a symlink gets them
// written wherever it points, the host included (seen with Debian 12's runc 1.1.5; runc's own bug, for every
// container). A container that asks for NPUs is refused rather than started that way.
Status refuse_linked_dev(const std::string& rootfs) {
  struct stat st {};
  std::string dev = rootfs + "/dev";
  if (::lstat(dev.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    return Error(ELOOP,
                 "the image's /dev is a symbolic link; refusing to start (the runtime would create "
                 "its /dev entries wherever it points)");
  }
  return {};
}

// pass_through_early's hand-over to main: a function's static, made on first use (which may be before static
// initialisation).
std::optional<EarlyRead>& early_read() {
  static std::optional<EarlyRead> read;
  return read;
}

bool creates(const RuntimeArgs& args) {
  return args.verb == "create" || args.verb == "run";
}

// The bundle's folder, absolute: --bundle, else the current one.
std::string bundle_dir(const RuntimeArgs& args) {
  std::string bundle = args.bundle.empty() ? current_dir() : args.bundle;
  if (bundle[0] != '/') bundle = current_dir() + "/" + bundle;
  return bundle;
}

// The runtime, by exec, with the original arguments. Returns only on failure.
Error exec_runtime(const RuntimeArgs& args, const Config& config) {
  auto runtime = find_runtime(config.runtime_path);
  if (!runtime) return runtime.error();
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(config.runtime_path.c_str()));
  for (const auto& a : args.runtime_args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  flush_logs();
  ::execv(runtime->c_str(), argv.data());
  return Error::from_errno(errno, "exec " + *runtime);
}

}  // namespace

Result<RuntimeArgs> parse_runtime_args(const std::vector<std::string>& args) {
  RuntimeArgs r;
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.empty() || a[0] != '-') break;  // the verb
    if (a == "--config" || a.rfind("--config=", 0) == 0) {
      if (a == "--config") {
        if (i + 1 >= args.size()) return Error::invalid("--config needs a file");
        r.config = args[++i];
      } else {
        r.config = a.substr(9);
      }
      continue;
    }
    r.runtime_args.push_back(a);
    auto eq = a.find('=');
    std::string name = a.substr(0, eq);
    if (global_takes_value(name)) {
      std::string value;
      if (eq != std::string::npos) {
        value = a.substr(eq + 1);
      } else if (i + 1 < args.size()) {
        value = args[++i];
        r.runtime_args.push_back(value);
      }
      if (name == "--log") r.log_file = value;
      if (name == "--log-format") r.log_format = value;
      if (name == "--root") r.state_root = value;
    }
  }
  if (i < args.size()) r.verb = args[i];
  const bool creating = creates(r);
  bool value_next = false;  // the previous option takes this argument as its value
  bool operands = false;    // after "--"
  for (std::size_t k = i + 1; k < args.size(); ++k) {
    const std::string& a = args[k];
    if (!operands && a == "--") {
      operands = true;
      continue;
    }
    if (value_next) {
      value_next = false;
      continue;
    }
    if (!operands && a.size() > 1 && a[0] == '-') {
      value_next = verb_takes_value(a);
      continue;
    }
    if (creating && r.container_id.empty()) r.container_id = a;
  }
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    r.runtime_args.push_back(a);
    if (a == "--") {
      for (++i; i < args.size(); ++i) r.runtime_args.push_back(args[i]);
      break;
    }
    if (creating && (a == "--bundle" || a == "-b") && i + 1 < args.size()) {
      r.bundle = args[i + 1];
    } else if (a.rfind("--bundle=", 0) == 0) {
      r.bundle = a.substr(9);
    } else if (a.rfind("-b=", 0) == 0) {
      r.bundle = a.substr(3);
    }
  }
  return r;
}

std::string runc_state_root(const RuntimeArgs& args) {
  if (!args.state_root.empty()) {
    return args.state_root[0] == '/' ? args.state_root : current_dir() + "/" + args.state_root;
  }
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  if (::geteuid() != 0 && xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/runc";
  return "/run/runc";
}

Result<bool> prepare_bundle(const RuntimeArgs& args, const Config& config,
                            std::optional<std::string> spec_text) {
  std::string bundle = bundle_dir(args);
  std::string spec_path = bundle + "/config.json";
  if (!spec_text) {
    ASCEND_ASSIGN(spec_text, read_file(spec_path, kMaxSpecBytes), "read the container's spec");
  }
  const std::string& text = *spec_text;
  // Most containers ask for nothing: that is decided in one pass over the text, without a tree.
  if (spec_requests_nothing(text)) return false;
  ASCEND_ASSIGN(Spec spec, parse_spec(text), spec_path);
  ASCEND_ASSIGN(std::vector<std::string> spec_vars, spec_env(spec), spec_path);
  ASCEND_ASSIGN(TrustedRequest trusted,
                trusted_request_env(spec, std::move(spec_vars), config.accept_env_when_unprivileged),
                spec_path);
  const std::vector<std::string>& env = trusted.env;
  if (!trusted.note.empty()) {
    setup_binary_logging(config);
    spdlog::warn("bundle {}: {}", bundle, trusted.note);
  }
  if (!requests_devices(env)) return false;  // not ours: config.json stays byte for byte
  setup_binary_logging(config);              // only now: a container that asks for nothing pays no log set-up

  ASCEND_ASSIGN(std::unique_ptr<npu::DeviceQuery> devices, open_devices(config, needs_full_snapshot(env)),
                "");
  npu::DeviceQuery& dq = *devices;
  ASCEND_ASSIGN(npu::DeviceSnapshot host, dq.snapshot(), "read the NPU host");
  ASCEND_ASSIGN(std::optional<Request> parsed, parse_request(env, host), "");
  if (!parsed) return false;
  ASCEND_ASSIGN(std::string rootfs, spec_rootfs(spec, bundle), spec_path);
  ASCEND_CHECK(refuse_linked_dev(rootfs), "");
  Request request = std::move(*parsed);

  std::optional<npu::Vnpu> vnpu;
  std::optional<VnpuGuard> guard;
  if (!request.vnpu_template.empty()) {
    if (args.container_id.empty()) return Error::invalid("runc " + args.verb + " without a container id");
    // Tagged with its container in the same step: whatever kills us from here on, `vnpu gc` finds it.
    npu::VnpuOwner owner = npu::owner_for_this_process(args.container_id, runc_state_root(args), host);
    ASCEND_ASSIGN(vnpu, dq.create_vnpu(request.ids[0], request.vnpu_template, std::nullopt, owner),
                  std::string(kEnvVnpuSpecs) + "=" + request.vnpu_template);
    guard.emplace(dq, *vnpu);
    spdlog::info("created vNPU {} ({}) on device {} for container {}", vnpu->id, request.vnpu_template,
                 request.ids[0], args.container_id);
    abort_if_asked("vnpu-created");
    ASCEND_ASSIGN(host, dq.snapshot(), "read the NPU host");
    request.ids = {vnpu->id};
    request.is_virtual = true;
    request.vnpu_template.clear();
  }

  std::vector<MountList> lists;
  if (!request.nodrv) {
    ASCEND_ASSIGN(lists, load_mount_lists(config.mount_list_dir, request.mount_lists), kEnvRuntimeMounts);
  }
  InjectionPlan plan = make_plan(request, host, lists);
  ASCEND_ASSIGN(plan.devices, check_host_devices(plan.devices, host, dq), "");
  link_dev_char(plan.devices, dq);
  bool by_hook = config.injection == "hook";
  if (by_hook || vnpu) ASCEND_CHECK(check_hook_binary(config.hook_path), "");

  HookCommand hook;
  hook.path = config.hook_path;
  hook.args = {kHookName};
  if (!config.config_file.empty()) hook.args.insert(hook.args.end(), {"--config", config.config_file});
  SpecEdit edit;
  if (by_hook) {
    HookCommand prestart = hook;
    prestart.args.emplace_back("prestart");
    edit = make_spec_edit(plan, prestart);
  } else {
    ASCEND_ASSIGN(std::vector<BindMount> mounts, resolve_bind_mounts(plan, dq), "inject driver files");
    edit = make_spec_edit(plan, std::move(mounts));
  }
  if (vnpu) {
    HookCommand poststop = hook;
    poststop.args.insert(poststop.args.end(), {"poststop", "--destroy-vnpu", std::to_string(vnpu->id)});
    edit.poststop.push_back(poststop);
    edit.drop_env.emplace_back(kEnvVnpuSpecs);
    edit.add_env.push_back(std::string(kEnvVisibleDevices) + "=" + std::to_string(vnpu->id));
    edit.add_env.push_back(std::string(kEnvRuntimeOptions) + "=VIRTUAL" + (request.nodrv ? ",NODRV" : ""));
    // The orchestrator's marker of the chip now names the vNPU, so that the hook (which re-derives the
    // request from config.json) and the container see the device the container holds.
    edit.retarget_mounts.emplace_back(fmt::format("{}/{}", kMarkerDir, vnpu->phy_id),
                                      fmt::format("{}/{}", kMarkerDir, vnpu->id));
  }
  ASCEND_ASSIGN(std::string edited, apply_spec_edit_tree(std::move(spec), edit), spec_path);
  // No fsync: a bundle does not outlive a crash (the engine re-creates it), and runc reads it right away.
  ASCEND_CHECK(atomic_replace(spec_path, edited, 0644, Durability::kEphemeral), "write the container's spec");
  if (guard)
    guard->dismiss();  // from here on the poststop hook owns the vNPU (and vnpu gc, should it never run)
  abort_if_asked("spec-written");
  spdlog::info("bundle {}: {} ({})", bundle, describe(plan),
               by_hook ? "driver files by the prestart hook" : "driver files as spec mounts");
  return true;
}

Result<std::string> find_runtime(const std::string& runtime_path) {
  if (runtime_path.find('/') != std::string::npos) {
    if (::access(runtime_path.c_str(), X_OK) != 0) return Error::from_errno(errno, "runtime " + runtime_path);
    return runtime_path;
  }
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  std::string me = n > 0 ? std::string(self, static_cast<std::size_t>(n)) : "";
  const char* path_env = std::getenv("PATH");
  std::string path =
      path_env != nullptr ? path_env : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t colon = path.find(':', start);
    std::string dir = path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    start = colon == std::string::npos ? path.size() + 1 : colon + 1;
    if (dir.empty()) continue;
    std::string cand = fmt::format("{}/{}", dir, runtime_path);
    if (::access(cand.c_str(), X_OK) != 0) continue;
    char real[4096];
    if (::realpath(cand.c_str(), real) != nullptr && me == real) continue;  // never exec ourselves
    return cand;
  }
  return Error::not_found("runtime '" + runtime_path +
                          "' not found in PATH (set runtime-path in the config)");
}

Error run_shim(const RuntimeArgs& args, const Config& config, std::optional<std::string> spec_text) {
  if (creates(args)) {
    auto changed = prepare_bundle(args, config, std::move(spec_text));
    if (!changed) return changed.error();
  }
  return exec_runtime(args, config);
}

ConfigDefaults shim_config_defaults() {
  return ConfigDefaults{self_exe_dir(), "runtime-run.log"};
}

bool wants_shim_help(int argc, const char* const* argv) {
  return argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0);
}

void pass_through_early(int argc, char** argv) noexcept {
  try {
    if (argc < 1 || wants_shim_help(argc, argv)) return;
    auto args = parse_runtime_args(std::vector<std::string>(argv + 1, argv + argc));
    if (!args) return;
    auto config = load_config(args->config, shim_config_defaults(), ConfigReaders::flat_only);
    if (!config) return;
    if (creates(*args)) {
      auto text = read_file(bundle_dir(*args) + "/config.json", kMaxSpecBytes);
      if (!text) return;
      if (!spec_requests_nothing(*text)) {
        early_read().emplace(EarlyRead{std::move(*args), std::move(*config), std::move(*text)});
        return;
      }
    }
    (void)exec_runtime(*args, *config);  // returns only when the exec failed: main says why
  } catch (...) {  // NOLINT(bugprone-empty-catch): main does it all again and reports what is wrong
    early_read().reset();
  }
}

std::optional<EarlyRead> take_early_read() {
  return std::exchange(early_read(), std::nullopt);
}

void report_to_runtime_log(const RuntimeArgs& args, const std::string& raw_message) {
  if (args.log_file.empty()) return;
  std::string message = one_line(raw_message);
  std::string line;
  if (args.log_format == "json") {
    char ts[64];
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&now, &tm);
    std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    // Replace, not throw, should the message hold bytes that are not UTF-8.
    line = nlohmann::json{{"level", "error"}, {"msg", message}, {"time", ts}}.dump(
               -1, ' ', false, nlohmann::json::error_handler_t::replace) +
           "\n";
  } else {
    std::string quoted;
    for (char ch : message) quoted += ch == '"' || ch == '\\' ? std::string("\\") + ch : std::string(1, ch);
    line = "level=error msg=\"" + quoted + "\"\n";
  }
  int fd = ::open(args.log_file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  ssize_t w = ::write(fd, line.data(), line.size());
  (void)w;
  ::close(fd);
}

}  // namespace ascend::hook
