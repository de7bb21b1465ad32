// What the three mains share: turning the config's log settings into a logger, and the one line a failure
// prints. Not thread-safe (call from main's thread).
#pragma once

#include <string>
#include <string_view>

#include "ascend/common/error.h"
#include "ascend/hook/config.h"

namespace ascend::hook {

// Logs to the config's rotating log file. When that file cannot be written (not root, read-only /var/log)
// logging is off rather than noisy: the binaries print their one failure line themselves. Runs once; later
// calls do nothing, so the shim can call it only once it has something to log (a request, a failure).
void setup_binary_logging(const Config& config);

// Prints "<program>: <message>" on stderr and, once logging is set up, logs it; returns the exit code for
// failures (1).
// `text` with control characters (a newline in a container's variable, say) written as \xNN: an error is
// always one line, in a terminal and in a log.
std::string one_line(std::string_view text);

int report_failure(const std::string& program, const Error& e);

// Flushes the log, if logging is set up (before an exec).
void flush_logs();

}  // namespace ascend::hook
