// Live telemetry of the emulated host: how the work recorded in the state (Workload, state.h; written by
// `npu-sim load-gen`) moves each chip away from the idle values of its profile. A query (the emulator's
// snapshot and telemetry, npu-smi, the emulated libdcmi.so) applies it to the state it read, at the time it
// reads it; the state file itself keeps the idle values, so that stopping the work restores them.
//
// The model is deliberately simple and deterministic (no noise, no thermal lag), so that tests can state
// the values they expect: at AICore utilization u (0-100),
//   AICore %    = max(idle, u);                AICPU % = max(idle, the workload's AICPU %)
//   memory used = min(total, idle + the workload's MB)     (HBM; on-chip DDR where there is no HBM)
//   temperature = idle + rise(family) * u / 100, rounded down
//   power       = idle + (max(family) - idle) * u / 100, to 0.1 W (unchanged where the chip reports none)
// rise and max are plausible constants per family (LoadModel): no public capture shows a busy chip's power
// or temperature. Pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "ascend/common/error.h"
#include "ascend/npu/state.h"

namespace ascend::npu {

struct LoadModel {
  double max_power_w = 0;  // power at 100 % AICore
  int temp_rise_c = 0;     // degrees above idle at 100 % AICore
};
LoadModel load_model(Family f);

// Whether `w` runs at `now_ms` (Unix ms).
bool running(const Workload& w, std::int64_t now_ms);

// The chips of `s` as they are at `now_ms`: every running workload applied to its chip.
void apply_workloads(HostState& s, std::int64_t now_ms);

// The wall clock in Unix ms (what the queries pass as now).
std::int64_t unix_now_ms();

// Checks a workload before it is recorded: percentages 0-100, memory and end time not negative.
Status check_workload(const Workload& w);

}  // namespace ascend::npu
