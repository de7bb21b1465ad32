// The device seam as the runtime's binaries open it (config `backend`): through the one backend factory
// (npu::open_device_query, npu/backend.h), whose `auto` rule the device plugin applies too, with DCMI
// reached from these static binaries through the device nodes and the dynamically linked helper
// ascend-dcmi-query (npu/node_query.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/common/exec_broker.h"
#include "ascend/hook/config.h"
#include "ascend/npu/device_query.h"
#include "ascend/npu/node_query.h"

namespace ascend::hook {

// `full`: the caller needs more than the device nodes tell (a chip name, a vNPU template, vNPU owners, a
// vNPU to create or destroy); with DCMI that runs the helper, which must then be root-owned and not writable
// by others (checked on the opened file). Otherwise snapshot() is the scan of the host's device nodes with
// either backend (node_query.h): chips and vNPUs by number, their nodes, the rest empty. `run_helper` runs
// the helper (empty: spawned directly; the hardened hook passes its broker's runner).
Result<std::unique_ptr<npu::DeviceQuery>> open_devices(const Config& config, bool full,
                                                       npu::HelperRunner run_helper = {});

// Whether the config's backend resolves to DCMI (`auto` included), so that `full` queries run the helper.
Result<bool> uses_dcmi(const Config& config);

// For a process about to give up exec (the hook, before harden_hook_process): when the backend is DCMI, an
// exec broker that runs only the configured helper, with this config's --root and --library and the verbs
// the DCMI client sends (npu::admit_helper_verb), in the helper's fixed environment. Null for the emulator.
Result<std::unique_ptr<ExecBroker>> start_helper_broker(const Config& config);

// Whether the request in `env` needs the full snapshot: a vNPU template (ASCEND_VNPU_SPECS), or a device
// named rather than numbered in ASCEND_VISIBLE_DEVICES ("Ascend910-3"; numbers, ranges and "all" do not).
bool needs_full_snapshot(const std::vector<std::string>& env);

}  // namespace ascend::hook
