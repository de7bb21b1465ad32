// The bench programs' statistics (latency.h). Expected values come from the definitions (the median of a
// hand-sorted list), from samples whose every draw has one median, and from the bootstrap's promise itself:
// over many samples of a known distribution, a 95 % interval holds the true ratio about 95 % of the time.
#include "latency.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

namespace ascend::bench {
namespace {

TEST(Median, OddEvenAndEmpty) {
  EXPECT_EQ(median({}), 0);
  EXPECT_EQ(median({7}), 7);
  EXPECT_EQ(median({9, 1, 5}), 5);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);           // 1 2 | 3 4
  EXPECT_EQ(median({10, 10, 1, 1, 1, 30}), 5.5);  // 1 1 1 | 10 10 30
}

TEST(MedianRatioInterval, ConstantSamplesGiveOneRatio) {
  const std::vector<double> a(50, 3.0), b(80, 2.0);
  const Interval in = median_ratio_interval(a, b);
  EXPECT_DOUBLE_EQ(in.lo, 1.5);
  EXPECT_DOUBLE_EQ(in.hi, 1.5);
}

TEST(MedianRatioInterval, EmptyOrZeroGivesNothing) {
  const std::vector<double> some = {1, 2, 3};
  const Interval none = median_ratio_interval({}, some);
  EXPECT_EQ(none.lo, 0);
  EXPECT_EQ(none.hi, 0);
  const Interval zero = median_ratio_interval(some, std::vector<double>(5, 0.0));
  EXPECT_EQ(zero.lo, 0);
  EXPECT_EQ(zero.hi, 0);
}

TEST(MedianRatioInterval, SameSeedSameInterval) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> d(50, 5);
  std::vector<double> a(100), b(100);
  for (auto& x : a) x = d(rng);
  for (auto& x : b) x = d(rng);
  const Interval one = median_ratio_interval(a, b, 500, 0.95, 3);
  const Interval two = median_ratio_interval(a, b, 500, 0.95, 3);
  EXPECT_EQ(one.lo, two.lo);
  EXPECT_EQ(one.hi, two.hi);
  EXPECT_LT(one.lo, one.hi);
}

// Samples of 200 from two normal distributions whose medians are 52.5 and 50 (true ratio 1.05): the 95 %
// interval must hold 1.05 in about 95 of 100 trials (a binomial(100, 0.95) is below 87 or above 100 with a
// probability under 0.1 %; a percentile bootstrap of the median is a little conservative or a little liberal
// at this size, never far off), it must narrow as the samples grow, and a wrong ratio must fall outside it
// most of the time.
TEST(MedianRatioInterval, HoldsTheTrueRatioAboutAsOftenAsItSays) {
  std::mt19937_64 rng(2026);
  std::normal_distribution<double> slow(52.5, 4), fast(50, 4);
  int held = 0, wrong_held = 0;
  double width_small = 0, width_large = 0;
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<double> a(200), b(200);
    for (auto& x : a) x = slow(rng);
    for (auto& x : b) x = fast(rng);
    const Interval in = median_ratio_interval(a, b, 1000, 0.95, static_cast<std::uint64_t>(trial) + 1);
    held += in.lo <= 1.05 && 1.05 <= in.hi ? 1 : 0;
    wrong_held += in.lo <= 1.0 && 1.0 <= in.hi ? 1 : 0;
    width_large += in.hi - in.lo;
    const std::vector<double> a_small(a.begin(), a.begin() + 20), b_small(b.begin(), b.begin() + 20);
    const Interval small = median_ratio_interval(a_small, b_small, 1000, 0.95, 1);
    width_small += small.hi - small.lo;
  }
  std::printf("held 1.05 in %d of 100, 1.0 in %d; mean width %.4f (n = 20) and %.4f (n = 200)\n", held,
              wrong_held, width_small / 100, width_large / 100);
  EXPECT_GE(held, 87);
  EXPECT_LE(wrong_held, 10);  // 1.0 is about 5 standard errors of the ratio away from 1.05 at n = 200
  EXPECT_GT(width_small, 2 * width_large);
}

}  // namespace
}  // namespace ascend::bench
