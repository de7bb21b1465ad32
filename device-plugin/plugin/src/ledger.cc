#include "ascend/plugin/ledger.h"

#include <algorithm>
#include <charconv>

namespace ascend::plugin {

namespace {
constexpr std::string_view kTokenPrefix = "npu-core-";
}  // namespace

std::string Ledger::token_id(int phy, int core) {
  return std::string(kTokenPrefix) + std::to_string(phy) + "-" + std::to_string(core);
}

int Ledger::token_phy(const std::string& token) {
  if (token.rfind(kTokenPrefix, 0) != 0) return -1;
  const char* first = token.data() + kTokenPrefix.size();
  const char* last = token.data() + token.size();
  int phy = -1;
  auto [p, ec] = std::from_chars(first, last, phy);
  if (ec != std::errc() || p == first || p == last || *p != '-') return -1;
  int core = -1;
  auto [q, ec2] = std::from_chars(p + 1, last, core);
  if (ec2 != std::errc() || q != last || phy < 0 || core < 0) return -1;
  return phy;
}

bool Ledger::has_promises(int phy) const {
  return std::any_of(promises_.begin(), promises_.end(),
                     [phy](const CorePromise& p) { return p.phy == phy; });
}

bool Ledger::held(const std::string& token) const {
  for (const auto& p : promises_) {
    if (std::find(p.tokens.begin(), p.tokens.end(), token) != p.tokens.end()) return true;
  }
  return false;
}

int Ledger::held_on(int phy) const {
  int n = 0;
  for (const auto& p : promises_) {
    for (const auto& t : p.tokens) n += token_phy(t) == phy ? 1 : 0;
  }
  return n;
}

npu::VnpuLoad Ledger::load(const npu::DeviceSnapshot& host, int phy) const {
  npu::VnpuLoad promised;
  for (const auto& p : promises_) {
    if (p.phy != phy) continue;
    if (const auto* t = host.find_template(p.template_name)) promised.add(*t);
  }
  return npu::VnpuLoad::larger(promised, npu::vnpu_load(host.vnpus, host.templates, phy));
}

int Ledger::cores_used(const npu::DeviceSnapshot& host, int phy) const {
  return load(host, phy).aicore;
}

void Ledger::release_tokens(const std::vector<std::string>& tokens) {
  std::erase_if(promises_, [&](const CorePromise& p) {
    return std::any_of(tokens.begin(), tokens.end(), [&](const std::string& t) {
      return std::find(p.tokens.begin(), p.tokens.end(), t) != p.tokens.end();
    });
  });
}

void Ledger::release_whole(const std::vector<int>& phys) {
  for (int phy : phys) whole_.erase(phy);
}

Status Ledger::claim_whole(const std::vector<std::pair<int, std::string>>& chips, Clock::time_point now) {
  std::string busy;
  for (const auto& [phy, id] : chips) {
    if (has_promises(phy)) busy += (busy.empty() ? "" : ", ") + id;
  }
  if (!busy.empty()) return Error(EBUSY, "AICores of " + busy + " are promised to vNPUs");
  for (const auto& [phy, id] : chips) whole_[phy] = {id, now};
  return {};
}

int Ledger::reconcile(const std::map<std::string, std::set<std::string>>& in_use,
                      const std::string& chip_resource, const std::string& core_resource,
                      Clock::time_point now, Clock::duration grace) {
  static const std::set<std::string> kNone;
  auto listed = [&](const std::string& resource) -> const std::set<std::string>& {
    auto it = in_use.find(resource);
    return it == in_use.end() ? kNone : it->second;
  };
  const auto& cores = listed(core_resource);
  const auto& chips = listed(chip_resource);
  int ended = 0;
  ended += static_cast<int>(std::erase_if(promises_, [&](const CorePromise& p) {
    if (now - p.made < grace) return false;
    return std::none_of(p.tokens.begin(), p.tokens.end(),
                        [&](const std::string& t) { return cores.count(t) != 0; });
  }));
  ended += static_cast<int>(std::erase_if(whole_, [&](const auto& kv) {
    return now - kv.second.made >= grace && chips.count(kv.second.id) == 0;
  }));
  return ended;
}

}  // namespace ascend::plugin
