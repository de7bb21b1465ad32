// Generates the scheduler fixtures under tests/fixtures/scheduler/: a suite of fragmented cluster states and
// jobs (suite/), a 128-node cluster (pod-a.yaml), the example job (llama-70b.yaml) and a day-long
// job trace (trace.yaml). Deterministic: the same files every time. `scheduler_fixture_gen DIR` writes them;
// a test checks that the committed files are what the generator produces.
#pragma once

#include <string>
#include <vector>

namespace ascend::scheduler::testing {

struct FixtureFile {
  std::string path;  // relative to tests/fixtures/scheduler/
  std::string text;
};

std::vector<FixtureFile> generate_fixtures();

}  // namespace ascend::scheduler::testing
