#include "ascend/plugin/faults.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <optional>
#include <utility>

#include "ascend/common/fs.h"
#include "ascend/npu/seam.h"
#include "fault_codes_data.h"

namespace ascend::plugin {

namespace {

constexpr std::array<std::pair<FaultLevel, std::string_view>, 9> kLevelNames = {{
    {FaultLevel::kNormal, "NormalNPU"},
    {FaultLevel::kNotHandleFault, "NotHandleFault"},
    {FaultLevel::kRestartRequest, "RestartRequest"},
    {FaultLevel::kRestartBusiness, "RestartBusiness"},
    {FaultLevel::kFreeRestartNPU, "FreeRestartNPU"},
    {FaultLevel::kRestartNPU, "RestartNPU"},
    {FaultLevel::kPreSeparateNPU, "PreSeparateNPU"},
    {FaultLevel::kSeparateNPU, "SeparateNPU"},
    {FaultLevel::kManuallySeparateNPU, "ManuallySeparateNPU"},
}};

// A file level may name only the code levels (not NormalNPU or ManuallySeparateNPU, which are states).
constexpr std::string_view kFileLevels =
    "NotHandleFault, RestartRequest, RestartBusiness, FreeRestartNPU, RestartNPU, PreSeparateNPU, "
    "SeparateNPU";
constexpr std::size_t kMaxFileBytes = std::size_t{1} << 20;
constexpr int kMaxTimes = 1000;
constexpr long kMaxWindowSeconds = 366L * 86400;

Error at(const std::string& name, const YAML::Node& n, const std::string& what) {
  return Error::invalid(fmt::format("{}:{}: {}", name, n.Mark().line + 1, what));
}

Result<FaultLevel> file_level(const std::string& name, const YAML::Node& n) {
  auto l = n.IsScalar() ? parse_fault_level(n.Scalar()) : Result<FaultLevel>(Error::invalid("not a name"));
  if (!l || *l == FaultLevel::kNormal || *l == FaultLevel::kManuallySeparateNPU)
    return at(name, n,
              fmt::format("'{}' is not a level (one of {})", n.IsScalar() ? n.Scalar() : "?", kFileLevels));
  return *l;
}

Result<long> positive(const std::string& name, const YAML::Node& n, const char* key, long max) {
  long v = 0;
  if (!n.IsScalar() || !YAML::convert<long>::decode(n, v) || v < 1 || v > max)
    return at(name, n, fmt::format("escalation.{} must be a whole number from 1 to {}", key, max));
  return v;
}

Status read_escalation(const std::string& name, const YAML::Node& n, Escalation& out) {
  if (!n.IsMap()) return at(name, n, "escalation must be a mapping with times and window_seconds");
  for (const auto& kv : n) {
    const std::string key = kv.first.Scalar();
    if (key == "times") {
      ASCEND_ASSIGN(const long t, positive(name, kv.second, "times", kMaxTimes), "");
      out.times = static_cast<int>(t);
    } else if (key == "window_seconds") {
      ASCEND_ASSIGN(const long w, positive(name, kv.second, "window_seconds", kMaxWindowSeconds), "");
      out.window = std::chrono::seconds(w);
    } else {
      return at(name, kv.first, "unknown key escalation." + key + " (times, window_seconds)");
    }
  }
  return {};
}

// One level's list; a code already read gets the more severe of its levels.
Status read_codes(const std::string& name, const YAML::Node& list, FaultLevel level,
                  std::map<std::uint32_t, FaultLevel>& out) {
  if (!list.IsSequence()) return at(name, list, "the codes of a level must be a list");
  for (const auto& c : list) {
    auto code = c.IsScalar() ? npu::parse_fault_code(c.Scalar()) : Result<std::uint32_t>(Error::invalid(""));
    if (!code)
      return at(name, c,
                fmt::format("'{}' is not a fault code (hexadecimal, at most 8 digits, as npu-smi shows it)",
                            c.IsScalar() ? c.Scalar() : "?"));
    auto [it, added] = out.emplace(*code, level);
    if (!added) it->second = std::max(it->second, level);
  }
  return {};
}

Status read_levels(const std::string& name, const YAML::Node& n, std::map<std::uint32_t, FaultLevel>& out) {
  if (!n.IsMap()) return at(name, n, "levels must be a mapping of level name to a list of codes");
  for (const auto& kv : n) {
    ASCEND_ASSIGN(const FaultLevel level, file_level(name, kv.first), "");
    ASCEND_CHECK(read_codes(name, kv.second, level, out), "");
  }
  return {};
}

Result<YAML::Node> load_yaml(const std::string& text, const std::string& name) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Error::invalid(fmt::format("{}:{}: not YAML: {}", name, e.mark.line + 1, e.msg));
  }
}

Result<FileTable> read_file_table(const std::string& text, const std::string& name) {
  ASCEND_ASSIGN(const YAML::Node root, load_yaml(text, name), "");
  if (!root.IsMap())
    return at(name, root, "a fault-code table is a mapping (default_level, escalation, levels)");
  FileTable t;
  for (const auto& kv : root) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    if (key == "default_level") {
      ASCEND_ASSIGN(t.default_level, file_level(name, kv.second), "");
    } else if (key == "escalation") {
      Escalation e;
      ASCEND_CHECK(read_escalation(name, kv.second, e), "");
      t.escalation = e;
    } else if (key == "levels") {
      ASCEND_CHECK(read_levels(name, kv.second, t.codes), "");
    } else {
      return at(name, kv.first, "unknown key '" + key + "' (default_level, escalation, levels)");
    }
  }
  return t;
}

}  // namespace

std::string_view to_string(FaultLevel l) {
  for (const auto& [level, name] : kLevelNames)
    if (level == l) return name;
  return "?";
}

Result<FaultLevel> parse_fault_level(std::string_view s) {
  for (const auto& [level, name] : kLevelNames)
    if (name == s) return level;
  return Error::invalid(fmt::format("'{}' is not a fault level (one of {})", s, kFileLevels));
}

bool makes_unhealthy(FaultLevel l) {
  return l >= FaultLevel::kPreSeparateNPU;
}

const FaultTable& FaultTable::builtin() {
  // The shipped file is checked by the tests; a build whose file does not parse fails them, not the plugin.
  static const FaultTable table = [] {
    auto t = parse(builtin_fault_codes(), "fault-codes.yaml (built in)");
    if (t) return std::move(t).value();
    spdlog::critical("{}; every fault code is SeparateNPU", t.error().message());
    return FaultTable{};
  }();
  return table;
}

Result<FaultTable> FaultTable::parse(const std::string& text, const std::string& name) {
  ASCEND_ASSIGN(FileTable f, read_file_table(text, name), "");
  return over(FaultTable{}, std::move(f));
}

Result<FaultTable> FaultTable::load_over(const FaultTable& base, const std::string& path) {
  ASCEND_ASSIGN(const std::string text, read_file(path, kMaxFileBytes), "fault-code table");
  ASCEND_ASSIGN(FileTable f, read_file_table(text, path), "");
  return over(base, std::move(f));
}

FaultTable FaultTable::over(FaultTable base, FileTable f) {
  for (const auto& [code, level] : f.codes) base.codes_[code] = level;
  if (f.default_level) base.default_ = *f.default_level;
  if (f.escalation) base.escalation_ = *f.escalation;
  return base;
}

FaultLevel FaultTable::level(std::uint32_t code) const {
  const auto it = codes_.find(code);
  return it == codes_.end() ? default_ : it->second;
}

FaultLevel FaultTable::level(const npu::Fault& f) const {
  const auto it = codes_.find(f.code);
  if (it != codes_.end()) return it->second;
  return f.severity <= npu::Health::kWarning ? FaultLevel::kNotHandleFault : default_;
}

// ---- FaultGrades ----

FaultLevel FaultGrades::code_level(const npu::Chip& c) const {
  FaultLevel l = FaultLevel::kNormal;
  for (const auto& f : c.faults) l = std::max(l, table_.level(f));
  return l;
}

FaultLevel FaultGrades::level(int phy_id) const {
  if (isolated_.count(phy_id) != 0) return FaultLevel::kManuallySeparateNPU;
  for (const auto& c : raw_.chips)
    if (c.phy_id == phy_id) return code_level(c);
  return FaultLevel::kNormal;
}

std::map<int, FaultLevel> FaultGrades::levels() const {
  std::map<int, FaultLevel> out;
  for (const auto& c : raw_.chips) out[c.phy_id] = level(c.phy_id);
  for (const auto& [phy, why] : isolated_) out[phy] = FaultLevel::kManuallySeparateNPU;
  return out;
}

std::vector<LevelChange> FaultGrades::diff(const std::map<int, FaultLevel>& before,
                                           const std::map<int, FaultLevel>& after, const std::string& why,
                                           const std::map<int, std::string>& whys) {
  std::vector<LevelChange> out;
  for (const auto& [phy, to] : after) {
    const auto b = before.find(phy);
    const FaultLevel from = b == before.end() ? FaultLevel::kNormal : b->second;
    if (from == to) continue;
    const auto w = whys.find(phy);
    out.push_back({phy, from, to, w != whys.end() ? w->second : why});
  }
  return out;
}

bool FaultGrades::count_faults(const npu::Chip& c, const npu::Chip* before, Clock::time_point now) {
  auto& seen = history_[c.phy_id];
  for (const auto& f : c.faults) {
    const bool was = before != nullptr && std::any_of(before->faults.begin(), before->faults.end(),
                                                      [&](const npu::Fault& b) { return b.code == f.code; });
    if (!was && table_.level(f) > FaultLevel::kNotHandleFault) seen.push_back(now);
  }
  while (!seen.empty() && now - seen.front() > table_.escalation().window) seen.pop_front();
  return static_cast<int>(seen.size()) >= table_.escalation().times;
}

std::vector<LevelChange> FaultGrades::observe(const npu::DeviceSnapshot& raw, Clock::time_point now) {
  const auto before = levels();
  std::map<int, std::string> whys;
  for (const auto& c : raw.chips) {
    const auto prev = std::find_if(raw_.chips.begin(), raw_.chips.end(),
                                   [&](const npu::Chip& p) { return p.phy_id == c.phy_id; });
    const bool isolates = count_faults(c, prev == raw_.chips.end() ? nullptr : &*prev, now);
    if (isolates && isolated_.count(c.phy_id) == 0) {
      isolated_[c.phy_id] = whys[c.phy_id] =
          fmt::format("{} faults within {} s", history_[c.phy_id].size(), table_.escalation().window.count());
    }
  }
  raw_ = raw;
  for (const auto& c : raw_.chips) {
    if (whys.count(c.phy_id) != 0 || c.faults.empty()) continue;
    std::string codes;
    for (const auto& f : c.faults)
      codes += fmt::format("{}{:08X} ({})", codes.empty() ? "" : ", ", f.code, to_string(table_.level(f)));
    whys[c.phy_id] = "code " + codes;
  }
  return diff(before, levels(), "its faults cleared", whys);
}

std::vector<LevelChange> FaultGrades::isolate(int phy_id, const std::string& why) {
  const auto before = levels();
  isolated_.emplace(phy_id, why);
  return diff(before, levels(), why, {});
}

std::vector<LevelChange> FaultGrades::clear(int phy_id) {
  const auto before = levels();
  isolated_.erase(phy_id);
  history_.erase(phy_id);
  auto after = levels();
  if (after.count(phy_id) == 0) after[phy_id] = FaultLevel::kNormal;
  return diff(before, after, "isolation cleared by an operator", {});
}

std::set<int> FaultGrades::isolated() const {
  std::set<int> out;
  for (const auto& [phy, why] : isolated_) out.insert(phy);
  return out;
}

std::vector<ChipFaults> FaultGrades::chips() const {
  std::vector<ChipFaults> out;
  for (const auto& [phy, l] : levels()) {
    if (l == FaultLevel::kNormal) continue;
    ChipFaults f{phy, l, {}};
    for (const auto& c : raw_.chips)
      if (c.phy_id == phy)
        for (const auto& x : c.faults) f.codes.push_back(x.code);
    out.push_back(std::move(f));
  }
  return out;
}

npu::DeviceSnapshot FaultGrades::view() const {
  npu::DeviceSnapshot v = raw_;
  for (auto& c : v.chips) {
    const bool isolated = isolated_.count(c.phy_id) != 0;
    for (auto& f : c.faults)
      f.severity =
          isolated || makes_unhealthy(table_.level(f)) ? npu::Health::kCritical : npu::Health::kWarning;
    if (isolated && c.faults.empty()) c.faults.push_back({0, npu::Health::kCritical});
  }
  return v;
}

}  // namespace ascend::plugin
