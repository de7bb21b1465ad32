// Opening the device seam: which backend answers DeviceQuery (device_query.h), from configuration.
//   emulator  the emulated host's state file under the host root (Emulator, emulator.h)
//   dcmi      the driver's libdcmi.so (DcmiDeviceQuery below): what every vendor tool reads on an Atlas host,
//             and what the emulated host also installs (npu-sim load), so that both paths are tested
//   auto      dcmi when a libdcmi.so is found (the configured path, the driver's paths under the host root,
//             then the loader's search path), else the emulator
// The shim and the hook are linked statically and cannot dlopen: they reach DCMI through node_query.h.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/npu/device_query.h"

namespace ascend::npu {

enum class Backend { kAuto, kEmulator, kDcmi };
std::string_view to_string(Backend b);              // "auto", "emulator", "dcmi"
Result<Backend> parse_backend(std::string_view s);  // EINVAL naming the choices

struct BackendOptions {
  Backend backend = Backend::kAuto;
  std::string root = "/";    // the host root (an emulated host's folder; "/" on an Atlas host)
  std::string dcmi_library;  // libdcmi.so to load; empty: dcmi_library_candidates(root)
  std::chrono::milliseconds poll_interval{200};  // DCMI has no notification: subscribe polls this often
  // Where the DCMI backend records who holds a dynamic vNPU (DCMI keeps no owner); empty:
  // <root>/run/ascend/dcmi-vnpu-owners.json (a tmpfs on a real host: vNPUs do not outlive a reboot either).
  std::string owner_file;
};

// The driver's libdcmi.so paths under `root`, in the order they are tried: /usr/local/dcmi/libdcmi.so, then
// /usr/local/Ascend/driver/lib64/driver/libdcmi.so.
std::vector<std::string> dcmi_library_candidates(const std::string& root);

// The libdcmi.so that `opts` would load (the configured one, else the first candidate that exists, else
// the bare name for the loader's search path); empty when `auto` should fall back to the emulator.
std::string find_dcmi_library(const BackendOptions& opts);

// ---- in ascend_npu_backend (dynamically linked programs only: it uses dlopen) ----

// Opens the backend `opts` asks for. Errors are one line naming the backend, the library or the root.
Result<std::unique_ptr<DeviceQuery>> open_device_query(const BackendOptions& opts);

// The DCMI backend itself (dcmi_query.cc): dlopens `opts.dcmi_library` (or find_dcmi_library), resolves
// every function it uses with dlsym (a missing one is an error naming it), calls dcmi_init. Thread-safe.
Result<std::unique_ptr<DeviceQuery>> open_dcmi(const BackendOptions& opts);

}  // namespace ascend::npu
