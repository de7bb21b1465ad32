// Opening the device seam: which backend answers DeviceQuery (device_query.h), from configuration.
//   emulator  the emulated host's state file under the host root (the emulator, below the seam)
//   dcmi      the driver's libdcmi.so: what every vendor tool reads on an Atlas host, and what the emulated
//             host also installs (npu-sim load), so that both paths are tested
//   auto      dcmi when a libdcmi.so is found (the configured path, the driver's paths under the host root,
//             then the loader's search path), else the emulator
// One factory (open_device_query) applies that rule for every program. How it reaches DCMI is the program's:
// a dynamically linked one dlopens libdcmi.so (open_dcmi, ascend_npu_backend); the shim, the hook and
// ascend-ctk are linked statically and cannot dlopen, so they pass the client of the DCMI helper
// (node_query.h: helper_dcmi_opener).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
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

// The host root: `flag` when given, else $ASCEND_SIM_ROOT, else "/".
std::string resolve_root(const std::optional<std::string>& flag);

// The driver's libdcmi.so paths under `root`, in the order they are tried: /usr/local/dcmi/libdcmi.so, then
// /usr/local/Ascend/driver/lib64/driver/libdcmi.so.
std::vector<std::string> dcmi_library_candidates(const std::string& root);

// The libdcmi.so that `opts` would load (the configured one, else the first candidate that exists, else
// the bare name for the loader's search path); empty when `auto` should fall back to the emulator.
std::string find_dcmi_library(const BackendOptions& opts);

// Whether find_dcmi_library(opts) names no file but only guesses at the loader's search path (host root
// "/", no library configured, none of the candidates there): `auto` then takes DCMI only if it loads.
bool dcmi_library_guessed(const BackendOptions& opts);

// How a program reaches DCMI (open_dcmi, or the helper's client). Errors with ENOENT mean "no libdcmi.so".
using DcmiOpener = std::function<Result<std::unique_ptr<DeviceQuery>>(const BackendOptions&)>;

// ---- in ascend_npu_factory (every program) ----

// The one backend factory: the emulator under opts.root for `emulator`; `open_dcmi` for `dcmi`; for `auto`,
// `open_dcmi` when find_dcmi_library names a library, except that a guess on the loader's search path
// (dcmi_library_guessed) that `open_dcmi` cannot load (ENOENT) falls back to the emulator. `chosen`, when
// given, receives the backend that answers (emulator or dcmi). Errors are one line naming the backend, the
// library or the root.
Result<std::unique_ptr<DeviceQuery>> open_device_query(const BackendOptions& opts,
                                                       const DcmiOpener& open_dcmi,
                                                       Backend* chosen = nullptr);

// ---- in ascend_npu_backend (dynamically linked programs only: it uses dlopen) ----

// open_device_query with DCMI through dlopen (open_dcmi).
Result<std::unique_ptr<DeviceQuery>> open_device_query(const BackendOptions& opts);

// The DCMI backend itself (dcmi_query.cc): dlopens `opts.dcmi_library` (or find_dcmi_library), resolves
// every function it uses with dlsym (a missing one is an error naming it), calls dcmi_init. Thread-safe.
Result<std::unique_ptr<DeviceQuery>> open_dcmi(const BackendOptions& opts);

}  // namespace ascend::npu
