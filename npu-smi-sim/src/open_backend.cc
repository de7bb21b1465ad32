#include "ascend/npu/backend.h"
#include "ascend/npu/emulator.h"

namespace ascend::npu {

Result<std::unique_ptr<DeviceQuery>> open_device_query(const BackendOptions& opts) {
  switch (opts.backend) {
    case Backend::kEmulator:
      return std::unique_ptr<DeviceQuery>(std::make_unique<Emulator>(opts.root));
    case Backend::kDcmi:
      return open_dcmi(opts);
    case Backend::kAuto: {
      const std::string lib = find_dcmi_library(opts);
      if (!lib.empty()) {
        auto dq = open_dcmi(opts);
        // The loader's search path is only a guess: without a library there, the emulator answers.
        if (dq || !opts.dcmi_library.empty() || lib != "libdcmi.so" || dq.error().code() != ENOENT) return dq;
      }
      return std::unique_ptr<DeviceQuery>(std::make_unique<Emulator>(opts.root));
    }
  }
  return Error::invalid("unknown backend");
}

}  // namespace ascend::npu
