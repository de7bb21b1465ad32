// Small helpers shared by the extender's translation units (extender.cc: transitions; extender_views.cc:
// JSON views; extender_state.cc: the state file). Not part of the library's interface.
#pragma once

#include <cstddef>

namespace ascend::scheduler::detail {

inline std::size_t idx(int i) {
  return static_cast<std::size_t>(i);
}

}  // namespace ascend::scheduler::detail
