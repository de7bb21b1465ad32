// The DCMI backend for statically linked programs (the shim, the hook, ascend-ctk), which cannot dlopen
// libdcmi.so dependably (glibc's dlopen from a static binary needs the very glibc it was linked with):
//  - the fast path reads the device nodes under the host root, as Huawei's runtime does: /dev/davinci<N>
//    are the chips, /dev/vdavinci<N> the vNPUs, and the control nodes, with their numbers. That is all a
//    container start asking for chips or vNPUs by number (or "all") needs, and it costs a few stat calls;
//  - everything else (a request by chip name, a vNPU template to create, vNPU create and destroy) runs the
//    dynamically linked helper `ascend-dcmi-query`, which opens the DCMI backend (backend.h) and answers in
//    the seam's JSON (seam.h).
// docs/performance.md ("Container start") gives the measured cost of both paths.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/common/process.h"
#include "ascend/npu/backend.h"
#include "ascend/npu/device_query.h"

namespace ascend::npu {

// Runs a program as run_capture() does (common/process.h): the default. A process that may no longer exec
// (the hardened hook) passes its exec broker's runner (common/exec_broker.h) instead.
using HelperRunner = std::function<Result<ProcessOutput>(
    const std::vector<std::string>& argv, const std::vector<std::string>& env, std::size_t max_out,
    std::chrono::milliseconds timeout)>;

struct HelperOptions {
  std::string root = "/";    // the host root
  std::string helper;        // absolute path of ascend-dcmi-query
  std::string dcmi_library;  // passed on as --library when set
  // Full: snapshot() asks the helper (every field); otherwise it is the node scan (chips and vNPUs by
  // number, device nodes, the rest empty).
  bool full = false;
  HelperRunner run;  // empty: run_capture
};

// The helper's environment: fixed, so that its library finds its host from its own path, not from ours.
inline const std::vector<std::string>& helper_env() {
  static const std::vector<std::string> kEnv = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  return kEnv;
}

// The helper's command line for a verb: the program, --root and --library (when set), then the verb.
std::vector<std::string> helper_argv(const HelperOptions& o, const std::vector<std::string>& verb);

// Whether `verb` (what follows helper_argv's fixed part) is one this client sends: `snapshot`; `probe`;
// `create
// --phy N --template NAME [--id N] [--owner JSON]`; `destroy --id N [--phy N] [--holder JSON]`, each option
// once, in the separate-value form. Everything else is refused (EPERM), in particular --root, --library and
// --backend, which the helper also takes after its verb: an exec broker admits only these, so the process
// it serves cannot point the helper at another host or make it load another library.
Status admit_helper_verb(std::span<const std::string> verb);

// The node scan of `root`: chips, vNPUs (phy_id from the id; no template) and control nodes, sorted, with
// their device numbers and modes as lstat reads them (a link by a node's name is no node), nodes_checked
// set; backend "dcmi". ENODEV when no /dev/davinci<N> exists.
Result<DeviceSnapshot> scan_device_nodes(const std::string& root);

std::unique_ptr<DeviceQuery> open_node_query(HelperOptions opts);

// The static binaries' way to DCMI, for open_device_query (backend.h): open_node_query(`opts`), with the
// factory's root and library. When the library is only a guess at the loader's search path
// (dcmi_library_guessed), it first asks the helper whether it loads there (`probe`; ENOENT when it does
// not): so that `auto` decides as the dynamically linked programs, which try dlopen, do.
DcmiOpener helper_dcmi_opener(HelperOptions opts);

// The helper's side of the protocol (tools/ascend_dcmi_query.cc): one JSON document on stdout, either the
// answer or {"error": {"code": <errno>, "message": "..."}} (exit 1).
std::string helper_error_json(const Error& e);

}  // namespace ascend::npu
