// File primitives shared by every component: whole-file reads, atomic replace (temp file in the same
// directory, fsync, rename; the old file's mode is kept) and an advisory exclusive lock. All functions are
// thread-safe; FileLock is an RAII guard that must not be shared between threads.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "ascend/common/error.h"
#include "ascend/common/unique_fd.h"

namespace ascend {

// Reads a whole file. Fails with EFBIG when it is larger than `max_bytes`.
Result<std::string> read_file(const std::string& path, std::size_t max_bytes = 64U << 20);

// Reads a file that decides what a privileged program does (a configuration, a mount list). The file must
// be a regular file owned by root (or by the caller's effective user, who could write it anyway) and not
// writable by group or others; the check is made on the opened descriptor, so the bytes read are those of
// the file checked. Otherwise an error naming the file, its mode and owner, and the fix.
Result<std::string> read_protected_file(const std::string& path, std::size_t max_bytes);

// The same ownership and mode check on an open descriptor of `path` (any file type; `what` names the role,
// e.g. "hook").
Status check_protected(int fd, const std::string& path, const std::string& what);

enum class Durability {
  kSynced,    // fsync the file and its folder: the new content survives a crash (state files, configs)
  kEphemeral  // no fsync: for files whose life ends with the boot, e.g. a container bundle's config.json
};

// Replaces `path` with `content` atomically: readers see the old or the new file, never a mix. The new file
// gets the old file's mode, or `mode` when the file did not exist.
Status atomic_replace(const std::string& path, std::string_view content, mode_t mode = 0644,
                      Durability durability = Durability::kSynced);

// Whether `name` can be one entry of a folder: not empty, not "." or "..", and no '/'. The one rule for a
// name that becomes part of a path (a container id looked up as a folder, each component of a path that is
// taken apart), so that no such name can climb out of the folder it is meant for. Length and NUL bytes are
// the caller's concern.
bool is_file_name(std::string_view name);

// Creates every missing directory of `path` (like mkdir -p) with `mode`.
Status make_dirs(const std::string& path, mode_t mode = 0755);

// An exclusive flock(2) on a lock file, created if missing, held until destruction.
class FileLock {
 public:
  static Result<FileLock> acquire(const std::string& lock_path);
  FileLock(FileLock&&) noexcept = default;
  FileLock& operator=(FileLock&&) noexcept = default;
  ~FileLock();

 private:
  explicit FileLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

}  // namespace ascend
