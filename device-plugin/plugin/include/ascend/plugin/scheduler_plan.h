// The plugin's decisions about the scheduler, planned: what the inventory report says, which reservation
// GetPreferredAllocation returns, and what a container gets from the scheduler's answer to Allocate. Pure
// functions of their inputs (no HTTP, no files); thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/npu/seam.h"
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

// A grant's ranktable_path split into the folder the container sees the rank table in and the file's name
// ("/etc/ascend/hccl.json": "/etc/ascend", "hccl.json"). The folder is what the plugin mounts: a file mount
// would keep the inode it was made with, so the container would never see the file replaced (rename) when
// the job's rank table changes; a folder mount shows the folder's current entries. Fails (EPROTO) unless
// the path is absolute, without NUL, empty, "." or ".." components and without a trailing '/', its name at
// most NAME_MAX bytes, and its folder neither "/" nor a folder the container's system lives in (a top-level
// FHS folder such as /etc, /usr or /tmp, or anything under /proc, /sys or /dev): the mount hides what the
// image has there.
struct RanktableMountPoint {
  std::string folder;
  std::string name;
  bool operator==(const RanktableMountPoint&) const = default;
};
Result<RanktableMountPoint> ranktable_mount_point(const std::string& ranktable_path);

// Where the rank table of `grant` is kept on the host: the folder <dir>/<namespace>_<pod> (mounted read-only
// at the folder of grant.ranktable_path) holding the file named as grant.ranktable_path's last component.
// `legacy_file` is <dir>/<namespace>_<pod>.json, where earlier versions wrote the file itself. Fails
// (EPROTO) when the namespace or pod is not a Kubernetes (DNS-1123) name, so that nothing the scheduler
// sends can lead the path out of `dir`, or when ranktable_mount_point refuses the ranktable_path.
struct RanktableHostPaths {
  std::string folder;
  std::string file;
  std::string legacy_file;
  bool operator==(const RanktableHostPaths&) const = default;
};
Result<RanktableHostPaths> ranktable_host_paths(const std::string& dir, const Grant& grant);

// The environment variables a scheduler grant may set in a container: the launch env that
// `ascend-scheduler` documents for a job's pods (docs/device-plugin.md, "With the scheduler extender";
// Scheduler::grant_of emits exactly these). The one allow-list: any other name, LD_PRELOAD, PATH or
// ASCEND_RUNTIME_OPTIONS say, would let whoever answers in the scheduler's place run code in, or change the
// devices of, every NPU container, so it is dropped. Sorted.
inline constexpr std::array<std::string_view, 8> kLaunchEnv = {
    "ASCEND_JOB", "NNODES",     "NODE_RANK",       "NPROC_PER_NODE",
    "RANK_SIZE",  "RANK_START", "RANK_TABLE_FILE", "WORLD_SIZE",
};
bool launch_env_name(std::string_view name);

struct GrantedAllocation {
  ContainerAllocation allocation;
  // The grant's env entries left out: a name not in kLaunchEnv, or a value holding NUL (no environment
  // can carry it). Printable and cut short (fmt's "{:?}" of at most 64 bytes), fit for one log line.
  std::vector<std::string> dropped;
};

// `base` with the grant's kLaunchEnv entries and, when the grant carries a rank table, a read-only mount
// of `host_folder` (RanktableHostPaths::folder) at the folder of its ranktable_path. The plugin's own
// entries win over the scheduler's (the device choice is the plugin's). Fails (EPROTO) only on a
// ranktable_path that ranktable_mount_point refuses: the other entries are dropped, not failed.
Result<GrantedAllocation> with_grant(ContainerAllocation base, const Grant& grant,
                                     const std::string& host_folder);

}  // namespace ascend::plugin
