// What the emulator's parts (emulator.cc and the emulator_*.cc beside it) share: where its files lie under
// the root beside the state file (emulator.h), and the one way a change reaches the state. Private to the
// emulator library.
#pragma once

#include <functional>
#include <string>

#include "ascend/common/error.h"

namespace ascend::npu {
class Emulator;
struct HostState;
}  // namespace ascend::npu

namespace ascend::npu::emulator_detail {

// Relative to the root, beside kStateFile: the list of what load() made (what unload() removes), and the
// writers' lock.
inline constexpr const char* kManifest = "usr/local/Ascend/driver/lib64/npu-sim/manifest";
inline constexpr const char* kLock = "usr/local/Ascend/driver/lib64/npu-sim/state.lock";

// `rel` under `root` ("/" and "" are the real root).
std::string join(const std::string& root, const std::string& rel);
// Whether anything is at `p` (lstat: a dangling link counts).
bool exists(const std::string& p);

// Every change: under the lock, read, put right what a dead writer left, change, commit, then `after_commit`
// (still under the lock).
Status locked_update(const Emulator& emu, const std::function<void()>& after_commit,
                     const std::function<Status(HostState&)>& change);

}  // namespace ascend::npu::emulator_detail
