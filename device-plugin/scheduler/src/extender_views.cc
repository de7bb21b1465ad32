// The extender's JSON views: the cluster with every chip's holder (the dashboard's data), a job's placement,
// rank table and launch env, and the counts the metrics report.
#include <algorithm>
#include <bit>

#include "ascend/scheduler/extender.h"
#include "ascend/topology/ranktable.h"
#include "extender_internal.h"

namespace ascend::scheduler {

using detail::idx;
using nlohmann::ordered_json;

Result<ordered_json> Scheduler::placement_of(const std::string& ns, const std::string& job) const {
  auto it = jobs_.find(ns + "/" + job);
  if (it == jobs_.end()) return Error::not_found("no job " + ns + "/" + job);
  ordered_json j = topology::to_json(*cluster_, it->second.placement);
  ordered_json pods = ordered_json::array();
  for (std::size_t i = 0; i < it->second.slots.size(); ++i) {
    const Slot& s = it->second.slots[i];
    pods.push_back({{"index", i},
                    {"node", cluster_->nodes[idx(s.node)].name},
                    {"chips", s.phys},
                    {"state", to_string(s.state)},
                    {"pod", s.pod}});
  }
  j["pods"] = std::move(pods);
  return j;
}

Result<ordered_json> Scheduler::ranktable_of(const std::string& ns, const std::string& job) const {
  auto it = jobs_.find(ns + "/" + job);
  if (it == jobs_.end()) return Error::not_found("no job " + ns + "/" + job);
  return topology::rank_table(*cluster_, it->second.placement);
}

Result<std::map<std::string, std::string>> Scheduler::env_of(const std::string& ns, const std::string& job,
                                                             int pod) const {
  auto it = jobs_.find(ns + "/" + job);
  if (it == jobs_.end()) return Error::not_found("no job " + ns + "/" + job);
  if (pod < 0 || pod >= static_cast<int>(it->second.slots.size())) {
    return Error::invalid("pod " + std::to_string(pod) + " is outside the job's " +
                          std::to_string(it->second.slots.size()) + " pods");
  }
  return grant_of(it->second, pod).env;
}

ordered_json Scheduler::job_view(const JobRecord& j) const {
  int bound = 0;
  int allocated = 0;
  for (const Slot& s : j.slots) {
    bound += s.state == SlotState::kBound || s.state == SlotState::kAllocated ? 1 : 0;
    allocated += s.state == SlotState::kAllocated ? 1 : 0;
  }
  const auto& e = j.placement.eval;
  return {{"namespace", j.ns},
          {"name", j.spec.name},
          {"tp", j.spec.tp},
          {"pp", j.spec.pp},
          {"dp", j.spec.dp},
          {"pods", j.spec.pods},
          {"chips_per_pod", j.chips_per_pod},
          {"bound", bound},
          {"allocated", allocated},
          {"cost", {{"tp", e.cost.tp}, {"pp", e.cost.pp}, {"dp", e.cost.dp}, {"total", e.cost.total}}},
          {"tp_groups_outside_hccs", e.tp_groups_outside_hccs},
          {"state", to_string(j.state)},
          {"restarts", j.restarts}};
}

Result<ordered_json> Scheduler::status_of(const std::string& ns, const std::string& job) const {
  auto it = jobs_.find(ns + "/" + job);
  if (it == jobs_.end()) return Error::not_found("no job " + ns + "/" + job);
  const JobRecord& j = it->second;
  ordered_json v = job_view(j);
  v["since_ms"] = detail::ms_of(j.state_since);
  v["why"] = j.state_why;
  v["recovery"] = j.spec.recovery;
  v["max_restarts"] = j.spec.max_restarts;
  v["faults"] = detail::faults_json<ordered_json>(j.faults);
  // The last recovery's placement against the one the fault made it leave (issue 23).
  if (j.cost_before_fault >= 0) v["cost_before_fault"] = j.cost_before_fault;
  if (j.cost_after_recovery >= 0) v["cost_after_recovery"] = j.cost_after_recovery;
  return v;
}

ordered_json Scheduler::cluster_view() const {
  // Who holds each chip: (node, slot) -> (job view index, pod, rank, tp group).
  struct Owner {
    std::string job, pod, state;
    int rank = -1, tp_group = -1;
  };
  std::map<std::pair<int, int>, Owner> owners;
  for (const auto& [key, j] : jobs_) {
    const auto& p = j.placement;
    for (std::size_t r = 0; r < p.chips.size(); ++r) {
      int pod_i = static_cast<int>(r) / std::max(1, p.pod_size);
      const Slot& s = j.slots[idx(pod_i)];
      if (!holds(s.state)) continue;
      int rank = static_cast<int>(r);
      auto c = topology::coord_of(j.job(), rank);
      int group = c.p * j.spec.dp + c.d;  // one id per TP group of the job
      owners[{p.chips[r].node, p.chips[r].slot}] = {key, s.pod, std::string(to_string(s.state)), rank, group};
    }
  }
  for (const auto& [key, pr] : pods_) {
    for (int phy : pr.slot.phys) {
      owners[{pr.slot.node, cluster_->type_of(pr.slot.node).slot_of_phy(phy)}] = {
          "", key, std::string(to_string(pr.slot.state)), -1, -1};
    }
  }
  ordered_json nodes = ordered_json::array();
  for (std::size_t n = 0; n < cluster_->nodes.size(); ++n) {
    const auto& node = cluster_->nodes[n];
    const auto& t = cluster_->type_of(static_cast<int>(n));
    const NodeState& st = nodes_[n];
    ordered_json chips = ordered_json::array();
    for (int s = 0; s < t.size; ++s) {
      ordered_json c = {{"phy", t.phy[idx(s)]}, {"domain", t.domain[idx(s)]}};
      bool sick = (st.unhealthy >> s & 1) != 0;
      auto o = owners.find({static_cast<int>(n), s});
      // A chip a DRA ResourceClaim holds (put_claimed) is in use, as one the plugin reports busy.
      std::string state = o != owners.end()                        ? o->second.state
                          : ((st.busy | st.claimed) >> s & 1) != 0 ? "busy"
                          : sick                                   ? "unhealthy"
                                                                   : "free";
      c["state"] = state;
      c["unhealthy"] = sick;
      if ((st.isolated >> s & 1) != 0) c["isolated"] = true;  // ManuallySeparateNPU, until cleared
      if (idx(s) < st.load.size()) {                          // the plugin's telemetry, when it sends it
        const auto& l = st.load[idx(s)];
        if (l.aicore_pct >= 0) c["aicore_pct"] = l.aicore_pct;
        if (l.hbm_total_mb > 0 && l.hbm_used_mb >= 0) {
          c["hbm_used_mb"] = l.hbm_used_mb;
          c["hbm_total_mb"] = l.hbm_total_mb;
        }
      }
      if (o != owners.end()) {
        if (!o->second.job.empty()) c["job"] = o->second.job;
        c["pod"] = o->second.pod;
        if (o->second.rank >= 0) {
          c["rank"] = o->second.rank;
          c["tp_group"] = o->second.tp_group;
        }
      }
      chips.push_back(std::move(c));
    }
    ordered_json nv = {{"name", node.name},
                       {"leaf", cluster_->leaves[idx(node.leaf)]},
                       {"spine", cluster_->spines[idx(node.spine)]},
                       {"profile", cluster_->type_names[idx(node.type)]},
                       {"resource", t.host.resource_name},
                       {"reported", st.reported}};
    if (st.absent) nv["absent"] = true;  // the API server has no such Node: nothing is offered on it
    nv["chips"] = std::move(chips);
    nodes.push_back(std::move(nv));
  }
  ordered_json jobs = ordered_json::array();
  for (const auto& [key, j] : jobs_) jobs.push_back(job_view(j));
  ordered_json pods = ordered_json::array();
  for (const auto& [key, p] : pods_) {
    pods.push_back({{"namespace", p.ns},
                    {"name", p.slot.pod},
                    {"node", cluster_->nodes[idx(p.slot.node)].name},
                    {"chips", p.slot.phys},
                    {"state", to_string(p.slot.state)}});
  }
  Counts k = counts();
  return {
      {"name", cluster_->name},
      {"chips", {{"free", k.free}, {"used", k.used}, {"unhealthy", k.unhealthy}, {"isolated", k.isolated}}},
      {"nodes", std::move(nodes)},
      {"jobs", std::move(jobs)},
      {"pods", std::move(pods)}};
}

Scheduler::Counts Scheduler::counts() const {
  Counts c;
  for (std::size_t n = 0; n < nodes_.size(); ++n) {
    const NodeState& s = nodes_[n];
    std::uint64_t all = cluster_->type_of(static_cast<int>(n)).all();
    c.unhealthy += std::popcount(s.unhealthy & all);
    c.isolated += std::popcount(s.isolated & all);
    c.used += std::popcount((s.busy | s.held | s.claimed) & ~s.unhealthy & all);
    c.free += std::popcount(free_mask(static_cast<int>(n)));
  }
  c.jobs = static_cast<int>(jobs_.size());
  for (const auto& [key, j] : jobs_) {
    bool pending = std::any_of(j.slots.begin(), j.slots.end(), [](const Slot& s) {
      return s.state == SlotState::kReserved || s.state == SlotState::kBound;
    });
    c.pending_jobs += pending ? 1 : 0;
    c.running_jobs += j.state == JobState::kRunning ? 1 : 0;
    c.recovering_jobs += j.state == JobState::kRecovering ? 1 : 0;
    c.failed_jobs += j.state == JobState::kFailed ? 1 : 0;
  }
  c.placed = placed_;
  c.refused = refused_;
  return c;
}

}  // namespace ascend::scheduler
