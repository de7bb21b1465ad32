// Node-level choice: one table per family rule (docs/scheduler.md, "Node-level choice"), plus properties over
// random free sets.
#include "ascend/topology/choose.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <random>

#include "ascend/npu/profiles.h"

namespace ascend::topology {
namespace {

npu::HostState profile(const char* name) {
  auto h = npu::builtin_profile(name);
  EXPECT_TRUE(h.ok()) << name;
  return *h;
}

std::vector<int> all_but(const npu::HostState& h, std::vector<int> taken) {
  std::vector<int> out;
  for (const auto& c : h.chips) {
    if (std::find(taken.begin(), taken.end(), c.phy_id) == taken.end()) out.push_back(c.phy_id);
  }
  return out;
}

struct Case {
  const char* what;
  std::vector<int> free;
  std::vector<int> must;
  int size;
  std::vector<int> want;  // empty: an error with `code`
  int code = 0;
};

void run(const npu::HostState& h, const std::vector<Case>& cases) {
  for (const auto& c : cases) {
    auto r = choose(h, c.free, c.must, c.size);
    if (c.want.empty()) {
      ASSERT_FALSE(r.ok()) << c.what;
      EXPECT_EQ(r.error().code(), c.code) << c.what << ": " << r.error().message();
    } else {
      ASSERT_TRUE(r.ok()) << c.what << ": " << r.error().message();
      EXPECT_EQ(*r, c.want) << c.what;
    }
  }
}

// Ascend 910 A1: rings {0-3} {4-7}. Volcano's table: 1 chip -> a ring with 1 free, then 3, 2, 4;
// 2 chips -> 2, then 4, then 3; 4 chips -> a whole free ring; 8 -> the whole node.
TEST(ChooseA1, RingRules) {
  auto h = profile("atlas800-9000");
  run(h, {
             // one chip
             {"1: ring with 1 free beats 3", {3, 4, 5, 6}, {}, 1, {3}},
             {"1: ring with 1 free beats 2 (right ring)", {0, 1, 7}, {}, 1, {7}},
             {"1: ring with 1 free beats 4", {0, 1, 2, 3, 6}, {}, 1, {6}},
             {"1: 3 free beats 2", {0, 1, 5, 6, 7}, {}, 1, {5}},
             {"1: 3 free beats 4", {0, 1, 2, 3, 4, 5, 6}, {}, 1, {4}},
             {"1: 2 free beats 4", {0, 1, 2, 3, 6, 7}, {}, 1, {6}},
             {"1: only whole rings: the left one", all_but(h, {}), {}, 1, {0}},
             {"1: equal rings: left first", {1, 2, 5, 6}, {}, 1, {1}},
             // two chips
             {"2: ring with 2 free beats 4", {0, 1, 2, 3, 5, 7}, {}, 2, {5, 7}},
             {"2: ring with 2 free beats 3", {0, 1, 2, 6, 7}, {}, 2, {6, 7}},
             {"2: 4 free beats 3", {0, 1, 2, 4, 5, 6, 7}, {}, 2, {4, 5}},
             {"2: 3 free when nothing better", {1, 2, 3, 4}, {}, 2, {1, 2}},
             {"2: never across rings", {3, 4}, {}, 2, {}, ENOSPC},
             // four and eight
             {"4: the free ring", {0, 1, 2, 4, 5, 6, 7}, {}, 4, {4, 5, 6, 7}},
             {"4: both free: left", all_but(h, {}), {}, 4, {0, 1, 2, 3}},
             {"4: no whole ring", {0, 1, 2, 4, 5, 6}, {}, 4, {}, ENOSPC},
             {"8: whole node", all_but(h, {}), {}, 8, {0, 1, 2, 3, 4, 5, 6, 7}},
             {"8: one busy", all_but(h, {5}), {}, 8, {}, ENOSPC},
             // sizes the 910 does not take
             {"3 chips", all_but(h, {}), {}, 3, {}, EINVAL},
             {"5 chips", all_but(h, {}), {}, 5, {}, EINVAL},
             {"6 chips", all_but(h, {}), {}, 6, {}, EINVAL},
             {"7 chips", all_but(h, {}), {}, 7, {}, EINVAL},
             {"0 chips", all_but(h, {}), {}, 0, {}, EINVAL},
             // must-include
             {"must picks its ring", {0, 1, 2, 4, 5}, {4}, 2, {4, 5}},
             {"must across rings", all_but(h, {}), {1, 5}, 2, {}, ENOSPC},
             {"must not free", {0, 1}, {2}, 1, {}, EINVAL},
         });
}

// 910B: full mesh; keep the largest aligned free blocks ({0-7}, {0-3}/{4-7}, pairs) whole.
TEST(Choose910B, KeepsLargestBlocksWhole) {
  auto h = profile("atlas800t-a2");
  run(h, {
             {"1 from a fully free node: chip 0", all_but(h, {}), {}, 1, {0}},
             {"1: the lone chip of a broken pair", all_but(h, {4}), {}, 1, {5}},
             {"2: the broken half, not the whole one", {0, 1, 2, 3, 5, 6, 7}, {}, 2, {6, 7}},
             {"2: fragments first", {0, 1, 2, 3, 5, 6}, {}, 2, {5, 6}},
             {"3: leave the free half whole", {0, 1, 2, 3, 4, 5, 7}, {}, 3, {4, 5, 7}},
             {"4: a whole half when one exists", all_but(h, {1}), {}, 4, {4, 5, 6, 7}},
             {"5: any size", all_but(h, {}), {}, 5, {0, 1, 2, 3, 4}},
             {"7: any size", all_but(h, {}), {}, 7, {0, 1, 2, 3, 4, 5, 6}},
             {"6 with 6 free", {0, 1, 2, 3, 4, 5}, {}, 6, {0, 1, 2, 3, 4, 5}},
             {"must chip kept", all_but(h, {}), {6}, 2, {6, 7}},
             {"not enough free", {0, 1, 2}, {}, 4, {}, ENOSPC},
             {"9 chips", all_but(h, {}), {}, 9, {}, EINVAL},
             {"unknown chip", {0, 1, 99}, {}, 1, {}, EINVAL},
         });
}

// A3: 8 cards x 2 dies (phy 2k, 2k+1 on card k). Keep the two dies of a card together.
TEST(ChooseA3, KeepsDiesOfACardTogether) {
  auto h = profile("atlas800t-a3");
  run(h, {
             {"2: one whole card", all_but(h, {}), {}, 2, {0, 1}},
             {"2: a whole card, not two lone dies", all_but(h, {0, 3}), {}, 2, {4, 5}},
             {"1: a lone die first", all_but(h, {0}), {}, 1, {1}},
             {"1: no lone die: split the card whose block is already broken", all_but(h, {0, 1}), {}, 1, {2}},
             {"3: a lone die and a whole card", all_but(h, {2}), {}, 3, {0, 1, 3}},
             {"4: two whole cards", all_but(h, {}), {}, 4, {0, 1, 2, 3}},
             {"4: lone dies only when whole cards run out", {0, 3, 5, 8, 9}, {}, 4, {0, 3, 8, 9}},
             {"must die brings its sibling", all_but(h, {}), {7}, 2, {6, 7}},
             {"16: the whole node",
              all_but(h, {}),
              {},
              16,
              {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
         });
}

// 310P (Atlas 300I Duo): fewest cards, lowest ids.
TEST(Choose310P, FewestCardsLowestIds) {
  auto h = profile("atlas300i-duo");
  run(h, {
             {"1: lowest id", all_but(h, {}), {}, 1, {0}},
             {"2: one card", all_but(h, {0}), {}, 2, {2, 3}},
             {"3: two cards, lowest", all_but(h, {}), {}, 3, {0, 1, 2}},
             {"2 with lone chips only", {1, 3, 5}, {}, 2, {1, 3}},
             {"must card first", all_but(h, {}), {5}, 2, {4, 5}},
         });
}

// Properties over random free sets on every profile: the answer has `size` distinct free chips in ascending
// order and contains must_include; an error is only ever EINVAL or ENOSPC.
TEST(Choose, PropertiesOnRandomFreeSets) {
  std::mt19937 rng(7);
  for (const auto& name : npu::builtin_profile_names()) {
    auto h = profile(name.c_str());
    int n = static_cast<int>(h.chips.size());
    for (int iter = 0; iter < 400; ++iter) {
      std::vector<int> free;
      for (const auto& c : h.chips) {
        if (rng() % 3 != 0) free.push_back(c.phy_id);
      }
      std::vector<int> must;
      if (!free.empty() && rng() % 4 == 0) must.push_back(free[rng() % free.size()]);
      int size = 1 + static_cast<int>(rng() % static_cast<unsigned>(n));
      auto r = choose(h, free, must, size);
      if (!r.ok()) {
        EXPECT_TRUE(r.error().code() == EINVAL || r.error().code() == ENOSPC) << r.error().message();
        if (h.family == npu::Family::k910B) {
          EXPECT_LT(static_cast<int>(free.size()), size) << name << ": 910B takes any size that is free";
        }
        continue;
      }
      ASSERT_EQ(static_cast<int>(r->size()), size) << name;
      EXPECT_TRUE(std::is_sorted(r->begin(), r->end()));
      EXPECT_EQ(std::adjacent_find(r->begin(), r->end()), r->end()) << "a chip twice";
      for (int id : *r)
        EXPECT_NE(std::find(free.begin(), free.end(), id), free.end()) << "chip " << id << " not free";
      for (int id : must)
        EXPECT_NE(std::find(r->begin(), r->end(), id), r->end()) << "must chip " << id << " missing";
      if (h.family == npu::Family::k910 && size <= 4) {
        int ring = (*r)[0] / 4;
        for (int id : *r) EXPECT_EQ(id / 4, ring) << "Ascend 910: one HCCS ring";
      }
    }
  }
}

}  // namespace
}  // namespace ascend::topology
