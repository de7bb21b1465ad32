// The emulated host the device-plugin benches serve from: an Atlas 800T A2 loaded into the emulator's root,
// with real device nodes (fixed majors) when run as root, and this build's npu-smi. The program defines
// ASCEND_BIN_DIR (tests/CMakeLists.txt).
#pragma once

#include <unistd.h>

#include <string>

#include "ascend/npu/emulator.h"
#include "ascend/npu/profiles.h"

namespace ascend::bench {

inline Status load_bench_host(npu::Emulator& emu) {
  npu::LoadOptions o;
  o.make_nodes = ::geteuid() == 0;
  o.majors = npu::DeviceMajors{240, 241, 242, 243, 244};
  o.npu_smi_binary = std::string(ASCEND_BIN_DIR) + "/npu-smi";
  return emu.load(*npu::builtin_profile("atlas800t-a2"), o);
}

}  // namespace ascend::bench
