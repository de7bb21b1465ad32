// Small helpers shared by the extender's translation units (extender.cc: transitions; extender_views.cc:
// JSON views; extender_state.cc: the state file). Not part of the library's interface.
#pragma once

#include <chrono>
#include <cstddef>
#include <vector>

#include <nlohmann/json.hpp>

#include "ascend/scheduler/extender.h"

namespace ascend::scheduler::detail {

inline std::size_t idx(int i) {
  return static_cast<std::size_t>(i);
}

// A time as the records and views write it: milliseconds since the epoch.
inline long long ms_of(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

// A job's fault notes as its record and its status view show them.
template <class Json>
Json faults_json(const std::vector<FaultNote>& faults) {
  Json out = Json::array();
  for (const auto& f : faults) {
    out.push_back(
        {{"at_ms", ms_of(f.at)}, {"node", f.node}, {"chips", f.chips}, {"pod", f.pod}, {"why", f.why}});
  }
  return out;
}

}  // namespace ascend::scheduler::detail
