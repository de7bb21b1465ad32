// The emulated host's state file (emulator.h): where it is, reading it, and changing it under its lock.
// The rest of Emulator is in parts by concept: emulator_load.cc (load, unload, reboot) with the tree it lays
// out (emulator_tree.h), emulator_chips.cc (faults, links, workloads), emulator_vnpu.cc (vNPUs).
#include "ascend/npu/emulator.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "ascend/common/fs.h"
#include "ascend/npu/workload.h"
#include "emulator_root.h"

namespace ascend::npu {
namespace emulator_detail {

std::string join(const std::string& root, const std::string& rel) {
  if (root.empty() || root == "/") return "/" + rel;
  return root + (root.back() == '/' ? "" : "/") + rel;
}

bool exists(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

namespace {

// What a writer SIGKILLed inside its change leaves behind (tests/npu-smi-sim/kill_test.cc): a temporary
// state file that never replaced the state, and the node of a vNPU it had not committed yet (create makes
// the node first) or had just committed away (destroy removes the node after). Only a writer holding the
// lock makes either, so under the lock both are a dead writer's: removed before the next change. Only
// character devices with this host's vNPU major go.
void remove_dead_writers_leftovers(const std::string& root, const HostState& s) {
  std::error_code ec;
  const std::string state_file = std::filesystem::path(kStateFile).filename().string() + ".tmp.";
  for (const auto& e : std::filesystem::directory_iterator(join(root, kStateDir), ec)) {
    if (e.path().filename().string().rfind(state_file, 0) == 0) ::unlink(e.path().c_str());
  }
  if (!s.device_nodes) return;
  for (const auto& e : std::filesystem::directory_iterator(join(root, "dev"), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("vdavinci", 0) != 0) continue;
    const char* digits = name.c_str() + 8;
    char* end = nullptr;
    const long id = std::strtol(digits, &end, 10);
    struct stat st {};
    if (end == digits || *end != '\0' || s.vnpu(static_cast<int>(id)) != nullptr ||
        ::lstat(e.path().c_str(), &st) != 0 || !S_ISCHR(st.st_mode) ||
        static_cast<int>(major(st.st_rdev)) != s.majors.vdavinci) {
      continue;
    }
    ::unlink(e.path().c_str());
  }
}

}  // namespace

Status locked_update(const Emulator& emu, const std::function<void()>& after_commit,
                     const std::function<Status(HostState&)>& change) {
  if (!emu.loaded())
    return Error::not_found("no emulated host is loaded at " + emu.root() +
                            " (run 'npu-sim load --profile NAME')");
  ASCEND_ASSIGN(FileLock lock, FileLock::acquire(join(emu.root(), kLock)), "update state");
  ASCEND_ASSIGN(HostState s, emu.read_state(), "update state");
  remove_dead_writers_leftovers(emu.root(), s);
  ASCEND_CHECK(change(s), "");
  s.generation++;
  ASCEND_CHECK(atomic_replace(join(emu.root(), kStateFile), serialize(s)), "update state");
  if (after_commit) after_commit();
  return {};
}

}  // namespace emulator_detail

using emulator_detail::exists;
using emulator_detail::join;

Emulator::Emulator(std::string root) : root_(std::move(root)) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
}

std::string Emulator::state_path() const {
  return join(root_, kStateFile);
}

bool Emulator::loaded() const {
  return exists(state_path());
}

std::string Emulator::host_path(const std::string& abs_path) const {
  if (root_ == "/") return abs_path;
  return root_ + abs_path;
}

Result<HostState> Emulator::read_state() const {
  auto text = read_file(state_path(), 16U << 20);
  if (!text) {
    if (text.error().code() == ENOENT) {
      return Error::not_found("no emulated host is loaded at " + root_ +
                              " (run 'npu-sim load --profile NAME')");
    }
    return text.error().context("read state");
  }
  return parse_state(*text).context("state file " + state_path());
}

Result<HostState> Emulator::live_state() const {
  ASCEND_ASSIGN(HostState s, read_state(), "");
  apply_workloads(s, unix_now_ms());
  return s;
}

Result<DeviceSnapshot> Emulator::snapshot() const {
  ASCEND_ASSIGN(HostState s, live_state(), "read the emulated host");
  return to_snapshot(s);
}

Result<std::vector<ChipTelemetry>> Emulator::telemetry() const {
  ASCEND_ASSIGN(HostState s, live_state(), "read the emulated host");
  std::vector<ChipTelemetry> out;
  out.reserve(s.chips.size());
  for (const auto& c : s.chips) out.push_back(telemetry_of(c));
  return out;
}

Status Emulator::update(const std::function<Status(HostState&)>& change) {
  return emulator_detail::locked_update(*this, nullptr, change);
}

}  // namespace ascend::npu
