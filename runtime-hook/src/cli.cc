#include "ascend/hook/cli.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "ascend/common/fs.h"
#include "ascend/common/log.h"

namespace ascend::hook {

namespace {
bool g_logging = false;  // setup_binary_logging ran
}  // namespace

void setup_binary_logging(const Config& config) {
  if (g_logging) return;
  g_logging = true;
  LogOptions opts;
  opts.level = config.log_level;
  opts.also_stderr = false;
  bool writable = false;
  if (!config.log_file.empty()) {
    constexpr int kFlags = O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC;
    int fd = ::open(config.log_file.c_str(), kFlags, 0640);
    auto slash = config.log_file.rfind('/');
    if (fd < 0 && errno == ENOENT && slash != std::string::npos && slash > 0) {
      // Its folder is not there yet: only then make it (a start that logs pays one open when it is).
      (void)make_dirs(config.log_file.substr(0, slash), 0750);
      fd = ::open(config.log_file.c_str(), kFlags, 0640);
    }
    if (fd >= 0) {
      writable = true;
      ::close(fd);
    }
  }
  if (writable) {
    opts.file = config.log_file;
  } else {
    opts.level = "off";
  }
  if (!setup_logging(opts)) {
    opts.level = "info";
    (void)setup_logging(opts);
  }
}

std::string one_line(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", c);
      out += esc;
    } else {
      out += ch;
    }
  }
  return out;
}

int report_failure(const std::string& program, const Error& e) {
  std::fprintf(stderr, "%s: %s\n", program.c_str(), one_line(e.message()).c_str());
  if (g_logging) spdlog::error("{}", e.message());  // never spdlog's default logger: it writes to stdout
  flush_logs();
  return 1;
}

void flush_logs() {
  if (g_logging) spdlog::default_logger()->flush();
}

}  // namespace ascend::hook
