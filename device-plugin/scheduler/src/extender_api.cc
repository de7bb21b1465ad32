// The scheduler as a cache of the API server: the transitions that follow what the API server says (a pod
// deleted, finished or bound by another replica, a job's ConfigMap, a Node gone). Pure, like extender.cc.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ascend/scheduler/extender.h"
#include "ascend/topology/cost.h"
#include "extender_internal.h"

namespace ascend::scheduler {

using detail::idx;
using nlohmann::json;

namespace {

// A pod that runs (or ran) has been through the plugin's Allocate: its chips are no longer waiting.
SlotState bound_state(const ApiPod& p) {
  return p.phase.empty() || p.phase == "Pending" ? SlotState::kBound : SlotState::kAllocated;
}

}  // namespace

Observed Scheduler::observe_pod(const ApiPod& p, bool gone, Clock::time_point now, std::string* why) {
  if (gone || p.finished()) {
    // release() forgets what passed filter under this name too, unless it is a newer pod's (another uid).
    return release(p.info.ns, p.info.name, now, p.info.uid).ok() ? Observed::kReleased : Observed::kNothing;
  }
  if (p.node.empty() || p.chips.empty()) return Observed::kNothing;  // not bound by us (yet)
  int n = node_index(p.node);
  if (n < 0) return Observed::kNothing;
  if (p.info.job) return adopt_job_pod(p, now, why);
  return adopt_plain_pod(p, n, now, why);
}

Observed Scheduler::adopt_job_pod(const ApiPod& p, Clock::time_point now, std::string* why) {
  auto jt = jobs_.find(p.info.ns + "/" + p.info.job->name);
  if (jt == jobs_.end() || p.info.index < 0 || p.info.index >= static_cast<int>(jt->second.slots.size())) {
    return Observed::kNothing;  // the job's ConfigMap comes later: observe_job adopts its pods then
  }
  JobRecord& j = jt->second;
  Slot& s = j.slots[idx(p.info.index)];
  SlotState want = bound_state(p);
  if (holds(s.state) && s.pod == p.info.name) {
    if (s.state == SlotState::kBound && want == SlotState::kAllocated) {
      s.state = want;
      s.since = now;
      ++j.version;
      ++changes_;
    }
    return Observed::kNothing;
  }
  int n = node_index(p.node);
  bool same_chips = s.node == n && s.phys == p.chips;
  if (!same_chips || (holds(s.state) && !s.pod.empty())) {
    if (why != nullptr) {
      *why = fmt::format("pod {} says it holds {} chips {}, but the record of job {} gives its slot {} to {}",
                         p.info.key(), p.node, fmt::join(p.chips, ","), jt->first, p.info.index,
                         s.pod.empty() ? "chips " + fmt::format("{}", fmt::join(s.phys, ",")) : s.pod);
    }
    return Observed::kConflict;
  }
  if (!holds(s.state)) {
    std::uint64_t want_mask = mask_of(n, s.phys);
    if ((nodes_[idx(n)].held & want_mask) != 0) {
      if (why != nullptr) *why = "chips of pod " + p.info.key() + " are held by another pod";
      return Observed::kConflict;
    }
    hold(s);
  }
  s.state = want;
  s.pod = p.info.name;
  s.uid = p.info.uid;
  s.since = now;
  ++j.version;
  ++changes_;
  seen_.erase(p.info.key());
  settle(j, now);
  return Observed::kAdopted;
}

Observed Scheduler::adopt_plain_pod(const ApiPod& p, int n, Clock::time_point now, std::string* why) {
  const std::string key = p.info.key();
  SlotState want = bound_state(p);
  if (auto it = pods_.find(key); it != pods_.end()) {
    Slot& s = it->second.slot;
    if (s.state == SlotState::kBound && want == SlotState::kAllocated) {
      s.state = want;
      s.since = now;
      ++changes_;
    }
    return Observed::kNothing;
  }
  const auto& t = cluster_->type_of(n);
  for (int phy : p.chips) {
    if (t.slot_of_phy(phy) < 0) {
      if (why != nullptr) *why = fmt::format("pod {}: node {} has no chip {}", key, p.node, phy);
      return Observed::kConflict;
    }
  }
  std::uint64_t mask = mask_of(n, p.chips);
  if ((nodes_[idx(n)].held & mask) != 0) {
    if (why != nullptr) {
      *why = fmt::format("pod {} says it holds {} chips {}, which the scheduler holds for another pod", key,
                         p.node, fmt::join(p.chips, ","));
    }
    return Observed::kConflict;
  }
  PodRecord r{p.info.ns, p.info.resource.empty() ? resource_of(n) : p.info.resource,
              Slot{n, p.chips, want, p.info.name, p.info.uid, now}};
  hold(r.slot);
  pods_.emplace(key, std::move(r));
  seen_.erase(key);
  ++changes_;
  return Observed::kAdopted;
}

Status Scheduler::observe_job(const json& record, Clock::time_point now) {
  ASCEND_ASSIGN(JobRecord j, read_job(record, "job record"), "");
  auto it = jobs_.find(j.key());
  if (it != jobs_.end() && it->second.version >= j.version) return ok_status();
  // The chips the record holds must not be held by anything else (the old record of this job aside).
  std::vector<std::uint64_t> held(nodes_.size(), 0);
  for (const auto& [k, other] : jobs_) {
    if (k == j.key()) continue;
    for (const Slot& s : other.slots) {
      if (holds(s.state)) held[idx(s.node)] |= mask_of(s.node, s.phys);
    }
  }
  for (const auto& [k, p] : pods_) held[idx(p.slot.node)] |= mask_of(p.slot.node, p.slot.phys);
  for (const Slot& s : j.slots) {
    if (holds(s.state) && (held[idx(s.node)] & mask_of(s.node, s.phys)) != 0) {
      return Error(EEXIST, fmt::format("job {}: chips {} of {} are held by another job or pod", j.key(),
                                       fmt::join(s.phys, ","), cluster_->nodes[idx(s.node)].name));
    }
  }
  if (it != jobs_.end()) {
    for (const Slot& s : it->second.slots) {
      if (holds(s.state)) unhold(s);
    }
    jobs_.erase(it);
  }
  // A reservation taken from a record is new here: its TTL runs from now.
  for (Slot& s : j.slots) {
    if (s.state == SlotState::kReserved) s.since = now;
    if (holds(s.state)) hold(s);
  }
  std::string key = j.key();
  jobs_.emplace(key, std::move(j));
  ++changes_;
  forget_if_done(key);
  return ok_status();
}

std::optional<json> Scheduler::job_record(const std::string& ns, const std::string& job) const {
  auto it = jobs_.find(ns + "/" + job);
  if (it == jobs_.end()) return std::nullopt;
  return job_entry(it->second);
}

std::vector<std::string> Scheduler::holders(const std::string& job_key) const {
  std::vector<std::string> out;
  for (const auto& [key, j] : jobs_) {
    if (!job_key.empty() && key != job_key) continue;
    for (const Slot& s : j.slots) {
      if (holds(s.state) && !s.pod.empty()) out.push_back(j.ns + "/" + s.pod);
    }
  }
  if (job_key.empty()) {
    for (const auto& [key, p] : pods_) out.push_back(key);
  }
  return out;
}

Result<std::vector<int>> Scheduler::put_health(const std::string& node, const std::vector<int>& healthy,
                                               const std::vector<int>& unhealthy, Clock::time_point now,
                                               const std::vector<int>& isolated) {
  int n = node_index(node);
  if (n < 0) return Error::not_found("node " + node + " is not in the scheduler's cluster file");
  const auto& t = cluster_->type_of(n);
  std::uint64_t sick = t.all() & ~mask_of(n, healthy);  // a chip not listed healthy is not usable
  sick |= mask_of(n, unhealthy);
  NodeState& s = nodes_[idx(n)];
  // Failed since the last ConfigMap (not since the last report of any kind: the plugin's HTTP report may
  // have told of the same fault first, and the recovery must still happen).
  std::uint64_t turned = sick & ~s.reported_sick;
  s.reported_sick = sick;
  const std::uint64_t iso = mask_of(n, isolated);
  if (s.isolated != iso) ++changes_;
  s.isolated = iso;
  if (!s.reported || s.unhealthy != sick) ++changes_;
  s.unhealthy = sick;
  s.reported = true;
  s.reported_at = now;
  return phys_of(n, turned);
}

std::vector<Scheduler::Recovery> Scheduler::recover(const std::string& node, const std::vector<int>& failed,
                                                    Clock::time_point now, const std::string& why) {
  std::vector<Recovery> out;
  int n = node_index(node);
  if (n < 0 || failed.empty()) return out;
  const std::uint64_t bad = mask_of(n, failed);
  for (auto& [key, j] : jobs_) {
    auto hit = std::find_if(j.slots.begin(), j.slots.end(), [&](const Slot& s) {
      return s.node == n && !s.pod.empty() &&
             (s.state == SlotState::kBound || s.state == SlotState::kAllocated) &&
             (mask_of(n, s.phys) & bad) != 0;
    });
    if (hit == j.slots.end()) continue;  // one recovery per job for one report
    Recovery r{
        j.ns,       j.spec.name, {},   hit->pod, phys_of(n, mask_of(n, hit->phys) & bad), j.spec.recovery,
        j.restarts, false,       false};
    const std::string what = fmt::format("chips {} of {} failed under pod {}{}", fmt::join(r.chips, ","),
                                         node, hit->pod, why.empty() ? "" : " (" + why + ")");
    j.faults.push_back({now, node, r.chips, hit->pod, why});
    if (j.faults.size() > JobRecord::kKeptFaults) j.faults.erase(j.faults.begin());
    if (j.spec.recovery != "none") {
      if (j.restarts >= j.spec.max_restarts) {
        r.exhausted = true;
        if (j.state != JobState::kFailed) {
          r.failed_now = true;
          j.state = JobState::kFailed;
          j.state_since = now;
          j.state_why = fmt::format("{}; max-restarts ({}) spent", what, j.spec.max_restarts);
        }
      } else {
        r.restarts = ++j.restarts;
        if (j.state != JobState::kRecovering) {
          // A fault during a recovery belongs to that recovery: the cost before stays the first fault's.
          j.state_since = now;
          j.cost_before_fault = j.placement.eval.cost.total;
          j.cost_after_recovery = -1;
        }
        j.state = JobState::kRecovering;
        j.state_why = fmt::format("{}; restart {} of {} ({} recovery)", what, j.restarts, j.spec.max_restarts,
                                  j.spec.recovery);
        for (const Slot& o : j.slots) {
          bool goes = j.spec.recovery == "job" ? holds(o.state) : &o == &*hit;
          if (goes && !o.pod.empty()) r.pods.push_back(o.pod);
        }
      }
    }
    ++j.version;
    ++changes_;
    out.push_back(std::move(r));
  }
  return out;
}

void Scheduler::settle(JobRecord& j, Clock::time_point now) {
  if (j.state != JobState::kPending && j.state != JobState::kRecovering) return;
  bool all = std::all_of(j.slots.begin(), j.slots.end(), [](const Slot& s) {
    return (s.state == SlotState::kBound || s.state == SlotState::kAllocated) && !s.pod.empty();
  });
  if (!all) return;
  if (j.state == JobState::kRecovering) {
    const double seconds = std::chrono::duration<double>(now - j.state_since).count();
    recoveries_.push_back(seconds);
    if (recoveries_.size() > 4096) recoveries_.erase(recoveries_.begin());
    j.cost_after_recovery = j.placement.eval.cost.total;
    const Slot& last = *std::max_element(j.slots.begin(), j.slots.end(),
                                         [](const Slot& a, const Slot& b) { return a.since < b.since; });
    recovered_.push_back({j.ns, j.spec.name, last.pod, j.restarts, j.spec.recovery, j.cost_before_fault,
                          j.cost_after_recovery, seconds});
    if (recovered_.size() > kKeptRecovered) recovered_.erase(recovered_.begin());
  }
  j.state = JobState::kRunning;
  j.state_since = now;
  j.state_why.clear();
  ++j.version;
  ++changes_;
}

std::vector<double> Scheduler::take_recoveries() {
  return std::exchange(recoveries_, {});
}

std::vector<Scheduler::Recovered> Scheduler::take_recovered() {
  return std::exchange(recovered_, {});
}

std::optional<Scheduler::Holder> Scheduler::holder_of(const std::string& node, int phy) const {
  int n = node_index(node);
  if (n < 0) return std::nullopt;
  auto has = [&](const Slot& s) {
    return s.node == n && holds(s.state) && !s.pod.empty() &&
           std::find(s.phys.begin(), s.phys.end(), phy) != s.phys.end();
  };
  for (const auto& [key, j] : jobs_) {
    for (const Slot& s : j.slots) {
      if (has(s)) return Holder{j.ns, s.pod, j.spec.name};
    }
  }
  for (const auto& [key, p] : pods_) {
    if (has(p.slot)) return Holder{p.ns, p.slot.pod, ""};
  }
  return std::nullopt;
}

std::map<std::string, std::vector<int>> Scheduler::failed_chips() const {
  std::map<std::string, std::vector<int>> out;
  for (std::size_t n = 0; n < nodes_.size(); ++n) {
    if (nodes_[n].reported_sick != 0)
      out[cluster_->nodes[n].name] = phys_of(static_cast<int>(n), nodes_[n].reported_sick);
  }
  return out;
}

void Scheduler::set_node_present(const std::string& node, bool present) {
  int n = node_index(node);
  if (n < 0) return;
  NodeState& s = nodes_[idx(n)];
  if (s.absent == !present) return;
  s.absent = !present;
  ++changes_;
}

std::string Scheduler::job_of(const std::string& ns, const std::string& pod) const {
  for (const auto& [key, j] : jobs_) {
    if (j.ns != ns) continue;
    for (const Slot& s : j.slots) {
      if (s.pod == pod) return key;
    }
  }
  return {};
}

std::uint64_t Scheduler::job_version(const std::string& ns, const std::string& job) const {
  auto it = jobs_.find(ns + "/" + job);
  return it == jobs_.end() ? 0 : it->second.version;
}

std::optional<Scheduler::Held> Scheduler::held_by(const std::string& ns, const std::string& pod) const {
  if (auto it = pods_.find(ns + "/" + pod); it != pods_.end())
    return Held{it->second.slot.phys, -1, it->second.slot.uid};
  for (const auto& [key, j] : jobs_) {
    if (j.ns != ns) continue;
    for (std::size_t i = 0; i < j.slots.size(); ++i) {
      const Slot& s = j.slots[i];
      if (s.pod == pod && holds(s.state)) return Held{s.phys, static_cast<int>(i) * j.chips_per_pod, s.uid};
    }
  }
  return std::nullopt;
}

}  // namespace ascend::scheduler
