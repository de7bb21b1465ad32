// scheduler_fixture_gen DIR: writes the scheduler fixtures (see fixture_gen.h) under DIR, normally
// tests/fixtures/scheduler.
#include <cstdio>
#include <filesystem>

#include "ascend/common/fs.h"
#include "fixture_gen.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: scheduler_fixture_gen DIR (normally tests/fixtures/scheduler)\n");
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
