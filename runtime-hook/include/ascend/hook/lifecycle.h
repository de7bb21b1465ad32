// What `ascend-ctk vnpu gc` and `ascend-ctk system create-dev-char-symlinks|remove-dev-char-symlinks` do,
// over the host the config names: dynamic vNPUs whose container is gone (vnpu_gc.h) and the /dev/char links
// of the NPU device nodes (dev_char.h says why systemd needs them). The report formatting is pure; the
// rest acts on the host. Not thread-safe (one command per process).
#pragma once

#include <string>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/hook/config.h"
#include "ascend/npu/vnpu_gc.h"

namespace ascend::hook {

// One line per vNPU: "destroyed vNPU 148 (vir05_1c_16g, device 3): container abc does not exist in
// /run/runc" ("would destroy" with dry_run), "kept vNPU 149 ...: <why>"; then a summary line
// "vnpu gc: 1 destroyed, 1 kept, 0 static" (static: vNPUs without an owner, never touched). Pure.
std::string format_gc_report(const npu::GcReport& report, int static_count, bool dry_run);

struct GcOutcome {
  std::string text;     // format_gc_report
  bool failed = false;  // some orphan could not be destroyed (exit 1)
};
Result<GcOutcome> vnpu_gc(const Config& config, bool dry_run);

// Links every NPU device node of the host (chips, control nodes, vNPUs) that exists as the driver reports
// it. Returns one line per link made ("/dev/char/234:0 -> ../davinci0"); links already right are not listed.
Result<std::vector<std::string>> create_dev_char_symlinks(const Config& config);

// Removes the links this toolkit made (its record), leaving udev's. Returns the links removed.
Result<std::vector<std::string>> remove_dev_char_symlinks(const Config& config);

}  // namespace ascend::hook
