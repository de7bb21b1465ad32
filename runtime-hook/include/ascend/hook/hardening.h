// Least privilege for the hook process, as data: the capabilities it keeps (each with the reason), an empty
// environment, no_new_privs and a seccomp filter that refuses exec and the kernel's more dangerous doors.
// The hook never needs to run another program, so code injected into it cannot start one either.
// Call once, early in main; not thread-safe.
#pragma once

#include <sys/capability.h>

#include <span>

#include "ascend/common/error.h"

namespace ascend::hook {

struct CapabilityUse {
  cap_value_t cap;
  const char* why;
};

// The capabilities the hook keeps (effective and permitted); every other one leaves every set, the bounding
// set included.
std::span<const CapabilityUse> hook_capabilities();

// The system calls the hook's seccomp filter refuses with EPERM.
std::span<const char* const> hook_denied_syscalls();

// Empties the environment and sets PATH to the minimal one (spec_edit.h kHookPathEnv).
void scrub_environment();

// Drops capabilities to hook_capabilities(), sets no_new_privs and loads the seccomp filter. Fails when not
// root: the hook cannot do its work unprivileged.
Status harden_hook_process();

}  // namespace ascend::hook
