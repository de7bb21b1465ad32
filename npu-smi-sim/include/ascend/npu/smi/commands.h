// The npu-smi command line: the real tool's grammar (`npu-smi info -t board -i 0 -c 0`), its messages
// ("Invalid card id.", "Error parameter of -t", ...) on stdout, and its exit codes (the low byte of its
// negative error code). What the emulator knows beyond the real message (why a vNPU could not be created)
// goes to stderr as one "npu-smi: ..." line. Thread-safe (no shared state).
#pragma once

#include <string>
#include <vector>

#include "ascend/npu/smi.h"
#include "ascend/npu/state.h"

namespace ascend::npu::smi {

// Exit statuses, as the real tool's exit(<negative code>) leaves them. Listed in `npu-smi -h`.
inline constexpr int exit_status(int code) {
  return static_cast<int>(static_cast<unsigned>(code) & 0xFFU);
}
inline constexpr int kExitOk = 0;
inline constexpr int kExitInvalidParameter =
    exit_status(-9001);                                     // 215: unknown card, chip, type, template, vNPU
inline constexpr int kExitInnerError = exit_status(-9005);  // 211: state unreadable/unwritable, bad command
inline constexpr int kExitResourceOccupied = exit_status(-9020);  // 196: vnpu-mode switch while vNPUs exist
inline constexpr int kExitNotSupported = exit_status(-9255);  // 217: not on this device, not enough resources
inline constexpr int kExitDcmiInitFailed = exit_status(-8005);  // 187: no emulated host, or no device visible

std::string help_text();       // npu-smi -h
std::string info_help_text();  // npu-smi info -h
std::string set_help_text();   // npu-smi set -h

// Runs a query command (`info ...`, `-v`, `-h`) against a snapshot and the devices visible in it; pure, so
// that tests feed it a state and a visible set directly. `set` commands are refused here (they need the
// Emulator): use run().
Output run_query(const std::vector<std::string>& args, const HostState& s, const Visible& visible);

}  // namespace ascend::npu::smi
