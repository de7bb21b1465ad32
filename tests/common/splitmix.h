// splitmix64: a fixed, portable random stream for generated test data and benchmark inputs, so that the same
// seed gives the same fixtures on every machine and every run.
#pragma once

#include <cstdint>

namespace ascend::testing {

struct SplitMix64 {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
  double unit() { return static_cast<double>(next() >> 11) / 9007199254740992.0; }
  double range(double lo, double hi) { return lo + (hi - lo) * unit(); }
};

}  // namespace ascend::testing
