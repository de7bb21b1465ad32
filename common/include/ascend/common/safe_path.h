// Resolution of a path inside a root directory (a container rootfs) that can never escape it: symlinks,
// ".." and absolute link targets are resolved as if the root were "/". Uses openat2(RESOLVE_IN_ROOT) and,
// on kernels without it, walks the path one component at a time with O_NOFOLLOW, resolving each symlink
// by hand against the root fd. The returned fd is O_PATH unless `flags` asks otherwise, so callers can
// act on it through /proc/self/fd/N and nothing can swap a component between check and use. openat2's EAGAIN
// (a rename or mount elsewhere raced with "..") is retried, then answered by the walk.
// Thread-safe (no shared state).
#pragma once

#include <string>

#include "ascend/common/error.h"
#include "ascend/common/unique_fd.h"

namespace ascend {

enum class ResolveMode {
  kAuto,      // openat2 when the kernel has it, otherwise the fallback
  kFallback,  // always the component-wise walk (for tests of the fallback)
};

// Opens `path` (absolute or relative; taken relative to the root either way) inside `root_fd`.
// `flags` are open(2) flags for the final component; O_NOFOLLOW in flags refuses a final symlink.
Result<UniqueFd> open_in_root(int root_fd, const std::string& path, int flags,
                              ResolveMode mode = ResolveMode::kAuto);

// Opens `path` inside `root_fd` only if no component of it is a symbolic link and it stays beneath the root
// (openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS; `flags` as for open_in_root, without O_NOFOLLOW's
// O_PATH exception: a final symlink is ELOOP too). What it opens is then exactly the root's own path joined
// with `path`, with nothing to read back. ELOOP when a component is a link, EXDEV when ".." would leave the
// root, ENOSYS on a kernel before 5.6: callers that want the link followed use open_in_root then.
Result<UniqueFd> open_beneath_without_links(int root_fd, const std::string& path, int flags);

// The path an fd refers to, for mounts: "/proc/self/fd/<fd>".
std::string fd_path(int fd);

}  // namespace ascend
