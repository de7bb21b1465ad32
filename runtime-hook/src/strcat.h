// cat(a, b, ...): one allocation for a message built from several pieces (instead of a chain of operator+,
// which allocates a temporary per step). Internal to runtime-hook.
#pragma once

#include <string>
#include <string_view>

namespace ascend::hook {

template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::string out;
  out.reserve((std::string_view(parts).size() + ... + 0));
  (out.append(std::string_view(parts)), ...);
  return out;
}

}  // namespace ascend::hook
