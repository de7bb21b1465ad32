// The plugin's decisions about the scheduler, planned: what the inventory report says, which reservation
// GetPreferredAllocation returns, and what a container gets from the scheduler's answer to Allocate. Pure
// functions of their inputs (no HTTP, no files); thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/npu/state.h"
#include "ascend/plugin/allocate.h"
#include "ascend/plugin/inventory.h"
#include "ascend/plugin/ledger.h"
#include "ascend/plugin/scheduler_client.h"

namespace ascend::plugin {

// Every chip of the whole-chip resource `chips`, ascending phy id: healthy as the kubelet sees it; in use
// when Allocate handed it out (the ledger's whole-chip claims) or when it is not allocatable whole (holds
// vNPUs, or its AICores are promised to dynamic vNPUs).
InventoryReport inventory_report(const npu::DeviceSnapshot& host, const ResourceSpec& chips,
                                 const Ledger& ledger);

// The device ids of `phys` in the whole-chip resource `res`, ascending phy ("Ascend910-<phy>").
std::vector<std::string> chip_ids(const ResourceSpec& res, std::vector<int> phys);
// The phy ids of the chip `ids` found in `table`, ascending; ids not in the table are left out.
std::vector<int> chip_phys(const std::vector<DeviceEntry>& table, const std::vector<std::string>& ids);

// GetPreferredAllocation: the index of the first reservation (not in `skip`) that has exactly `size`
// distinct chips, all of whose ids are in `available`, and that holds every `must_include` id. None: the
// node-level choice.
std::optional<std::size_t> pick_reservation(const std::vector<Reservation>& reservations,
                                            const ResourceSpec& res,
                                            const std::vector<std::string>& available,
                                            const std::vector<std::string>& must_include, int size,
                                            const std::set<std::size_t>& skip = {});

// Where the rank table of `grant` is written on the host: <dir>/<namespace>_<pod>.json. Fails (EPROTO)
// when the namespace or pod is not a Kubernetes (DNS-1123) name, so that nothing the scheduler sends can
// lead the path out of `dir`.
Result<std::string> ranktable_host_path(const std::string& dir, const Grant& grant);

// `base` with the grant's env entries and, when the grant carries a rank table, a read-only mount of
// `host_path` at its ranktable_path. The plugin's own entries win over the scheduler's (the device choice is
// the plugin's). Fails (EPROTO) on an env name that is empty or holds '=' and on a ranktable_path that is not
// an absolute path without "..".
Result<ContainerAllocation> with_grant(ContainerAllocation base, const Grant& grant,
                                       const std::string& host_path);

}  // namespace ascend::plugin
