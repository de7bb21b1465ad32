// The host profiles the emulator can load: four built-in Atlas servers, or a custom YAML file. A profile is
// a HostState with no run-time state (no faults, no vNPUs, majors unset). Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/npu/host_model.h"
#include "ascend/npu/state.h"

namespace ascend::npu {

std::vector<std::string> builtin_profile_names();  // atlas800-9000, atlas800t-a2, atlas800t-a3, atlas300i-duo
Result<HostState> builtin_profile(std::string_view name);

// Applies `node_index` to every chip's device_ip (device_ip, host_model.h).
void assign_device_ips(HostState& s, int node_index);

// The vNPU templates of a chip family and a chip's HBM size (from the driver's template tables).
std::vector<VnpuTemplate> templates_for(Family family, int hbm_mb);
VnpuCapacity vnpu_capacity_for(Family family, int aicore, int hbm_mb);

// What a chip family implies, whoever reads the chips (the built-in profiles, the DCMI backend):
//  - the memory the vNPU tables are sized by (HBM; the 310P's 24 GB of DDR);
//  - the Kubernetes resource of a whole chip;
//  - the family of a chip as DCMI names it (dcmi_get_device_chip_info's chip_name: "910B3" is a 910B,
//    "910ProA" a 910, "Ascend910" a 910_93 die, "310P3" a 310P); ENOTSUP for a name none of them uses.
int vnpu_memory_basis_mb(const Chip& c);
std::string resource_name_for(Family family);
Result<Family> family_of_chip_name(std::string_view chip_name);

// Loads a profile by built-in name, or from a YAML file when `name_or_path` contains a '/' or ends in
// .yaml/.yml. A YAML profile uses the state file's field names; with `base: <built-in>` it overrides that
// profile (top-level fields replace, `chips` entries merge by phy_id). Errors name the file and field.
Result<HostState> load_profile(const std::string& name_or_path);

}  // namespace ascend::npu
