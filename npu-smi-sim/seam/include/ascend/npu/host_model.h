// Host models: hosts that need not be this one, named by profile (a built-in Atlas server, or a custom YAML
// profile; docs/npu-sim.md), in the seam's types. What the scheduler and the planner place jobs on: the host
// as the emulator would answer with that profile loaded (no faults, no vNPUs, device IPs of node 0). The
// profiles themselves are the emulator's (below the seam); ascend_npu_models reads them. Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "ascend/common/error.h"
#include "ascend/npu/seam.h"

namespace ascend::npu {

struct HostModel {
  std::string profile;      // "atlas800t-a2", or a custom profile's name
  std::string description;  // one line for humans
  DeviceSnapshot host;
};

// A built-in profile by name (ENOENT naming the built-in ones otherwise).
Result<HostModel> builtin_host_model(std::string_view name);
// A built-in profile, or a YAML file when `name_or_path` contains a '/' or ends in .yaml/.yml (load_profile's
// rules; errors name the file and field).
Result<HostModel> load_host_model(const std::string& name_or_path);

// The hccn.conf convention: the NIC address of device `phy_id` on the cluster's node `node_index` (0-based).
// "10.<100+phy>.<node/254>.<node%254+1>" -- unique for 254*256 nodes and 64 devices.
std::string device_ip(int node_index, int phy_id);

}  // namespace ascend::npu
