// Garbage collection of dynamic vNPUs whose container is gone: the ones no poststop hook will ever destroy
// (the runtime or runc was killed half-way through a start, the engine crashed, the host rebooted and the
// driver restored its vNPU configuration).
//
// A dynamic vNPU carries its owner (VnpuOwner, recorded by the runtime in the same step that created it). It
// is gone when the machine or the emulated host rebooted since it was made. Otherwise it is held while the
// runtime process that created it still runs (checked first: once that process is gone it can create nothing
// more), or while the engine's own state (runc's state folder for that container, the --root the engine gave
// runc) shows the container with a live init process (created, running or paused); with no such container
// it is an orphan. A static vNPU (no owner) is never touched, nor one whose owner cannot be judged from here
// (another pid namespace, a state folder this process cannot see, an unreadable state file): those are kept
// and reported.
//
// Planning is pure (plan_vnpu_gc over a snapshot and a liveness function); run_vnpu_gc destroys through the
// device query, each destroy conditional on the owner being unchanged, and removes the vNPU's
// /dev/char link (dev_char.h). Thread-safe.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/npu/device_query.h"

namespace ascend::npu {

// What the engine's state says about a vNPU's owner.
struct Liveness {
  enum class State { kHeld, kGone, kUnsure };
  State state = State::kUnsure;
  std::string why;  // one phrase: "container abc is running (init pid 42)"
};

// Judges owners from /proc and runc's state folders. `proc` is the procfs to read (tests may not change it:
// it must be the pid namespace's own).
class ContainerProbe {
 public:
  explicit ContainerProbe(std::string proc = "/proc");
  // `boot`: boot_of(the current host). An owner from another boot is gone whatever else is there.
  Liveness check(const VnpuOwner& owner, const std::string& boot) const;

 private:
  std::string proc_;
  std::string pid_ns_;  // ours, read once
};

// The start time of process `pid` (/proc/<pid>/stat field 22, clock ticks since boot); 0 when it does not
// exist or is a zombie (a zombie runs nothing: runc too counts it as stopped).
std::uint64_t process_start(const std::string& proc, int pid);
// "pid:[4026531836]" of this process; empty when unreadable.
std::string own_pid_ns(const std::string& proc);
// "<kernel boot_id>:<host boot_id>": changes when the machine or the emulated host reboots.
std::string boot_of(const DeviceSnapshot& host, const std::string& proc);
// Whether an owner's `recorded` boot is of an earlier boot than `now`: the kernel's boot ids differ, or both
// name a host load and those differ. A backend that cannot tell the load (DCMI: boot_id empty) leaves that
// part empty, so an owner stamped through one backend is judged alike through the other.
bool earlier_boot(std::string_view recorded, std::string_view now);
// The owner the runtime records for a container it is creating now: this process, its pid namespace, the
// boot.
VnpuOwner owner_for_this_process(std::string container_id, std::string state_root,
                                 const DeviceSnapshot& host);

struct GcItem {
  Vnpu vnpu;
  std::string why;
  Liveness::State state = Liveness::State::kUnsure;
};

struct GcPlan {
  std::vector<GcItem> destroy;  // dynamic vNPUs whose container is gone
  std::vector<GcItem> keep;     // dynamic vNPUs held, or not judged (Unsure)
};

// The owner a DRA claim's vNPU carries (the device plugin's --dra-vnpu): container_id
// "<kDraClaimOwnerPrefix><claim uid>/<device>". No container holds it; the plugin destroys it when the
// kubelet unprepares the claim, so gc leaves it alone (the '/' also makes it no runc id to an older gc:
// kept).
inline constexpr std::string_view kDraClaimOwnerPrefix = "dra-claim/";

// Pure: which dynamic vNPUs of `host` to destroy. Static vNPUs and DRA claims' appear in neither list.
GcPlan plan_vnpu_gc(const DeviceSnapshot& host, const std::function<Liveness(const VnpuOwner&)>& liveness);

struct GcReport {
  std::vector<GcItem> destroyed;  // (dry run: would be destroyed)
  std::vector<GcItem> kept;
  std::vector<std::string> errors;  // one line per vNPU that could not be destroyed
};

// Plans with `probe` and, unless `dry_run`, destroys each orphan (only while its owner is still the one
// judged: a vNPU re-created for a new container in between is left alone) and removes its /dev/char link
// under the host root. Fails only when the host cannot be read.
Result<GcReport> run_vnpu_gc(DeviceQuery& dq, const ContainerProbe& probe, bool dry_run);

}  // namespace ascend::npu
