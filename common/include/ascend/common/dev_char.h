// /dev/char/<major>:<minor> links for the device nodes the runtime puts in containers.
//
// Why: runc with the systemd cgroup driver hands a container's device rules to systemd as DeviceAllow=
// entries and names a character device by its /dev/char/<major>:<minor> path. udev makes those links for
// devices it knows, but the Ascend driver creates its nodes itself (as NVIDIA's does), so the links are
// missing; systemd then drops the rule when it re-applies the unit's device policy (`systemctl
// daemon-reload`), and a running container loses its NPUs. The runtime (and `ascend-ctk system
// create-dev-char-symlinks`) makes the links.
//
// Links are relative ("../davinci0", as udev makes them) so that they are right under any host root. The
// links this code created are listed in a record under the root (kDevCharRecord, taken under a lock), so that
// uninstall removes only those, never udev's. Thread-safe and multi-process safe.
#pragma once

#include <string>
#include <vector>

#include "ascend/common/error.h"

namespace ascend {

// Relative to the host root: the record of the links we created (in /run: links and record end with the
// boot). One record for every writer (the runtime, ascend-ctk, the emulator, vNPU gc), so it sits in the
// toolkit's own folder of /run, beside DCMI's vNPU owner file, not in one component's.
inline constexpr const char* kDevCharRecord = "run/ascend/dev-char-links";

// "<root>/dev/char/<major>:<minor>".
std::string dev_char_link_path(const std::string& root, int major, int minor);

// Makes <root>/dev/char/<major>:<minor> point at `node_path` ("/dev/davinci0", absolute as the host sees it,
// under /dev). A link that already leads to a character device <major>:<minor> is kept (udev's, or ours); one
// that leads elsewhere (a node of an unloaded driver) is replaced. Returns whether a link was written.
Result<bool> ensure_dev_char_link(const std::string& root, const std::string& node_path, int major,
                                  int minor);

// Removes <root>/dev/char/<major>:<minor> when it is a link to `node_path` that no longer leads to that
// device (the node was removed, e.g. a destroyed vNPU): a link we no longer need. Returns whether it removed
// it.
Result<bool> remove_stale_dev_char_link(const std::string& root, const std::string& node_path, int major,
                                        int minor);

// Removes every link in the record that still points where we made it, and the record (uninstall).
// Returns the links removed ("/dev/char/234:0").
Result<std::vector<std::string>> remove_recorded_dev_char_links(const std::string& root);

// The links in the record ("/dev/char/234:0 ../davinci0" per entry, as written).
Result<std::vector<std::string>> recorded_dev_char_links(const std::string& root);

}  // namespace ascend
