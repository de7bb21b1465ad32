#include "ascend/topology/choose.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>

#include "internal.h"

namespace ascend::topology {
namespace detail {
namespace {

MaskChoice none(int code, std::string why) {
  return {0, code, std::move(why)};
}

int bits(std::uint64_t m) {
  return std::popcount(m);
}

// ---- full mesh: keep the largest aligned free blocks whole -------------------------------------------

// Aligned power-of-two blocks of `n` positions, largest first (sizes >= 2).
struct Blocks {
  std::vector<std::vector<std::uint64_t>> by_size;  // [0]: largest size
};

Blocks blocks_of(int n) {
  Blocks b;
  int top = 1;
  while (top * 2 <= n) top *= 2;
  for (int size = top; size >= 2; size /= 2) {
    std::vector<std::uint64_t> list;
    std::uint64_t unit = size == 64 ? ~0ULL : ((1ULL << size) - 1);
    for (int start = 0; start + size <= n; start += size) list.push_back(unit << start);
    b.by_size.push_back(std::move(list));
  }
  return b;
}

// Lexicographic score of a remaining free set: how many free aligned blocks of each size, largest first.
std::array<int, 7> block_score(const Blocks& b, std::uint64_t rest) {
  std::array<int, 7> s{};
  for (std::size_t i = 0; i < b.by_size.size() && i < s.size(); ++i) {
    for (auto m : b.by_size[i]) s[i] += (rest & m) == m ? 1 : 0;
  }
  return s;
}

int numa_count(const std::vector<int>& numa_of, std::uint64_t m) {
  std::uint64_t seen = 0;
  int n = 0;
  for (; m != 0; m &= m - 1) {
    int v = numa_of[static_cast<std::size_t>(lowest_slot(m))] & 63;
    if ((seen >> v & 1) == 0) {
      seen |= 1ULL << v;
      ++n;
    }
  }
  return n;
}

// Picks k positions of `avail` (a mask over n positions) to add to `fixed`, keeping the largest aligned
// blocks of `pool & ~chosen` whole; ties: a chosen set made of the largest aligned blocks, then fewest NUMA
// nodes, then lowest ids. Exhaustive for small pools, greedy above.
std::uint64_t best_subset(int n, std::uint64_t pool, std::uint64_t avail, std::uint64_t fixed, int k,
                          const std::vector<int>& numa_of) {
  if (k == 0) return fixed;
  Blocks blocks = blocks_of(n);
  int m = bits(avail);
  if (k > m) return 0;
  if (m > 20) {
    // Greedy: take chips from the most used aligned blocks first (smallest blocks first), lowest ids.
    std::uint64_t chosen = fixed;
    for (int i = 0; i < k; ++i) {
      std::uint64_t best = 0;
      std::array<int, 7> best_s{};
      for (std::uint64_t a = avail & ~chosen; a != 0; a &= a - 1) {
        std::uint64_t bit = a & (~a + 1);
        auto s = block_score(blocks, pool & ~(chosen | bit));
        if (best == 0 || s > best_s) {
          best = bit;
          best_s = s;
        }
      }
      chosen |= best;
    }
    return chosen;
  }
  std::array<int, 20> pos{};
  int npos = 0;
  for (std::uint64_t a = avail; a != 0; a &= a - 1) pos[static_cast<std::size_t>(npos++)] = lowest_slot(a);
  std::uint64_t best = 0;
  std::array<int, 7> best_score{};
  std::array<int, 7> best_own{};
  int best_numa = 0;
  bool have = false;
  // Gosper's hack over m positions.
  std::uint32_t c = (1U << k) - 1;
  std::uint32_t limit = 1U << m;
  while (c < limit) {
    std::uint64_t s = 0;
    for (std::uint32_t x = c; x != 0; x &= x - 1) {
      s |= 1ULL << pos[static_cast<std::size_t>(std::countr_zero(x))];
    }
    std::uint64_t chosen = fixed | s;
    auto score = block_score(blocks, pool & ~chosen);
    auto own = block_score(blocks, chosen);
    int numa = numa_count(numa_of, chosen);
    bool better = !have || score > best_score;
    if (have && score == best_score) {
      better = own > best_own ||
               (own == best_own && (numa < best_numa || (numa == best_numa && lex_less(chosen, best))));
    }
    if (better) {
      have = true;
      best = chosen;
      best_score = score;
      best_own = own;
      best_numa = numa;
    }
    std::uint32_t lo = c & (~c + 1);
    std::uint32_t r = c + lo;
    c = (((r ^ c) >> 2) / lo) | r;
  }
  return best;
}

MaskChoice choose_mesh(const NodeType& t, std::uint64_t free, std::uint64_t must, int size) {
  int k = size - bits(must);
  return {best_subset(t.size, free, free & ~must, must, k, t.numa), 0, {}};
}

// ---- Ascend 910 A1: HCCS rings of four ----------------------------------------------------------------

MaskChoice choose_ring(const NodeType& t, std::uint64_t free, std::uint64_t must, int size) {
  int ring = 0;
  for (auto d : t.domain_masks) ring = std::max(ring, bits(d));
  if (size == t.size) {
    if (free != t.all()) return none(ENOSPC, "8 chips need a whole free node");
    return {free, 0, {}};
  }
  std::vector<int> order;
  if (size == 1) {
    order = {1, 3, 2, 4};
  } else if (size == 2) {
    order = {2, 4, 3};
  } else if (size == ring) {
    order = {ring};
  } else {
    return none(EINVAL, "an Ascend 910 node takes 1, 2, " + std::to_string(ring) + " or " +
                            std::to_string(t.size) + " chips, not " + std::to_string(size));
  }
  bool must_fits_a_ring = must == 0;
  for (int prio : order) {
    for (auto d : t.domain_masks) {
      if ((must & ~d) != 0) continue;
      must_fits_a_ring = true;
      std::uint64_t f = free & d;
      if (bits(f) != prio) continue;
      return {must | lowest_bits(f & ~must, size - bits(must)), 0, {}};
    }
  }
  if (!must_fits_a_ring) return none(ENOSPC, "the chips that must be included are in different HCCS rings");
  return none(ENOSPC, "no HCCS ring has " + std::to_string(size) + " free chips");
}

// ---- A3 (910_93): keep the two dies of a card together ------------------------------------------------

MaskChoice choose_pairs(const NodeType& t, std::uint64_t free, std::uint64_t must, int size) {
  std::uint64_t sel = must;
  int need = size - bits(must);
  auto take = [&](std::uint64_t m) {
    for (; m != 0 && need > 0; m &= m - 1) {
      sel |= m & (~m + 1);
      --need;
    }
  };
  // Dies of the cards a must-include die is on come first: they complete a pair.
  for (auto c : t.card_masks) {
    if ((c & must) != 0) take(free & c & ~sel);
  }
  int ncards = static_cast<int>(t.card_masks.size());
  std::uint64_t whole = 0;  // card-level mask: untouched cards with every die free
  std::uint64_t half = 0;   // untouched cards with some dies free
  for (int i = 0; i < ncards; ++i) {
    std::uint64_t c = t.card_masks[static_cast<std::size_t>(i)];
    if ((c & sel) != 0) continue;
    std::uint64_t f = free & c;
    if (f == c) {
      whole |= 1ULL << i;
    } else if (f != 0) {
      half |= 1ULL << i;
    }
  }
  std::vector<int> card_numa;
  for (auto c : t.card_masks) card_numa.push_back(t.numa[static_cast<std::size_t>(lowest_slot(c))]);
  std::uint64_t pool = whole;  // cards a block score cares about
  auto card_dies = [&](int i) { return free & t.card_masks[static_cast<std::size_t>(i)]; };
  int split = -1;
  if (need % 2 == 1) {
    if (half != 0) {
      int i = lowest_slot(half);
      take(lowest_bits(card_dies(i), 1));
      half &= ~(1ULL << i);
    } else if (whole != 0) {
      std::uint64_t pick = best_subset(ncards, pool, whole, 0, 1, card_numa);
      split = lowest_slot(pick);
      take(lowest_bits(card_dies(split), 1));
      whole &= ~pick;
      pool &= ~pick;
    }
  }
  int w = std::min(need / 2, bits(whole));
  if (w > 0) {
    std::uint64_t cards = best_subset(ncards, pool, whole, 0, w, card_numa);
    for (std::uint64_t m = cards; m != 0; m &= m - 1) take(card_dies(lowest_slot(m)));
  }
  if (need > 0 && split >= 0) take(card_dies(split) & ~sel);
  for (std::uint64_t m = half; m != 0 && need > 0; m &= m - 1) take(card_dies(lowest_slot(m)));
  take(free & ~sel);  // anything left (cards of more than two dies)
  if (need > 0) return none(ENOSPC, "not enough free dies");
  return {sel, 0, {}};
}

// ---- 310P and custom profiles: fewest cards, lowest ids ----------------------------------------------

MaskChoice choose_cards(const NodeType& t, std::uint64_t free, std::uint64_t must, int size) {
  std::uint64_t sel = must;
  int need = size - bits(must);
  for (auto c : t.card_masks) {
    if ((c & must) != 0) {
      std::uint64_t more = lowest_bits(free & c & ~sel, need);
      sel |= more;
      need -= bits(more);
    }
  }
  if (need == 0) return {sel, 0, {}};
  std::vector<std::uint64_t> cand;
  for (auto c : t.card_masks) {
    if ((c & sel) == 0 && (free & c) != 0) cand.push_back(free & c);
  }
  std::vector<int> counts;
  counts.reserve(cand.size());
  for (auto c : cand) counts.push_back(bits(c));
  std::sort(counts.rbegin(), counts.rend());
  int k = 0;
  for (int sum = 0; sum < need && k < static_cast<int>(counts.size()); ++k)
    sum += counts[static_cast<std::size_t>(k)];
  int n = static_cast<int>(cand.size());
  std::uint64_t best = 0;
  if (n <= 20) {
    for (std::uint32_t c = (1U << k) - 1; c < (1U << n);) {
      std::uint64_t u = 0;
      for (std::uint32_t x = c; x != 0; x &= x - 1) u |= cand[static_cast<std::size_t>(std::countr_zero(x))];
      if (bits(u) >= need) {
        std::uint64_t pick = lowest_bits(u, need);
        if (best == 0 || lex_less(pick, best)) best = pick;
      }
      if (k == 0) break;
      std::uint32_t lo = c & (~c + 1);
      std::uint32_t r = c + lo;
      c = (((r ^ c) >> 2) / lo) | r;
    }
  } else {
    std::stable_sort(cand.begin(), cand.end(), [](auto a, auto b) { return bits(a) > bits(b); });
    std::uint64_t u = 0;
    for (int i = 0; i < k; ++i) u |= cand[static_cast<std::size_t>(i)];
    best = lowest_bits(u, need);
  }
  if (bits(best) < need) return none(ENOSPC, "not enough free chips");
  return {sel | best, 0, {}};
}

}  // namespace

MaskChoice choose_mask(const NodeType& t, std::uint64_t free, std::uint64_t must, int size) {
  free &= t.all();
  if (size < 1 || size > t.size) {
    return none(EINVAL,
                "cannot take " + std::to_string(size) + " chips on a host of " + std::to_string(t.size));
  }
  if ((must & ~free) != 0) return none(EINVAL, "a chip that must be included is not free");
  if (bits(must) > size) return none(EINVAL, "more chips must be included than were asked for");
  if (bits(free) < size) {
    return none(ENOSPC, std::to_string(bits(free)) + " free chips, " + std::to_string(size) + " asked for");
  }
  switch (t.family) {
    case npu::Family::k910:
      return choose_ring(t, free, must, size);
    case npu::Family::k910B:
      return choose_mesh(t, free, must, size);
    case npu::Family::k910_93:
      return choose_pairs(t, free, must, size);
    case npu::Family::k310P:
      return choose_cards(t, free, must, size);
  }
  return choose_cards(t, free, must, size);
}

}  // namespace detail

Result<std::vector<int>> choose(const npu::DeviceSnapshot& host, const std::vector<int>& free,
                                const std::vector<int>& must_include, int size) {
  ASCEND_ASSIGN(NodeType t, detail::make_node_type(host, false, "the host"), "choose");
  auto to_mask = [&](const std::vector<int>& ids, const char* what) -> Result<std::uint64_t> {
    std::uint64_t m = 0;
    for (int id : ids) {
      int s = t.slot_of_phy(id);
      if (s < 0)
        return Error::invalid(std::string(what) + " chip " + std::to_string(id) + " is not on this host");
      m |= 1ULL << s;
    }
    return m;
  };
  ASCEND_ASSIGN(std::uint64_t free_mask, to_mask(free, "free"), "choose");
  ASCEND_ASSIGN(std::uint64_t must_mask, to_mask(must_include, "must-include"), "choose");
  auto c = detail::choose_mask(t, free_mask, must_mask, size);
  if (c.mask == 0) return Error(c.code, "choose " + std::to_string(size) + " chips: " + c.why);
  std::vector<int> out;
  for (std::uint64_t m = c.mask; m != 0; m &= m - 1)
    out.push_back(t.phy[static_cast<std::size_t>(detail::lowest_slot(m))]);
  return out;
}

}  // namespace ascend::topology
