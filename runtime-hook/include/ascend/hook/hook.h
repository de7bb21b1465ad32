// ascend-docker-hook, the library behind the binary: the OCI hook stages.
//   prestart: reads the OCI state (bounded) and the bundle's config.json, re-derives the request with the
//   same
//             parser as the shim, plans, and executes the plan in the container (executor.h). Registered
//             without the shim (OCI hooks.d style) it also creates the device nodes and the cgroup v1 rules.
//   poststop: destroys the dynamic vNPU the shim made for the container.
// Both run after the process has hardened itself (hardening.h: no exec). With the DCMI backend they reach the
// helper ascend-dcmi-query through `run_helper`, the exec broker the binary started before hardening
// (devices.h start_helper_broker); left empty, the helper is spawned directly (an unhardened caller).
// Not thread-safe (the executor enters the container's mount namespace).
#pragma once

#include <string>
#include <string_view>

#include "ascend/common/error.h"
#include "ascend/hook/config.h"
#include "ascend/npu/node_query.h"

namespace ascend::hook {

struct PrestartOptions {
  bool legacy_mounts = false;  // force the mount(2) fallback of the executor
  npu::HelperRunner run_helper;
};

Status run_prestart(std::string_view oci_state, const Config& config, const PrestartOptions& opts = {});

Status run_poststop(std::string_view oci_state, const Config& config, int destroy_vnpu,
                    const npu::HelperRunner& run_helper = {});

}  // namespace ascend::hook
