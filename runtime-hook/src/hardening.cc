#include "ascend/hook/hardening.h"

#include <seccomp.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>

#include "ascend/hook/spec_edit.h"

namespace ascend::hook {

namespace {

constexpr CapabilityUse kCapabilities[] = {
    {CAP_SYS_ADMIN,
     "setns into the container's mount namespace; open_tree, mount_setattr, move_mount, mount"},
    {CAP_SYS_CHROOT, "setns into a mount namespace also needs it"},
    {CAP_SYS_PTRACE, "open /proc/<pid>/ns/mnt of a container process"},
    {CAP_MKNOD, "create device nodes when registered without ascend-docker-runtime"},
    {CAP_DAC_OVERRIDE, "create mount targets in image folders root cannot write; write devices.allow"},
};

constexpr const char* kDenied[] = {
    "execve",
    "execveat",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "open_by_handle_at",
    "name_to_handle_at",
    "reboot",
    "swapon",
    "swapoff",
    "pivot_root",
    "chroot",
    "unshare",
    "iopl",
    "ioperm",
};

}  // namespace

std::span<const CapabilityUse> hook_capabilities() {
  return kCapabilities;
}
std::span<const char* const> hook_denied_syscalls() {
  return kDenied;
}

void scrub_environment() {
  ::clearenv();
  std::string path = std::string(kHookPathEnv).substr(5);
  ::setenv("PATH", path.c_str(), 1);
}

Status harden_hook_process() {
  if (::geteuid() != 0)
    return Error(EPERM, "the hook must run as root (it is started by the container runtime)");
  auto kept = [](cap_value_t c) {
    return std::any_of(std::begin(kCapabilities), std::end(kCapabilities),
                       [c](const auto& u) { return u.cap == c; });
  };
  // The bounding set first, while CAP_SETPCAP is still held.
  for (cap_value_t c = 0; c <= CAP_LAST_CAP; ++c) {
    if (kept(c) || !CAP_IS_SUPPORTED(c)) continue;
    if (::cap_drop_bound(c) != 0 && errno != EINVAL)
      return Error::from_errno(errno, "drop capability from bounding set");
  }
  if (::cap_reset_ambient() != 0 && errno != EINVAL)
    return Error::from_errno(errno, "clear ambient capabilities");
  cap_t caps = ::cap_init();
  if (caps == nullptr) return Error::from_errno(errno, "cap_init");
  cap_value_t list[std::size(kCapabilities)];
  for (std::size_t i = 0; i < std::size(kCapabilities); ++i) list[i] = kCapabilities[i].cap;
  int n = static_cast<int>(std::size(kCapabilities));
  bool ok = ::cap_set_flag(caps, CAP_EFFECTIVE, n, list, CAP_SET) == 0 &&
            ::cap_set_flag(caps, CAP_PERMITTED, n, list, CAP_SET) == 0 && ::cap_set_proc(caps) == 0;
  int err = errno;
  ::cap_free(caps);
  if (!ok) return Error::from_errno(err, "drop capabilities");

  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return Error::from_errno(errno, "set no_new_privs");
  scmp_filter_ctx ctx = ::seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) return Error(ENOMEM, "seccomp_init failed");
  int rc = 0;
  for (const char* name : kDenied) {
    int nr = ::seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    rc = ::seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
    if (rc != 0) break;
  }
  if (rc == 0) rc = ::seccomp_load(ctx);
  ::seccomp_release(ctx);
  if (rc != 0) return Error(-rc, std::string("load the seccomp filter: ") + std::strerror(-rc));
  return {};
}

}  // namespace ascend::hook
