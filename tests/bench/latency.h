// The latency figures the bench programs print: a sample's p50, p99 and max (in whatever unit the samples
// are), and the milliseconds since a steady-clock time point. Header-only; pure.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

namespace ascend::bench {

struct Stats {
  double p50 = 0, p99 = 0, max = 0;
};

// The nearest-rank percentiles of `v`; all zero when it is empty.
inline Stats stats(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
  };
  return {at(0.5), at(0.99), v.back()};
}

inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace ascend::bench
