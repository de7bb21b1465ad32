#include "ascend/npu/backend.h"

#include <unistd.h>

#include <cstdlib>

namespace ascend::npu {

std::string_view to_string(Backend b) {
  switch (b) {
    case Backend::kAuto:
      return "auto";
    case Backend::kEmulator:
      return "emulator";
    case Backend::kDcmi:
      return "dcmi";
  }
  return "auto";
}

Result<Backend> parse_backend(std::string_view s) {
  for (Backend b : {Backend::kAuto, Backend::kEmulator, Backend::kDcmi}) {
    if (s == to_string(b)) return b;
  }
  return Error::invalid("backend '" + std::string(s) + "' (use auto, emulator or dcmi)");
}

std::string resolve_root(const std::optional<std::string>& flag) {
  if (flag && !flag->empty()) return *flag;
  const char* env = std::getenv("ASCEND_SIM_ROOT");
  if (env != nullptr && *env != '\0') return env;
  return "/";
}

std::vector<std::string> dcmi_library_candidates(const std::string& root) {
  const std::string prefix = root == "/" ? "" : root;
  return {prefix + "/usr/local/dcmi/libdcmi.so", prefix + "/usr/local/Ascend/driver/lib64/driver/libdcmi.so"};
}

std::string find_dcmi_library(const BackendOptions& opts) {
  if (!opts.dcmi_library.empty()) return opts.dcmi_library;
  for (const std::string& c : dcmi_library_candidates(opts.root)) {
    if (::access(c.c_str(), R_OK) == 0) return c;
  }
  // On a real host the loader's path may hold it (ldconfig); an emulated root never relies on that.
  return opts.root == "/" ? "libdcmi.so" : "";
}

bool dcmi_library_guessed(const BackendOptions& opts) {
  return opts.dcmi_library.empty() && find_dcmi_library(opts) == "libdcmi.so";
}

}  // namespace ascend::npu
