// The files an emulated host lays out under its root at load() (emulator.h): device nodes, the driver tree
// with its libraries and npu-smi, DCMI, /etc and a sysfs fragment. Layout records what it creates, so that
// unload() removes exactly that (the manifest). Private to the emulator library.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/npu/state.h"

namespace ascend::npu::emulator_detail {

// Records what load() creates, so unload() removes exactly that. One load's, used by one thread.
class Layout {
 public:
  explicit Layout(std::string root) : root_(std::move(root)) {}

  // Each folder of `rel` that is missing.
  Status dir(const std::string& rel);
  Status file(const std::string& rel, std::string_view content, mode_t mode = 0644);
  // Large binaries (npu-smi) are copied without fsync: the emulated tree is scratch, not durable data.
  Status copy(const std::string& rel, const std::string& src, mode_t mode);
  // A character device node, replacing what was there.
  Status node(const std::string& rel, int major, int minor);

  // What was created, one path a line (a folder with a trailing /), in the order it was.
  std::string manifest() const;

 private:
  std::string root_;
  std::vector<std::string> created_;
};

// The programs the tree carries: npu-smi, the driver stub library the driver's libraries are copies of, and
// the emulated libdcmi.so.
struct DriverBinaries {
  std::string npu_smi;
  std::string stub;
  std::string dcmi;
};

// The chips' and the control nodes (in the manifest), and the vNPUs' nodes (not in it: unload removes them
// from the state's list, as destroy does).
Status make_device_nodes(Layout& l, const std::string& root, const HostState& s);
// The driver tree, DCMI, npu-smi and the files under /etc.
Status write_driver_tree(Layout& l, const HostState& s, const DriverBinaries& bins);
// Each chip's PCI function in sysfs, as far as the DCMI backend reads it there: its NUMA node
// (/sys/bus/pci/devices/<bus id, lower case>/numa_node), which DCMI itself does not report. Never on the real
// root, whose /sys is the kernel's.
Status write_sysfs(Layout& l, const HostState& s);

}  // namespace ascend::npu::emulator_detail
