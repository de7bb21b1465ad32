// npu-smi: the real tool's compatible subset, as a library so that tests run it in-process. `run` takes the
// arguments after the program name and the host root, and returns what the tool prints and its exit code.
// What npu-smi shows is limited to the devices whose nodes exist under the root (/dev/davinci<phy>, and
// /dev/davinci<vnpu id> for a vNPU handed to a container as VIRTUAL), as on a real host inside a container.
// Thread-safe (no shared state).
#pragma once

#include <string>
#include <vector>

#include "ascend/npu/state.h"

namespace ascend::npu::smi {

struct Visible {
  std::vector<int> chips;  // phy ids whose /dev/davinci<phy> is the chip's node
  std::vector<int> vnpus;  // vNPU ids visible as /dev/davinci<id> or /dev/vdavinci<id>
};
// Nodes must be character devices with the major/minor the state records. A host loaded without device
// nodes (HostState::device_nodes false: an unprivileged test or demo) shows every chip.
Visible visible_devices(const HostState& s, const std::string& root);

struct Output {
  int exit_code = 0;
  std::string out;
  std::string err;
};
Output run(const std::vector<std::string>& args, const std::string& root);

}  // namespace ascend::npu::smi
