// Graded faults (issue 23): the fault-code table that gives each chip fault code MindCluster's handling
// level (data: device-plugin/plugin/faults/fault-codes.yaml, compiled in, read over by --fault-codes), and
// FaultGrades, which follows a host's faults through time: the level of every chip, the escalation of a
// chip that faults too often to isolation (MindCluster's ManuallySeparateNPU) until an operator clears it,
// and the view of the host whose health follows the levels (the rest of the plugin reads health from it).
//
// FaultTable is an immutable value; FaultGrades is not thread-safe (the Plugin holds it under its mutex).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/npu/seam.h"

namespace ascend::plugin {

// MindCluster's levels, least severe first (its getMostSeriousFaultType order). kNormal: no fault
// (MindCluster's NormalNPU); kManuallySeparateNPU: isolated, by escalation or by an operator.
enum class FaultLevel {
  kNormal,
  kNotHandleFault,
  kRestartRequest,
  kRestartBusiness,
  kFreeRestartNPU,
  kRestartNPU,
  kPreSeparateNPU,
  kSeparateNPU,
  kManuallySeparateNPU,
};
std::string_view to_string(FaultLevel l);
// The level names of the table file (NotHandleFault ... SeparateNPU); EINVAL naming the accepted ones.
Result<FaultLevel> parse_fault_level(std::string_view s);
// PreSeparateNPU and above: the chip takes no new work (Unhealthy to the kubelet and in the ConfigMap).
bool makes_unhealthy(FaultLevel l);

// A chip that faults `times` times within `window` is isolated.
struct Escalation {
  int times = 3;
  std::chrono::seconds window{86400};
  bool operator==(const Escalation&) const = default;
};

// What one table file says (faults.cc reads it).
struct FileTable {
  std::map<std::uint32_t, FaultLevel> codes;
  std::optional<FaultLevel> default_level;
  std::optional<Escalation> escalation;
};

class FaultTable {
 public:
  // The table shipped with the plugin (faults/fault-codes.yaml, compiled in).
  static const FaultTable& builtin();
  // Parses a table file's text; `name` names it in errors, which say the line: "<name>:12: ...".
  static Result<FaultTable> parse(const std::string& text, const std::string& name);
  // `base` with a file read over it: the file's codes take the levels it gives them; its default_level and
  // escalation, when present, replace base's.
  static Result<FaultTable> load_over(const FaultTable& base, const std::string& path);

  // The level of `code`: the table's, else default_level().
  FaultLevel level(std::uint32_t code) const;
  // The level of a fault the device query reports: its code's when the table has it; an unknown code by the
  // severity the driver gave it (as MindCluster grades unrecorded codes): OK or Warning NotHandleFault,
  // Alarm or Critical default_level().
  FaultLevel level(const npu::Fault& f) const;
  FaultLevel default_level() const { return default_; }
  const Escalation& escalation() const { return escalation_; }
  std::size_t size() const { return codes_.size(); }

 private:
  static FaultTable over(FaultTable base, FileTable f);

  std::map<std::uint32_t, FaultLevel> codes_;
  FaultLevel default_ = FaultLevel::kSeparateNPU;
  Escalation escalation_;
};

// A chip's faults as the device ConfigMap shows them.
struct ChipFaults {
  int phy_id = 0;
  FaultLevel level = FaultLevel::kNormal;
  std::vector<std::uint32_t> codes;  // as the device query reports them
  bool operator==(const ChipFaults&) const = default;
};

// One change of a chip's level, and why ("code 80E18402 (SeparateNPU)", "3 faults within 86400 s").
struct LevelChange {
  int phy_id = 0;
  FaultLevel from = FaultLevel::kNormal;
  FaultLevel to = FaultLevel::kNormal;
  std::string why;
};

class FaultGrades {
 public:
  using Clock = std::chrono::steady_clock;
  explicit FaultGrades(FaultTable table) : table_(std::move(table)) {}

  const FaultTable& table() const { return table_; }
  // A new snapshot from the device query at `now`: every code that appeared on a chip since the last one is
  // a fault (NotHandleFault codes aside); a chip with escalation().times of them within the window is
  // isolated. Returns the chips whose level changed.
  std::vector<LevelChange> observe(const npu::DeviceSnapshot& raw, Clock::time_point now);
  // Isolates a chip (an operator named it in ManuallySeparateNPU) / ends its isolation (an operator removed
  // it; its fault history is forgotten). No change when it already is / is not isolated.
  std::vector<LevelChange> isolate(int phy_id, const std::string& why);
  std::vector<LevelChange> clear(int phy_id);

  FaultLevel level(int phy_id) const;
  std::set<int> isolated() const;
  // Every chip that has faults or is isolated, by phy id.
  std::vector<ChipFaults> chips() const;
  // The last snapshot observed, as the device query gave it.
  const npu::DeviceSnapshot& raw() const { return raw_; }
  // The last snapshot with health following the levels: a fault whose code makes the chip unhealthy is
  // Critical, any other Warning (usable); an isolated chip's faults are Critical, and one without faults gets
  // a stand-in fault of code 0, Critical.
  npu::DeviceSnapshot view() const;

 private:
  FaultLevel code_level(const npu::Chip& c) const;
  // Counts the new faults of `c`; true when that isolates it.
  bool count_faults(const npu::Chip& c, const npu::Chip* before, Clock::time_point now);
  std::map<int, FaultLevel> levels() const;
  static std::vector<LevelChange> diff(const std::map<int, FaultLevel>& before,
                                       const std::map<int, FaultLevel>& after, const std::string& why,
                                       const std::map<int, std::string>& whys);

  FaultTable table_;
  npu::DeviceSnapshot raw_;
  std::map<int, std::deque<Clock::time_point>> history_;  // per chip: when its counted faults appeared
  std::map<int, std::string> isolated_;                   // phy id -> why
};

}  // namespace ascend::plugin
