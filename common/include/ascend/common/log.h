// Logging setup (spdlog). Every binary calls one of these once from main; libraries log through spdlog's
// default logger. Thread-safe after setup.
#pragma once

#include <cstddef>
#include <string>

#include "ascend/common/error.h"

namespace ascend {

struct LogOptions {
  std::string level = "info";  // trace|debug|info|warn|error|off
  std::string file;            // empty: stderr only
  std::size_t max_bytes = 10U << 20;
  std::size_t max_files = 3;
  bool also_stderr = true;  // warnings and above also go to stderr
};

// Installs the default logger. A log file that cannot be opened degrades to stderr with a warning.
Status setup_logging(const LogOptions& opts);

}  // namespace ascend
