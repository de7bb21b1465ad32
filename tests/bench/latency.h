// The latency figures the bench programs print: a sample's p50, p99 and max (in whatever unit the samples
// are), the milliseconds since a steady-clock time point, and how sure a ratio of two medians is.
// Header-only; pure (the bootstrap's draws come from the seed it is given).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <random>
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

// The median (the mean of the middle two for an even count); 0 for no samples.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  if (v.size() % 2 == 1) return v[mid];
  const double upper = v[mid];
  return (*std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid)) + upper) / 2;
}

struct Interval {
  double lo = 0, hi = 0;
};

// A percentile bootstrap interval for median(a) / median(b), two samples taken apart (e.g. two variants'
// runs interleaved at random): `resamples` times, each sample is drawn anew with replacement and the ratio of
// the two medians kept; the interval holds the central `level` of those ratios. {0, 0} when a sample is
// empty or b's median is 0 in a draw. The same seed gives the same interval.
inline Interval median_ratio_interval(const std::vector<double>& a, const std::vector<double>& b,
                                      int resamples = 2000, double level = 0.95, std::uint64_t seed = 1) {
  if (a.empty() || b.empty() || resamples <= 0) return {};
  std::mt19937_64 rng(seed);
  std::vector<double> ratios, draw_a(a.size()), draw_b(b.size());
  ratios.reserve(static_cast<std::size_t>(resamples));
  std::uniform_int_distribution<std::size_t> pick_a(0, a.size() - 1), pick_b(0, b.size() - 1);
  for (int r = 0; r < resamples; ++r) {
    for (auto& x : draw_a) x = a[pick_a(rng)];
    for (auto& x : draw_b) x = b[pick_b(rng)];
    const double mb = median(draw_b);
    if (mb == 0) return {};
    ratios.push_back(median(draw_a) / mb);
  }
  std::sort(ratios.begin(), ratios.end());
  const double tail = (1 - level) / 2 * static_cast<double>(ratios.size());
  const auto lo = static_cast<std::size_t>(tail);
  const std::size_t hi = ratios.size() - 1 - lo;
  return {ratios[lo], ratios[hi]};
}

}  // namespace ascend::bench
