// The injection plan: from a request and the host's facts, exactly which device nodes, cgroup rules, driver
// mounts and environment a container receives. A pure function of its inputs (no file system, no clock), so
// that what a container gets is decided, tested and logged in one place; the executor (executor.h) only
// carries it out. Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "ascend/hook/mount_list.h"
#include "ascend/hook/request.h"
#include "ascend/npu/seam.h"

namespace ascend::hook {

struct DeviceEntry {
  std::string path;  // in the container: "/dev/davinci3"
  std::string
      host_path;  // as the host sees it (before DeviceQuery::host_path): "/dev/davinci3", "/dev/vdavinci100"
  int major = 0;
  int minor = 0;
  unsigned mode = 0660;  // replaced by the host node's mode once checked (executor.h: check_host_devices)

  bool operator==(const DeviceEntry&) const = default;
};

struct MountEntry {
  std::string path;  // absolute; the host path (before DeviceQuery::host_path) and the container path alike
  std::string list;  // the mount list it came from, for messages

  bool operator==(const MountEntry&) const = default;
};

struct InjectionPlan {
  std::vector<DeviceEntry> devices;  // the requested chips in id order, then the control nodes
  std::vector<MountEntry> mounts;    // list order, duplicates removed; empty with NODRV
  bool allow_link = false;           // a mount entry may be a symlink on the host
  std::vector<std::string> env;      // added to the container's environment

  bool operator==(const InjectionPlan&) const = default;
};

// `lists` are the mount lists the request names, already read. A VIRTUAL request maps host /dev/vdavinciN to
// /dev/davinciN in the container.
InjectionPlan make_plan(const Request& request, const npu::DeviceSnapshot& host,
                        const std::vector<MountList>& lists);

// One line for the log: "devices 0-3 (+3 control), 7 mounts (base), env ASCEND_DOCKER_RUNTIME=True".
std::string describe(const InjectionPlan& plan);

}  // namespace ascend::hook
