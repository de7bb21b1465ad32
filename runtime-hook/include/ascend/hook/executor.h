// The privileged half of the hook path: carries out an InjectionPlan inside a container. Small on purpose;
// every step says which capability it needs and why (see capabilities.h for the table).
//
//   1. In the host's mount namespace, each driver path is opened inside the host root (never inside the
//   image)
//      and cloned as a detached bind mount (open_tree), already read-only, nosuid, nodev (mount_setattr), so
//      no writable window ever exists inside the container.
//   2. Nodes the runtime did not create (the hook registered without the shim) get cgroup v1 rules.
//   3. The executor enters the container's mount namespace (setns on /proc/<pid>/ns/mnt), resolves every
//      target inside the rootfs with open_in_root (openat2 RESOLVE_IN_ROOT, or the O_NOFOLLOW walk), refuses
//      a final symlink and targets on procfs/sysfs, and attaches each clone onto the target's fd
//      (move_mount). Kernels without the new mount API get a bind onto /proc/self/fd/N and a remount.
//   4. Every device node in the container is checked: a character device with the expected st_rdev.
// Nothing here is undone on failure: the mounts live in the container's private mount namespace, which the
// runtime tears down with the failed container. Not thread-safe (setns changes the calling thread; the hook
// is single-threaded).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/hook/plan.h"
#include "ascend/hook/spec_edit.h"
#include "ascend/npu/device_query.h"

namespace ascend::hook {

// Checks that every device's host node (DeviceQuery::host_path(host_path)) is a character device with the
// planned major/minor, and returns the entries with the host node's mode. Errors name the node. `host` is the
// snapshot the plan was made from: a node it read itself (nodes_checked: the node scan, in this process, with
// lstat), with the same path and numbers, is taken with its mode as read then, not read a second time.
Result<std::vector<DeviceEntry>> check_host_devices(const std::vector<DeviceEntry>& devices,
                                                    const npu::DeviceSnapshot& host,
                                                    const npu::DeviceQuery& dq);

// The spec path (Config::injection "spec"): the plan's driver paths opened inside the host root exactly as
// step 1 above opens them (missing entries skipped and logged, a symlink refused unless the plan allows
// links) and turned into the real host paths they resolved to, for the runtime to bind-mount read-only,
// nosuid, nodev. The runtime then resolves each destination inside the rootfs itself.
Result<std::vector<BindMount>> resolve_bind_mounts(const InjectionPlan& plan, const npu::DeviceQuery& dq);

struct ExecTarget {
  int pid = 0;         // the container's init process
  std::string rootfs;  // absolute, as seen in the container's mount namespace before pivot_root
  std::vector<DeviceEntry> create_nodes;  // nodes the runtime did not create: mknod + cgroup v1 rules
  bool legacy_mounts = false;             // force the mount(2) fallback (for tests of it)
};

Status execute(const InjectionPlan& plan, const npu::DeviceQuery& dq, const ExecTarget& target);

// Whether the process's device controller is cgroup v1 ("N:devices:/path" in /proc/<pid>/cgroup), and its
// folder on the host; an error on a cgroup v2 host (device rules there are an eBPF program that only the
// runtime installs).
Result<std::string> devices_cgroup_dir(int pid);

// The same from the texts of /proc/<pid>/cgroup and /proc/self/mountinfo. Pure.
Result<std::string> parse_devices_cgroup(std::string_view proc_cgroup, std::string_view mountinfo);

}  // namespace ascend::hook
