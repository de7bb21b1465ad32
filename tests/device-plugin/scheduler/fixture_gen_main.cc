// scheduler_fixture_gen DIR: writes the scheduler fixtures (see fixture_gen.h) under DIR, normally
// tests/fixtures/scheduler.
#include <cstdio>
#include <filesystem>
#include <string_view>

#include "ascend/common/fs.h"
#include "fixture_gen.h"

namespace {
constexpr const char* kUsage =
    "usage: scheduler_fixture_gen DIR\n"
    "Writes the generated scheduler fixtures (cluster states, jobs, the suite) under DIR, normally\n"
    "tests/fixtures/scheduler. Exit codes: 0 written, 1 a file could not be written, 2 bad usage.\n";
}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && (std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc != 2 || argv[1][0] == '-') {
    std::fputs(kUsage, stderr);
    return 2;
  }
  for (const auto& f : ascend::scheduler::testing::generate_fixtures()) {
    std::filesystem::path p = std::filesystem::path(argv[1]) / f.path;
    std::filesystem::create_directories(p.parent_path());
    if (auto s = ascend::atomic_replace(p.string(), f.text); !s.ok()) {
      std::fprintf(stderr, "scheduler_fixture_gen: %s\n", s.error().message().c_str());
      return 1;
    }
  }
  return 0;
}
