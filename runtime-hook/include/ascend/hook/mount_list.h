// Mount lists: files named <name>.list in the mount-list folder, one absolute host path per line ('#' starts
// a comment). They say which driver files a container receives; ASCEND_RUNTIME_MOUNTS picks the lists.
// parse_mount_list is pure; load_mount_lists reads files. Thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ascend/common/error.h"

namespace ascend::hook {

struct MountList {
  std::string name;
  std::vector<std::string> paths;  // absolute, normalised (no "//", ".", ".." or trailing '/')
};

// Errors name the list and the line: a relative path, or one with "." / ".." components.
Result<MountList> parse_mount_list(std::string_view text, const std::string& name);

// Reads <dir>/<name>.list for every name, in order. A missing list file is an error naming it, and so is one
// that is not owned by root or is writable by group or others (checked on the opened file).
Result<std::vector<MountList>> load_mount_lists(const std::string& dir,
                                                const std::vector<std::string>& names);

}  // namespace ascend::hook
