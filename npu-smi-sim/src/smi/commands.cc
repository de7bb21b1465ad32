// npu-smi's argument handling and dispatch. The grammar is tiny (a verb, then flag/value pairs), and the
// real tool's exact messages and argument order matter more than a generic parser's, so it is a hand loop.
#include "ascend/npu/smi/commands.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <string_view>

#include "ascend/npu/emulator.h"
#include "ascend/npu/smi/format.h"
#include "ascend/npu/smi/view.h"
#include "ascend/npu/smi/vnpu_resources.h"
#include "ascend/npu/vnpu_load.h"

namespace ascend::npu::smi {

namespace {

// Types the real tool knows but the emulator does not model: asked for, they get the real "not supported"
// answer rather than "Error parameter".
const std::set<std::string, std::less<>> kUnmodelledInfoTypes = {"flash",
                                                                 "sensors",
                                                                 "volt",
                                                                 "mac-addr",
                                                                 "product",
                                                                 "ecc",
                                                                 "ip",
                                                                 "sys-time",
                                                                 "i2c_check",
                                                                 "work-mode",
                                                                 "ecc-enable",
                                                                 "p2p-enable",
                                                                 "ssh-enable",
                                                                 "license",
                                                                 "customized-info",
                                                                 "device-share",
                                                                 "nve-level",
                                                                 "aicpu-config",
                                                                 "pcie-err",
                                                                 "mcu-monitor",
                                                                 "err-count",
                                                                 "boot-area",
                                                                 "vnpu-svm",
                                                                 "cpu-num-cfg",
                                                                 "first-power-on-date",
                                                                 "proc-mem",
                                                                 "phyid-remap",
                                                                 "vnpu-cfg-recover",
                                                                 "key-manage",
                                                                 "pkcs-enable",
                                                                 "p2p-mem-cfg",
                                                                 "pwm-mode",
                                                                 "pwm-duty-ratio",
                                                                 "boot-select"};
const std::set<std::string, std::less<>> kInfoTypes = {"board",         "usages",    "common",   "health",
                                                       "memory",        "power",     "temp",     "topo",
                                                       "template-info", "info-vnpu", "vnpu-mode"};
const std::set<std::string, std::less<>> kUnmodelledSetTypes = {
    "ecc-enable",  "reset",       "ssh-enable",       "device-share", "clear-ecc-info",
    "vnpu-svm",    "cpu-num-cfg", "vnpu-cfg-recover", "pkcs-enable",  "p2p-mem-cfg",
    "boot-select", "reset-vnpu",  "key-manage"};
const std::set<std::string, std::less<>> kSetTypes = {"create-vnpu", "destroy-vnpu", "vnpu-mode"};

constexpr unsigned kUnspecifiedVnpuId = 4294967295U;  // "-v 4294967295": let the driver choose

struct Reply {
  Output o;
  Reply& out(std::string_view s) {
    o.out += s;
    return *this;
  }
  Reply& err(std::string_view s) {
    o.err += "npu-smi: ";
    o.err += s;
    o.err += "\n";
    return *this;
  }
  Output code(int c) {
    o.exit_code = c;
    return std::move(o);
  }
};

bool is_help(std::string_view a) {
  return a == "-h" || a == "--help";
}

// A non-negative decimal integer, as the real tool's str2int accepts.
std::optional<long long> parse_uint(std::string_view s) {
  if (s.empty() || s.size() > 10) return std::nullopt;
  long long v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

Output dcmi_init_failed(std::string_view why) {
  return Reply{}.out("dcmi module initialize failed. ret is -8005\n").err(why).code(kExitDcmiInitFailed);
}

// The parsed flags of `info` or `set`, validated against the view as the real tool does, in argument order.
struct Options {
  std::optional<std::string> type;
  const Card* card = nullptr;
  const Device* device = nullptr;
  bool list = false;
  bool mapping = false;
  std::optional<std::string> tmpl;      // -f
  std::optional<std::string> vnpu_arg;  // -v
  std::optional<std::string> mode_arg;  // -d
};

// Parses `info` (set=false) or `set` flags. Returns an error Output when the real tool would stop.
std::optional<Output> parse(const std::vector<std::string>& args, const View& view, bool set, Options& o) {
  int singles = 0;
  bool seen_i = false;
  bool seen_c = false;
  for (std::size_t i = 1; i < args.size(); i += 2) {
    const std::string& flag = args[i];
    const bool has_value = i + 1 < args.size();
    const std::string value = has_value ? args[i + 1] : std::string();
    auto error_parameter = [&]() {
      return Reply{}.out("Error parameter of " + flag + "\n").code(kExitInvalidParameter);
    };
    if (!set && (flag == "-t" || flag == "-l" || flag == "-m")) {
      if (singles++ > 0) return error_parameter();
    }
    if (flag == "-t") {
      if (!has_value) return error_parameter();
      const auto& known = set ? kSetTypes : kInfoTypes;
      const auto& unmodelled = set ? kUnmodelledSetTypes : kUnmodelledInfoTypes;
      if (known.count(value) == 0) {
        if (unmodelled.count(value) != 0) {
          return Reply{}
              .out(std::string(set ? "This device does not support setting "
                                   : "This device does not support querying ") +
                   value + ".\n")
              .code(kExitNotSupported);
        }
        return error_parameter();
      }
      o.type = value;
    } else if (flag == "-i") {
      if (seen_i) return error_parameter();
      seen_i = true;
      auto id = has_value ? parse_uint(value) : std::nullopt;
      o.card = id ? view.card(static_cast<int>(*id)) : nullptr;
      if (o.card == nullptr)
        return Reply{}.out("Invalid card id.\nError parameter of -i\n").code(kExitInvalidParameter);
    } else if (flag == "-c") {
      if (seen_c) return error_parameter();
      seen_c = true;
      auto id = has_value ? parse_uint(value) : std::nullopt;
      o.device = (id && o.card != nullptr) ? view.device(o.card->id, static_cast<int>(*id)) : nullptr;
      if (o.device == nullptr)
        return Reply{}.out("Invalid chip id.\nError parameter of -c\n").code(kExitInvalidParameter);
    } else if (!set && (flag == "-l" || flag == "-m")) {
      (flag == "-l" ? o.list : o.mapping) = true;
      i -= 1;  // a flag without a value
    } else if (set && flag == "-f") {
      if (!has_value) return error_parameter();
      o.tmpl = value;
    } else if (set && flag == "-v") {
      if (!has_value) return error_parameter();
      o.vnpu_arg = value;
    } else if (set && flag == "-d") {
      if (!has_value) return error_parameter();
      o.mode_arg = value;
    } else if (set && flag == "-g" && o.type) {
      return Reply{}
          .out("This device does not support setting " + *o.type + " with -g.\n")
          .err("vGroups are assigned by the emulator (lowest free)")
          .code(kExitNotSupported);
    } else {
      return error_parameter();
    }
  }
  return std::nullopt;
}

Output need(std::string_view what) {
  return Reply{}.out("Must input parameter of " + std::string(what) + ".\n").code(kExitInvalidParameter);
}

// A view holding only one card (`npu-smi info -i N`).
View only_card(const View& v, const Card& c) {
  View out;
  out.state = v.state;
  out.cards.push_back(c);
  return out;
}

Output run_info(const std::vector<std::string>& args, const HostState& s, const View& view) {
  Options o;
  if (args.size() > 1 && (args[1] == "watch" || args[1] == "proc")) {
    return Reply{}.out("This device does not support querying " + args[1] + ".\n").code(kExitNotSupported);
  }
  if (auto e = parse(args, view, /*set=*/false, o)) return *e;
  Reply r;
  if (o.list) return r.out(card_list(view)).code(kExitOk);
  if (o.mapping) return r.out(mapping(view)).code(kExitOk);
  if (!o.type) {
    if (o.card != nullptr) return r.out(info_table(only_card(view, *o.card))).code(kExitOk);
    return r.out(info_table(view)).code(kExitOk);
  }
  const std::string& t = *o.type;
  if (t == "topo") return r.out(topo(view)).code(kExitOk);
  if (t == "vnpu-mode") return r.out(vnpu_mode(s)).code(kExitOk);
  if (t == "template-info") {
    if (s.templates.empty())
      return r.out("This device does not support querying template-info.\n").code(kExitNotSupported);
    return r.out(template_info(s)).code(kExitOk);
  }
  if (o.card == nullptr) return need("card id");
  if (t == "board") {
    return r.out(o.device != nullptr ? chip_board(view, *o.device) : card_board(view, *o.card)).code(kExitOk);
  }
  if (t == "usages") return r.out(usages(view, *o.card, o.device)).code(kExitOk);
  if (t == "common") return r.out(common(view, *o.card, o.device)).code(kExitOk);
  if (t == "health") return r.out(health(view, *o.card, o.device)).code(kExitOk);
  if (t == "memory") return r.out(memory(view, *o.card, o.device)).code(kExitOk);
  if (t == "power") return r.out(power(view, *o.card, o.device)).code(kExitOk);
  if (t == "temp") return r.out(temp(view, *o.card, o.device)).code(kExitOk);
  // info-vnpu: one physical chip.
  if (o.device == nullptr) return need("chip id");
  if (o.device->vnpu != nullptr) {
    return r.out("This device does not support querying info-vnpu.\n")
        .err("a vNPU cannot be split further")
        .code(kExitNotSupported);
  }
  return r.out(info_vnpu(s, *o.device->chip)).code(kExitOk);
}

int exit_for(const Error& e) {
  switch (e.code()) {
    case EINVAL:
    case EEXIST:
    case ENOENT:
      return kExitInvalidParameter;
    case ENOSPC:
      return kExitNotSupported;
    default:
      return kExitInnerError;
  }
}

Output status_ok(const std::string& message) {
  return Reply{}.out(kv("Status", "OK") + kv("Message", message)).code(kExitOk);
}

Output run_set(const std::vector<std::string>& args, const HostState& s, const View& view, Emulator& emu) {
  Options o;
  if (auto e = parse(args, view, /*set=*/true, o)) return *e;
  if (!o.type) return Reply{}.out(set_help_text()).code(kExitInvalidParameter);
  const std::string& t = *o.type;
  if (t == "vnpu-mode") {
    if (!o.mode_arg) return need("-d");
    if (*o.mode_arg != "0" && *o.mode_arg != "1") {
      return Reply{}.out("Error parameter of -d\n").code(kExitInvalidParameter);
    }
    const std::string mode = *o.mode_arg == "0" ? "docker" : "vm";
    auto st = emu.set_vnpu_mode(mode);
    if (!st) {
      if (st.error().code() == EBUSY) {
        return Reply{}
            .out(kv("Status", "Fail") +
                 kv("Message",
                    "The vNPU(s) in another mode already exist. Destroy them before switching the mode"))
            .code(kExitResourceOccupied);
      }
      return Reply{}.out("set vnpu mode failed.\n").err(st.error().message()).code(exit_for(st.error()));
    }
    return status_ok("Set vnpu " + mode + " mode success");
  }
  if (o.card == nullptr) return need("card id");
  if (o.device == nullptr) return need("chip id");
  if (o.device->vnpu != nullptr) {
    return Reply{}
        .out("This device does not support setting " + t + ".\n")
        .err("a vNPU cannot be split further")
        .code(kExitNotSupported);
  }
  const Chip& chip = *o.device->chip;
  if (t == "create-vnpu") {
    if (!o.tmpl) return need("-f");
    const VnpuTemplate* tmpl = s.find_template(*o.tmpl);
    if (tmpl == nullptr) {
      std::string names;
      for (const auto& x : s.templates) names += (names.empty() ? "" : ", ") + x.name;
      return Reply{}
          .out("Error parameter of -f\n")
          .err("unknown vNPU template '" + *o.tmpl + "' for " + chip.name + " (valid: " + names + ")")
          .code(kExitInvalidParameter);
    }
    std::optional<int> id;
    if (o.vnpu_arg) {
      auto v = parse_uint(*o.vnpu_arg);
      if (!v || *v > kUnspecifiedVnpuId)
        return Reply{}.out("Error parameter of -v\n").code(kExitInvalidParameter);
      if (*v != kUnspecifiedVnpuId) id = static_cast<int>(*v);
    }
    // The real tool checks the chip's free AICore and AICPU first, with these messages.
    const VnpuResources res = vnpu_resources(s, chip.phy_id);
    if (tmpl->aicore > res.aicore.free) {
      char buf[128];
      std::snprintf(buf, sizeof buf, "Insufficient number of cores available, unallocated cores number:%f.\n",
                    static_cast<double>(res.aicore.free));
      return Reply{}.out(buf).code(kExitNotSupported);
    }
    const double aicpu_used = vnpu_load(s.vnpus, s.templates, chip.phy_id).aicpu;
    const int aicpu_free =
        std::max(0, s.vnpu_capacity.aicpu - static_cast<int>(std::ceil(aicpu_used - 1e-9)));
    if (tmpl->aicpu > aicpu_free + 1e-9) {
      return Reply{}
          .out("Insufficient number of AICPU available, unallocated AICPU number:" +
               std::to_string(aicpu_free) + ".\n")
          .code(kExitNotSupported);
    }
    auto made = emu.create_vnpu(chip.phy_id, *o.tmpl, id, {});
    if (!made)
      return Reply{}.out("create vnpu failed.\n").err(made.error().message()).code(exit_for(made.error()));
    return status_ok("Create vnpu success");
  }
  // destroy-vnpu
  auto id = o.vnpu_arg ? parse_uint(*o.vnpu_arg) : std::nullopt;
  const Vnpu* v = id ? s.vnpu(static_cast<int>(*id)) : nullptr;
  if (v == nullptr || v->phy_id != chip.phy_id) {
    Reply r;
    r.out("Error parameter of -v.\n");
    if (o.vnpu_arg)
      r.err("no vNPU " + *o.vnpu_arg + " on card " + std::to_string(o.card->id) + " chip " +
            std::to_string(o.device->chip_index));
    return r.code(kExitInvalidParameter);
  }
  auto st = emu.destroy_vnpu(v->id, chip.phy_id, std::nullopt);
  if (!st) {
    return Reply{}
        .out("destroy vnpu " + std::to_string(v->id) + " failed.\n")
        .err(st.error().message())
        .code(exit_for(st.error()));
  }
  return status_ok("Destroy vnpu " + std::to_string(v->id) + " success");
}

bool visible_node(const std::string& path, const DeviceNode& node) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) return false;
  return static_cast<int>(major(st.st_rdev)) == node.major &&
         static_cast<int>(minor(st.st_rdev)) == node.minor;
}

bool nothing_visible(const Visible& v) {
  return v.chips.empty() && v.vnpus.empty();
}

}  // namespace

Visible visible_devices(const HostState& s, const std::string& root) {
  // A host loaded without device nodes (an unprivileged test or demo) shows every chip.
  if (!s.device_nodes) return all_chips(s);
  std::string base = root;
  while (!base.empty() && base.back() == '/') base.pop_back();
  Visible v;
  for (const Chip& c : s.chips) {
    DeviceNode n = s.chip_node(c.phy_id);
    if (visible_node(base + n.path, n)) v.chips.push_back(c.phy_id);
  }
  for (const Vnpu& x : s.vnpus) {
    DeviceNode n = s.vnpu_node(x.id);
    // On the host the vNPU is /dev/vdavinci<id>; a container receives it as /dev/davinci<id>.
    if (visible_node(base + n.path, n) || visible_node(base + "/dev/davinci" + std::to_string(x.id), n)) {
      v.vnpus.push_back(x.id);
    }
  }
  return v;
}

std::string help_text() {
  std::string out = "Usage: npu-smi <Command|-h|-v> [Options...]\n\nnpu-smi Command:\n";
  const std::pair<const char*, const char*> cmds[] = {{"-h", "This command's help information"},
                                                      {"--help", "This command's help information"},
                                                      {"-v", "Show npu-smi version information"},
                                                      {"info", "Show hardware details"},
                                                      {"set", "Modify device configuration properties"}};
  for (const auto& [name, desc] : cmds) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "\t%-12s  %s\n", name, desc);
    out += buf;
  }
  out +=
      "\nThis npu-smi reads the emulated Ascend host under $ASCEND_SIM_ROOT (else /), written by npu-sim,\n"
      "and shows only the devices whose /dev/davinci<N> node is present there (as inside a container).\n"
      "See 'npu-smi info -h' and 'npu-smi set -h'.\n"
      "\nExit codes (the low byte of the real tool's negative error code):\n"
      "\t0      success\n"
      "\t215    invalid parameter (-9001): unknown card, chip, type, template or vNPU id\n"
      "\t217    not supported (-9255): not on this device, or not enough free AICore/AICPU for a vNPU\n"
      "\t196    resource occupied (-9020): vnpu-mode switch while vNPUs exist\n"
      "\t211    internal error (-9005): unknown command, or the host state could not be read or written\n"
      "\t187    dcmi init failed (-8005): no emulated host is loaded, or no NPU device node is visible\n";
  return out;
}

std::string info_help_text() {
  return "Usage: npu-smi info <-h|-m|-l|-t type> [Options...]\n"
         "\n"
         "Commands:\n"
         "       -h, --help     Show this help text and exit\n"
         "       -m             Show all device's mapping information\n"
         "       -l             Show all device's topology information\n"
         "       -t type        Show information for type\n"
         "                      type: board, memory, usages, common, health, power, temp, vnpu-mode,\n"
         "                            info-vnpu, template-info, topo.\n"
         "\n"
         "Options:\n"
         "       -i %d          Card ID\n"
         "       -c %d          Chip ID\n"
         "\n"
         "Without options: the table of every visible NPU and its processes.\n";
}

std::string set_help_text() {
  return "Usage: npu-smi set -t type [Options...]\n"
         "\n"
         "Commands:\n"
         "       -h, --help     Show this help text and exit\n"
         "       -t type        Set information for type\n"
         "                      type: create-vnpu, destroy-vnpu, vnpu-mode.\n"
         "\n"
         "Options:\n"
         "       -i %d          Card ID\n"
         "       -c %d          Chip ID\n"
         "       -f %s          vNPU template name (create-vnpu; see 'npu-smi info -t template-info')\n"
         "       -v %d          vNPU ID (create-vnpu: optional, 100+16*phy_id+k; destroy-vnpu: required)\n"
         "       -d %d          vnpu-mode: 0 docker, 1 vm\n";
}

Output run_query(const std::vector<std::string>& args, const HostState& s, const Visible& visible) {
  if (args.empty()) return Reply{}.out(help_text()).code(kExitInvalidParameter);
  const std::string& cmd = args[0];
  if (is_help(cmd)) return Reply{}.out(help_text()).code(kExitOk);
  if (cmd == "-v") return Reply{}.out("npu-smi version: " + s.smi_version + "\n").code(kExitOk);
  if (cmd == "set")
    return Reply{}.out(set_help_text()).err("set needs the emulated host: use run()").code(kExitInnerError);
  if (cmd != "info")
    return Reply{}.out("Command or option is not found.\n" + help_text()).code(kExitInnerError);
  if (std::any_of(args.begin() + 1, args.end(), [](const std::string& a) { return is_help(a); })) {
    return Reply{}.out(info_help_text()).code(kExitOk);
  }
  if (nothing_visible(visible)) return dcmi_init_failed("no NPU device node is visible");
  View view = make_view(s, visible);
  return run_info(args, s, view);
}

Output run(const std::vector<std::string>& args, const std::string& root) {
  if (args.empty()) return Reply{}.out(help_text()).code(kExitInvalidParameter);
  const std::string& cmd = args[0];
  if (is_help(cmd)) return Reply{}.out(help_text()).code(kExitOk);
  if (cmd != "info" && cmd != "set" && cmd != "-v") {
    return Reply{}.out("Command or option is not found.\n" + help_text()).code(kExitInnerError);
  }
  if (std::any_of(args.begin() + 1, args.end(), [](const std::string& a) { return is_help(a); })) {
    return Reply{}.out(cmd == "set" ? set_help_text() : info_help_text()).code(kExitOk);
  }
  Emulator emu(root);
  auto snap = emu.live_state();  // the chips as they are now, with the work running on them
  if (!snap) return dcmi_init_failed(snap.error().message());
  const HostState& s = *snap;
  Visible visible = visible_devices(s, root);
  if (cmd != "set") return run_query(args, s, visible);
  if (nothing_visible(visible)) return dcmi_init_failed("no NPU device node is visible under " + root);
  View view = make_view(s, visible);
  return run_set(args, s, view, emu);
}

}  // namespace ascend::npu::smi
