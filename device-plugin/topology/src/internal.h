// Internals shared by the library's translation units.
#pragma once

#include <cstdint>
#include <string>

#include "ascend/topology/cluster.h"

namespace ascend::topology::detail {

// A NodeType of the chips and links a device snapshot shows (NodeType::host stays empty); without links it
// skips the level matrix (enough for node-level choice). `name` names the host in errors.
Result<NodeType> make_node_type(const npu::DeviceSnapshot& host, bool with_links, const std::string& name);

// Node-level choice on slot masks (see choose.h for the rules). mask == 0 means no answer; then code is
// EINVAL or ENOSPC and why says why.
struct MaskChoice {
  std::uint64_t mask = 0;
  int code = 0;
  std::string why;
};
MaskChoice choose_mask(const NodeType& t, std::uint64_t free, std::uint64_t must, int size);

// True when `a`'s sorted slot list is lexicographically smaller than `b`'s.
inline bool lex_less(std::uint64_t a, std::uint64_t b) {
  if (a == b) return false;
  std::uint64_t d = a ^ b;
  return (a & (d & (~d + 1))) != 0;
}

inline int lowest_slot(std::uint64_t m) {
  return __builtin_ctzll(m);
}

// An index computed in int, as a container index.
inline std::size_t idx(int i) {
  return static_cast<std::size_t>(i);
}

// The `k` lowest set bits of m.
inline std::uint64_t lowest_bits(std::uint64_t m, int k) {
  std::uint64_t out = 0;
  for (int i = 0; i < k && m != 0; ++i) {
    std::uint64_t low = m & (~m + 1);
    out |= low;
    m &= ~low;
  }
  return out;
}

}  // namespace ascend::topology::detail
