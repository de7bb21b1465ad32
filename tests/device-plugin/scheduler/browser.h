// Debian's chromium, headless, for the dashboard's tests: the command line that loads a page with a profile
// of its own (`what`: --dump-dom URL, or --screenshot=FILE ... URL), and a count of a pattern's matches in
// the DOM it hands back.
#pragma once

#include <iterator>
#include <regex>
#include <string>
#include <vector>

namespace ascend::testing {

inline std::vector<std::string> chromium(const std::string& profile_dir,
                                         const std::vector<std::string>& what) {
  std::vector<std::string> argv = {"chromium",
                                   "--headless",
                                   "--no-sandbox",
                                   "--disable-gpu",
                                   "--disable-quic",
                                   "--no-first-run",
                                   "--disable-background-networking",
                                   "--disable-component-update",
                                   "--disable-sync",
                                   "--user-data-dir=" + profile_dir,
                                   "--virtual-time-budget=5000"};
  argv.insert(argv.end(), what.begin(), what.end());
  return argv;
}

inline int count_matches(const std::string& text, const std::string& re) {
  std::regex r(re);
  return static_cast<int>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), r), std::sregex_iterator()));
}

}  // namespace ascend::testing
