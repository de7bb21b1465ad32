// HCCL rank tables (RANK_TABLE_FILE / hccl.json) for a placement. Pure; thread-safe.
//
// Version 1.0 (Atlas A2 and older): {"status": "completed", "version": "1.0", "server_count", "server_list":
// [{"server_id", "device": [{"device_id", "device_ip", "rank_id"}]}]}; every value a string, servers sorted
// by their first rank, devices by rank. Version 1.2 (when any rank is on an A3 / 910_93 node) adds
// "super_device_id" to each device and a top-level "super_pod_list".
//
// device_ip follows the emulator's hccn.conf convention: npu::device_ip(node index in the cluster, phy id).
// server_id is the node name. On A3 a super pod is a spine (the nodes that share one HCCS/UB fabric), and
// super_device_id = position of the node inside its super pod x dies per node + phy id.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "ascend/topology/cluster.h"
#include "ascend/topology/place.h"

namespace ascend::topology {

nlohmann::ordered_json rank_table(const Cluster& c, const Placement& p);

}  // namespace ascend::topology
