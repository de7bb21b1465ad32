// npu-smi: prints the emulated host's NPUs in the real tool's formats. See `npu-smi -h`.
#include <cstdio>
#include <string>
#include <vector>

#include "ascend/common/main_guard.h"
#include "ascend/npu/emulator.h"
#include "ascend/npu/smi.h"

static int run_main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto out = ascend::npu::smi::run(args, ascend::npu::resolve_root(std::nullopt));
  std::fwrite(out.out.data(), 1, out.out.size(), stdout);
  std::fwrite(out.err.data(), 1, out.err.size(), stderr);
  return out.exit_code;
}

int main(int argc, char** argv) {
  return ascend::guarded_main(
      "npu-smi", [&] { return run_main(argc, argv); }, 211);
}
