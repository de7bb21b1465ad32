// The plugin's flags, defined once. Each is a CLI11 option; `--config FILE` reads a YAML file whose keys are
// the same flags without the leading dashes (`allocate-mode: device-spec`), through CLI11's config-file
// support with a YAML reader, so the file and the command line share one table, one set of checks and one
// set of messages. Flags on the command line win over the file.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/plugin/config.h"

namespace ascend::plugin {

class Options {
 public:
  // Adds every flag and --config to `app` (which must outlive this object).
  explicit Options(CLI::App& app);
  Options(const Options&) = delete;
  Options& operator=(const Options&) = delete;

  // The configuration after app.parse() succeeded: the defaults, then the file's keys, then the flags.
  Config config() const;

 private:
  Config cfg_;
  std::string allocate_mode_ = "runtime";
  std::string vnpu_ = "off";
  long health_ms_;
  long gc_s_;
  long telegraf_s_;
};

// Parses `args` (without the program name) as the plugin's command line: the Config, or the one line that
// names what is wrong (an unknown flag or file key, a bad value, an unreadable or malformed file). --help is
// an error here (EINVAL, the help text); the binary prints it instead.
Result<Config> parse_options(const std::vector<std::string>& args);

}  // namespace ascend::plugin
