// splitmix64 (Steele, Lea & Flood 2014): a fixed, portable random stream, so that the same seed gives the
// same numbers on every machine and every run (simulate --faults; generated test data and benchmark inputs).
#pragma once

#include <cmath>
#include <cstdint>

namespace ascend {

struct SplitMix64 {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
  // Uniform in [0, 1) from 53 bits.
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double range(double lo, double hi) { return lo + (hi - lo) * unit(); }
  // Exponential with the given mean: -mean ln(1 - U).
  double exponential(double mean) { return -mean * std::log1p(-unit()); }
};

}  // namespace ascend
