// The extender's state file: everything that is not the cluster file (the plugins' last reports, jobs with
// their placements and slots, pods without a job), written by save() and read back, field by field with
// type checks, by load(): a corrupt file is an error naming the field, never an exception.
#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "ascend/scheduler/extender.h"
#include "ascend/topology/cost.h"
#include "extender_internal.h"

namespace ascend::scheduler {

using detail::idx;
using nlohmann::json;

using detail::faults_json;
using detail::ms_of;

namespace {

Clock::time_point time_of(long long ms) {
  return Clock::time_point(std::chrono::milliseconds(ms));
}

}  // namespace

namespace {

json slot_json(const topology::Cluster& c, const Slot& s) {
  return {{"node", c.nodes[idx(s.node)].name},
          {"chips", s.phys},
          {"state", to_string(s.state)},
          {"pod", s.pod},
          {"uid", s.uid},
          {"since_ms", ms_of(s.since)}};
}

// Typed reads from a saved state: a wrong type is an error naming the field, never an exception.
struct Reader {
  const json& j;
  std::string where;
  Result<const json*> get(const char* key, json::value_t type) const {
    auto it = j.find(key);
    if (it == j.end()) return Error::invalid(where + "." + key + ": missing");
    bool ok = it->type() == type || (type == json::value_t::number_integer && it->is_number_integer());
    if (!ok) return Error::invalid(where + "." + key + ": wrong type");
    return &*it;
  }
  Result<std::string> str(const char* key) const {
    ASCEND_ASSIGN(const json* v, get(key, json::value_t::string), "");
    return v->get<std::string>();
  }
  Result<long long> num(const char* key) const {
    ASCEND_ASSIGN(const json* v, get(key, json::value_t::number_integer), "");
    return v->get<long long>();
  }
  Result<double> real(const char* key) const {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number())
      return Error::invalid(where + "." + key + ": missing or not a number");
    return it->get<double>();
  }
  Result<std::vector<int>> ints(const char* key) const {
    ASCEND_ASSIGN(const json* v, get(key, json::value_t::array), "");
    std::vector<int> out;
    for (const auto& x : *v) {
      if (!x.is_number_integer()) return Error::invalid(where + "." + key + ": not a list of integers");
      out.push_back(x.get<int>());
    }
    return out;
  }
};

Result<JobState> job_state(const std::string& s) {
  for (auto st : {JobState::kPending, JobState::kRunning, JobState::kRecovering, JobState::kFailed}) {
    if (to_string(st) == s) return st;
  }
  return Error::invalid("unknown job state '" + s + "'");
}

Result<SlotState> slot_state(const std::string& s) {
  for (auto st : {SlotState::kReserved, SlotState::kBound, SlotState::kAllocated, SlotState::kReleased,
                  SlotState::kExpired}) {
    if (to_string(st) == s) return st;
  }
  return Error::invalid("unknown slot state '" + s + "'");
}

}  // namespace

json Scheduler::job_entry(const JobRecord& j) const {
  json ranks = json::array();
  for (const auto& c : j.placement.chips) {
    ranks.push_back({cluster_->nodes[idx(c.node)].name, cluster_->type_of(c.node).phy[idx(c.slot)]});
  }
  json slots = json::array();
  for (const Slot& s : j.slots) slots.push_back(slot_json(*cluster_, s));
  return {{"namespace", j.ns},
          {"name", j.spec.name},
          {"version", j.version},
          {"recovery", j.spec.recovery},
          {"max_restarts", j.spec.max_restarts},
          {"restarts", j.restarts},
          {"state", to_string(j.state)},
          {"state_since_ms", ms_of(j.state_since)},
          {"state_why", j.state_why},
          {"faults", faults_json<json>(j.faults)},
          {"cost_before_fault", j.cost_before_fault},
          {"cost_after_recovery", j.cost_after_recovery},
          {"pods", j.spec.pods},
          {"tp", j.spec.tp},
          {"pp", j.spec.pp},
          {"dp", j.spec.dp},
          {"order", topology::to_string(j.spec.order)},
          {"comm", {{"tp", j.spec.comm.tp}, {"pp", j.spec.comm.pp}, {"dp", j.spec.comm.dp}}},
          {"resource", j.resource},
          {"chips_per_pod", j.chips_per_pod},
          {"placed_ms", ms_of(j.placed_at)},
          {"ranks", std::move(ranks)},
          {"slots", std::move(slots)}};
}

json Scheduler::save() const {
  json nodes = json::object();
  for (std::size_t n = 0; n < nodes_.size(); ++n) {
    const NodeState& s = nodes_[n];
    if (!s.reported) continue;
    nodes[cluster_->nodes[n].name] = {{"busy", phys_of(static_cast<int>(n), s.busy)},
                                      {"unhealthy", phys_of(static_cast<int>(n), s.unhealthy)},
                                      {"reported_ms", ms_of(s.reported_at)}};
  }
  json jobs = json::array();
  for (const auto& [key, j] : jobs_) jobs.push_back(job_entry(j));
  json pods = json::array();
  for (const auto& [key, p] : pods_) {
    json s = slot_json(*cluster_, p.slot);
    s["namespace"] = p.ns;
    s["resource"] = p.resource;
    pods.push_back(std::move(s));
  }
  return {{"schema", 1},
          {"cluster", cluster_->name},
          {"placed", placed_},
          {"refused", refused_},
          {"nodes", std::move(nodes)},
          {"jobs", std::move(jobs)},
          {"pods", std::move(pods)}};
}

namespace {

Result<int> node_named(const topology::Cluster& c, const std::string& name, const std::string& where) {
  int n = c.node_index(name);
  if (n < 0) return Error::invalid(where + ": node " + name + " is not in the cluster file");
  return n;
}

Result<Slot> read_slot(const topology::Cluster& c, const json& j, const std::string& where) {
  if (!j.is_object()) return Error::invalid(where + ": not an object");
  Reader r{j, where};
  Slot s;
  ASCEND_ASSIGN(std::string node, r.str("node"), "");
  ASCEND_ASSIGN(s.node, node_named(c, node, where), "");
  ASCEND_ASSIGN(s.phys, r.ints("chips"), "");
  for (int p : s.phys) {
    if (c.type_of(s.node).slot_of_phy(p) < 0)
      return Error::invalid(fmt::format("{}: {} has no chip {}", where, node, p));
  }
  ASCEND_ASSIGN(std::string state, r.str("state"), "");
  ASCEND_ASSIGN(s.state, slot_state(state), where);
  ASCEND_ASSIGN(s.pod, r.str("pod"), "");
  ASCEND_ASSIGN(s.uid, r.str("uid"), "");
  ASCEND_ASSIGN(long long since, r.num("since_ms"), "");
  s.since = time_of(since);
  return s;
}

}  // namespace

Result<JobRecord> Scheduler::read_job(const json& jj, const std::string& where) const {
  if (!jj.is_object()) return Error::invalid(where + ": not an object");
  Reader r{jj, where};
  JobRecord j;
  ASCEND_ASSIGN(j.ns, r.str("namespace"), "");
  ASCEND_ASSIGN(j.spec.name, r.str("name"), "");
  ASCEND_CHECK(check_dns1123_label(j.ns, where + ".namespace"), "");
  ASCEND_CHECK(check_dns1123_subdomain(j.spec.name, where + ".name", kJobNameMax), "");
  ASCEND_ASSIGN(long long pods, r.num("pods"), "");
  if (auto v = jj.find("version"); v != jj.end()) {
    if (!v->is_number_unsigned()) return Error::invalid(where + ".version: not a count");
    j.version = v->get<std::uint64_t>();
  }
  // Recovery (issue 23); optional, so that records written before it still load.
  if (auto v = jj.find("recovery"); v != jj.end()) {
    if (!v->is_string() || (*v != "pod" && *v != "job" && *v != "none"))
      return Error::invalid(where + ".recovery: not pod, job or none");
    j.spec.recovery = v->get<std::string>();
  }
  for (auto [key, field] :
       {std::pair{"max_restarts", &j.spec.max_restarts}, std::pair{"restarts", &j.restarts}}) {
    auto v = jj.find(key);
    if (v == jj.end()) continue;
    if (!v->is_number_integer() || v->get<std::int64_t>() < 0 || v->get<std::int64_t>() > 100000)
      return Error::invalid(std::string(where) + "." + key + ": not a count");
    *field = v->get<int>();
  }
  // The job's state and faults (issue 23); optional, so that records written before them still load.
  if (jj.contains("state")) {
    ASCEND_ASSIGN(std::string st, r.str("state"), "");
    ASCEND_ASSIGN(j.state, job_state(st), where + ".state");
    ASCEND_ASSIGN(long long since, r.num("state_since_ms"), "");
    j.state_since = time_of(since);
    ASCEND_ASSIGN(j.state_why, r.str("state_why"), "");
  }
  if (auto v = jj.find("faults"); v != jj.end()) {
    if (!v->is_array() || v->size() > JobRecord::kKeptFaults)
      return Error::invalid(where + ".faults: not a list of at most " +
                            std::to_string(JobRecord::kKeptFaults));
    for (std::size_t k = 0; k < v->size(); ++k) {
      const std::string fw = where + ".faults[" + std::to_string(k) + "]";
      if (!(*v)[k].is_object()) return Error::invalid(fw + ": not an object");
      Reader fr{(*v)[k], fw};
      FaultNote f;
      ASCEND_ASSIGN(long long at, fr.num("at_ms"), "");
      f.at = time_of(at);
      ASCEND_ASSIGN(f.node, fr.str("node"), "");
      ASCEND_ASSIGN(f.chips, fr.ints("chips"), "");
      ASCEND_ASSIGN(f.pod, fr.str("pod"), "");
      ASCEND_ASSIGN(f.why, fr.str("why"), "");
      j.faults.push_back(std::move(f));
    }
  }
  // The last recovery's costs (issue 23); optional, so that records written before them still load.
  for (auto [key, field] : {std::pair{"cost_before_fault", &j.cost_before_fault},
                            std::pair{"cost_after_recovery", &j.cost_after_recovery}}) {
    auto v = jj.find(key);
    if (v == jj.end()) continue;
    if (!v->is_number() || !std::isfinite(v->get<double>()))
      return Error::invalid(std::string(where) + "." + key + ": not a number");
    *field = std::max(-1.0, v->get<double>());
  }
  ASCEND_ASSIGN(long long tp, r.num("tp"), "");
  ASCEND_ASSIGN(long long pp, r.num("pp"), "");
  ASCEND_ASSIGN(long long dp, r.num("dp"), "");
  ASCEND_ASSIGN(long long per_pod, r.num("chips_per_pod"), "");
  constexpr long long kMaxDim = 1LL << 20;  // as parse_parallel: the product below cannot overflow
  if (pods < 1 || tp < 1 || pp < 1 || dp < 1 || per_pod < 1 || pods > 100000 || per_pod > 4096 ||
      tp > kMaxDim || pp > kMaxDim || dp > kMaxDim || tp * pp * dp != pods * per_pod) {
    return Error::invalid(where + ": tp x pp x dp is not pods x chips_per_pod");
  }
  j.spec.pods = static_cast<int>(pods);
  j.spec.tp = static_cast<int>(tp);
  j.spec.pp = static_cast<int>(pp);
  j.spec.dp = static_cast<int>(dp);
  j.chips_per_pod = static_cast<int>(per_pod);
  ASCEND_ASSIGN(std::string order, r.str("order"), "");
  if (order != "tp-dp-pp" && order != "tp-pp-dp") return Error::invalid(where + ".order: unknown");
  j.spec.order = order == "tp-dp-pp" ? topology::RankOrder::kTpDpPp : topology::RankOrder::kTpPpDp;
  ASCEND_ASSIGN(const json* comm, r.get("comm", json::value_t::object), "");
  Reader cr{*comm, where + ".comm"};
  ASCEND_ASSIGN(j.spec.comm.tp, cr.real("tp"), "");
  ASCEND_ASSIGN(j.spec.comm.pp, cr.real("pp"), "");
  ASCEND_ASSIGN(j.spec.comm.dp, cr.real("dp"), "");
  ASCEND_ASSIGN(j.resource, r.str("resource"), "");
  ASCEND_ASSIGN(long long placed_ms, r.num("placed_ms"), "");
  j.placed_at = time_of(placed_ms);
  ASCEND_ASSIGN(const json* ranks, r.get("ranks", json::value_t::array), "");
  if (static_cast<long long>(ranks->size()) != tp * pp * dp)
    return Error::invalid(where + ".ranks: wrong count");
  topology::Job job = j.job();
  j.placement.job = j.spec.name;
  j.placement.pod_size = j.chips_per_pod;
  for (const auto& rk : *ranks) {
    if (!rk.is_array() || rk.size() != 2 || !rk[0].is_string() || !rk[1].is_number_integer()) {
      return Error::invalid(where + ".ranks: each is [node, phy]");
    }
    ASCEND_ASSIGN(int n, node_named(*cluster_, rk[0].get<std::string>(), where + ".ranks"), "");
    int slot = cluster_->type_of(n).slot_of_phy(rk[1].get<int>());
    if (slot < 0)
      return Error::invalid(where + ".ranks: no chip " + rk[1].dump() + " on " + rk[0].get<std::string>());
    j.placement.chips.push_back({n, slot});
  }
  j.placement.eval = topology::evaluate(*cluster_, job, topology::groups_of(job), j.placement.chips);
  ASCEND_ASSIGN(const json* slots, r.get("slots", json::value_t::array), "");
  if (static_cast<long long>(slots->size()) != pods) return Error::invalid(where + ".slots: wrong count");
  for (std::size_t k = 0; k < slots->size(); ++k) {
    std::string at = where + ".slots[" + std::to_string(k) + "]";
    ASCEND_ASSIGN(Slot s, read_slot(*cluster_, (*slots)[k], at), "");
    if (static_cast<long long>(s.phys.size()) != per_pod) return Error::invalid(at + ".chips: wrong count");
    if (!s.pod.empty()) ASCEND_CHECK(check_dns1123_subdomain(s.pod, at + ".pod"), "");
    j.slots.push_back(std::move(s));
  }
  return j;
}

Status Scheduler::load(const json& saved) {
  if (!saved.is_object()) return Error::invalid("not a JSON object");
  Reader top{saved, "state"};
  ASCEND_ASSIGN(long long schema, top.num("schema"), "");
  if (schema != 1) return Error::invalid("state.schema: " + std::to_string(schema) + " is not 1");
  Scheduler fresh(cluster_, index_, ttl_);
  ASCEND_ASSIGN(long long placed, top.num("placed"), "");
  ASCEND_ASSIGN(long long refused, top.num("refused"), "");
  fresh.placed_ = static_cast<std::uint64_t>(placed);
  fresh.refused_ = static_cast<std::uint64_t>(refused);
  ASCEND_ASSIGN(const json* nodes, top.get("nodes", json::value_t::object), "");
  for (const auto& [name, v] : nodes->items()) {
    std::string where = "state.nodes." + name;
    ASCEND_ASSIGN(int n, node_named(*cluster_, name, where), "");
    if (!v.is_object()) return Error::invalid(where + ": not an object");
    Reader r{v, where};
    ASCEND_ASSIGN(auto busy, r.ints("busy"), "");
    ASCEND_ASSIGN(auto sick, r.ints("unhealthy"), "");
    ASCEND_ASSIGN(long long at, r.num("reported_ms"), "");
    NodeState& s = fresh.nodes_[idx(n)];
    s.busy = mask_of(n, busy);
    s.unhealthy = mask_of(n, sick);
    s.reported = true;
    s.reported_at = time_of(at);
  }
  ASCEND_ASSIGN(const json* jobs, top.get("jobs", json::value_t::array), "");
  for (std::size_t i = 0; i < jobs->size(); ++i) {
    ASCEND_ASSIGN(JobRecord j, read_job((*jobs)[i], "state.jobs[" + std::to_string(i) + "]"), "");
    for (const Slot& sl : j.slots) {
      if (holds(sl.state)) fresh.hold(sl);
    }
    fresh.jobs_.emplace(j.key(), std::move(j));
  }
  ASCEND_ASSIGN(const json* pods, top.get("pods", json::value_t::array), "");
  for (std::size_t i = 0; i < pods->size(); ++i) {
    std::string where = "state.pods[" + std::to_string(i) + "]";
    ASCEND_ASSIGN(Slot s, read_slot(*cluster_, (*pods)[i], where), "");
    Reader r{(*pods)[i], where};
    PodRecord p;
    ASCEND_ASSIGN(p.ns, r.str("namespace"), "");
    ASCEND_ASSIGN(p.resource, r.str("resource"), "");
    p.slot = std::move(s);
    if (holds(p.slot.state)) fresh.hold(p.slot);
    fresh.pods_.emplace(p.ns + "/" + p.slot.pod, std::move(p));
  }
  // The chips DRA claims hold are the API server's, not the state file's (put_claimed): they stay.
  for (std::size_t n = 0; n < nodes_.size(); ++n) fresh.nodes_[n].claimed = nodes_[n].claimed;
  fresh.changes_ = changes_ + 1;
  *this = std::move(fresh);
  return ok_status();
}

}  // namespace ascend::scheduler
