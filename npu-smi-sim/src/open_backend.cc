// The one backend factory (backend.h): the only place outside npu-smi-sim/ that an emulator is made.
#include "ascend/npu/backend.h"
#include "ascend/npu/emulator.h"

namespace ascend::npu {

Result<std::unique_ptr<DeviceQuery>> open_device_query(const BackendOptions& opts,
                                                       const DcmiOpener& open_dcmi, Backend* chosen) {
  auto emulator = [&]() -> Result<std::unique_ptr<DeviceQuery>> {
    if (chosen != nullptr) *chosen = Backend::kEmulator;
    return std::unique_ptr<DeviceQuery>(std::make_unique<Emulator>(opts.root));
  };
  auto dcmi = [&]() -> Result<std::unique_ptr<DeviceQuery>> {
    if (chosen != nullptr) *chosen = Backend::kDcmi;
    return open_dcmi(opts);
  };
  switch (opts.backend) {
    case Backend::kEmulator:
      return emulator();
    case Backend::kDcmi:
      return dcmi();
    case Backend::kAuto: {
      if (find_dcmi_library(opts).empty()) return emulator();
      auto dq = dcmi();
      // The loader's search path is only a guess: without a library there, the emulator answers.
      if (!dq && dq.error().code() == ENOENT && dcmi_library_guessed(opts)) return emulator();
      return dq;
    }
  }
  return Error::invalid("unknown backend");
}

}  // namespace ascend::npu
