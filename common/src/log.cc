#include "ascend/common/log.h"

#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include "ascend/common/fs.h"
#include "ascend/common/guarded.h"

namespace ascend {

namespace {

// run_guarded's lines (guarded.h), through the default logger.
void guarded_to_spdlog(std::string_view line, bool repeat) noexcept {
  spdlog::log(repeat ? spdlog::level::debug : spdlog::level::err, "{}", line);
}

}  // namespace

Status setup_logging(const LogOptions& opts) {
  auto level = spdlog::level::from_str(opts.level);
  if (level == spdlog::level::off && opts.level != "off") {
    return Error::invalid("unknown log level '" + opts.level +
                          "' (use trace, debug, info, warn, error or off)");
  }
  std::vector<spdlog::sink_ptr> sinks;
  std::string warning;
  if (!opts.file.empty()) {
    auto slash = opts.file.rfind('/');
    // Folders made with our mode (spdlog would make them 0755); one probe when they are there already.
    if (slash != std::string::npos && slash > 0) {
      std::string dir = opts.file.substr(0, slash);
      if (::access(dir.c_str(), F_OK) != 0) (void)make_dirs(dir, 0750);
    }
    try {
      sinks.push_back(
          std::make_shared<spdlog::sinks::rotating_file_sink_mt>(opts.file, opts.max_bytes, opts.max_files));
    } catch (const spdlog::spdlog_ex& e) {
      warning = std::string("cannot open log file, logging to stderr only: ") + e.what();
    }
  }
  if (opts.also_stderr || sinks.empty()) {
    auto err = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    if (!sinks.empty()) err->set_level(spdlog::level::warn);
    sinks.push_back(err);
  }
  auto logger = std::make_shared<spdlog::logger>("ascend", sinks.begin(), sinks.end());
  logger->set_level(level);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
  set_guarded_log(&guarded_to_spdlog);
  if (!warning.empty()) spdlog::warn("{}", warning);
  return {};
}

}  // namespace ascend
