#include "ascend/scheduler/extender.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ascend/scheduler/dra_claims.h"
#include "ascend/topology/choose.h"
#include "ascend/topology/cost.h"
#include "ascend/topology/ranktable.h"
#include "extender_internal.h"

namespace ascend::scheduler {

using detail::idx;

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

std::string join(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

std::string describe(const JobRequest& j, int chips_per_pod) {
  return "tp=" + std::to_string(j.tp) + ",pp=" + std::to_string(j.pp) + ",dp=" + std::to_string(j.dp) +
         " over " + std::to_string(j.pods) + " pods of " + std::to_string(chips_per_pod);
}

Error same_size_waits(const std::string& other, const std::string& node, std::size_t size,
                      const std::string& key) {
  return {EBUSY,
          fmt::format("pod {} on {} waits for its {} chips: {} binds once they are allocated (the kubelet "
                      "cannot tell two reservations of one size apart)",
                      other, node, size, key)};
}

// The node and chips (slot mask) of pod `pod` of a placement.
std::pair<int, std::uint64_t> pod_chips(const topology::Placement& p, int pod) {
  std::uint64_t mask = 0;
  int node = -1;
  for (int k = 0; k < p.pod_size; ++k) {
    const auto& c = p.chips[idx(pod * p.pod_size + k)];
    node = c.node;
    mask |= 1ULL << c.slot;
  }
  return {node, mask};
}

}  // namespace

std::string_view to_string(JobState s) {
  switch (s) {
    case JobState::kPending:
      return "Pending";
    case JobState::kRunning:
      return "Running";
    case JobState::kRecovering:
      return "Recovering";
    case JobState::kFailed:
      return "Failed";
  }
  return "?";
}

std::string_view to_string(SlotState s) {
  switch (s) {
    case SlotState::kReserved:
      return "reserved";
    case SlotState::kBound:
      return "bound";
    case SlotState::kAllocated:
      return "allocated";
    case SlotState::kReleased:
      return "released";
    case SlotState::kExpired:
      return "expired";
  }
  return "reserved";
}

topology::Job JobRecord::job() const {
  topology::Job j;
  j.name = spec.name;
  j.tp = spec.tp;
  j.pp = spec.pp;
  j.dp = spec.dp;
  // In 64 bits (each factor is at most 2^20). A job is placed only when this equals pods x chips per pod
  // (at most 100 000 x 4 096, place_job and load check it), so it fits an int; anything larger is given as
  // INT_MAX, which topology::place refuses, never as a wrapped value.
  j.npus = static_cast<int>(std::min<std::int64_t>(spec.npus(), std::numeric_limits<int>::max()));
  j.order = spec.order;
  j.npus_per_pod = chips_per_pod;
  j.comm = spec.comm;
  return j;
}

// The cluster's node names, looked up 10 000 times per filter and prioritize pair at 5 000 nodes: an open
// addressing table (a hash of 8 bytes at a time, a tag to skip most string compares) instead of
// std::unordered_map's hash of every byte, modulo and chain; and each name's place in name order, with which
// the failed nodes of an answer are put in order (NodeReasons) without comparing names. Immutable: shared by
// snapshots. A name is given once (the cluster file's names are unique; a repeat keeps the first).
// The names are compared in one buffer of their own (about ten bytes each), not in the cluster's Nodes (64
// bytes each, a cache line per name looked up); a node's rank and type sit beside each other for the loops
// over every node of a request.
class Scheduler::NodeIndex {
 public:
  explicit NodeIndex(std::shared_ptr<const topology::Cluster> c) : cluster_(std::move(c)) {
    const auto& nodes = cluster_->nodes;
    std::size_t cap = 16;
    while (cap < 2 * nodes.size()) cap *= 2;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    at_.reserve(nodes.size() + 1);
    for (const auto& n : nodes) {
      at_.push_back(text_.size());
      text_ += n.name;
    }
    at_.push_back(text_.size());
    for (std::size_t n = 0; n < nodes.size(); ++n) {
      if (find(nodes[n].name) >= 0) continue;
      std::uint64_t h = hash(nodes[n].name);
      std::size_t i = h & mask_;
      while (slots_[i].node >= 0) i = (i + 1) & mask_;
      slots_[i] = Slot{static_cast<std::uint32_t>(h >> 32), static_cast<int>(n)};
    }
    std::vector<std::uint32_t> by_name(nodes.size());
    std::iota(by_name.begin(), by_name.end(), 0U);
    std::sort(by_name.begin(), by_name.end(),
              [&](std::uint32_t a, std::uint32_t b) { return nodes[a].name < nodes[b].name; });
    facts_.resize(nodes.size());
    for (std::size_t r = 0; r < by_name.size(); ++r) facts_[by_name[r]].rank = static_cast<std::uint32_t>(r);
    for (std::size_t n = 0; n < nodes.size(); ++n) facts_[n].type = nodes[n].type;
  }

  int find(std::string_view name) const {
    std::uint64_t h = hash(name);
    auto tag = static_cast<std::uint32_t>(h >> 32);
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.node < 0) return -1;
      if (s.tag == tag && name_of(s.node) == name) return s.node;
    }
  }
  // The node's place among the names in name order (NodeReasons::add).
  std::uint32_t rank(int node) const { return facts_[idx(node)].rank; }
  // Its index into Cluster::types.
  int type(int node) const { return facts_[idx(node)].type; }

 private:
  struct Slot {
    std::uint32_t tag = 0;
    int node = -1;
  };
  struct Facts {
    std::uint32_t rank = 0;
    int type = 0;
  };
  std::string_view name_of(int node) const {
    auto n = idx(node);
    return std::string_view(text_).substr(at_[n], at_[n + 1] - at_[n]);
  }
  static std::uint64_t hash(std::string_view s) {
    std::uint64_t h = 0x9e3779b97f4a7c15ULL ^ s.size();
    std::size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      std::uint64_t w = 0;
      std::memcpy(&w, s.data() + i, 8);
      h = (h ^ w) * 0xbf58476d1ce4e5b9ULL;
      h ^= h >> 31;
    }
    std::uint64_t w = 0;
    if (i < s.size() && s.size() >= 8) {
      std::memcpy(&w, s.data() + s.size() - 8, 8);  // the last 8 bytes, overlapping the words before
    } else {
      for (std::size_t k = 0; i + k < s.size(); ++k)
        w |= std::uint64_t{static_cast<unsigned char>(s[i + k])} << (8 * k);
    }
    h = (h ^ w) * 0x94d049bb133111ebULL;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 32);
  }

  std::shared_ptr<const topology::Cluster> cluster_;
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::string text_;             // every name, one after the other
  std::vector<std::size_t> at_;  // where each node's name starts in text_ (and one past the last)
  std::vector<Facts> facts_;
};

Scheduler::Scheduler(topology::Cluster cluster, std::chrono::milliseconds reservation_ttl)
    : Scheduler(std::make_shared<const topology::Cluster>(std::move(cluster)), nullptr, reservation_ttl) {}

Scheduler::Scheduler(std::shared_ptr<const topology::Cluster> cluster, std::shared_ptr<const NodeIndex> index,
                     std::chrono::milliseconds ttl)
    : cluster_(std::move(cluster)),
      index_(index ? std::move(index) : std::make_shared<const NodeIndex>(cluster_)),
      ttl_(ttl),
      nodes_(cluster_->nodes.size()) {
  std::size_t chips = 0;
  for (std::size_t n = 0; n < nodes_.size(); ++n) {
    nodes_[n].busy = cluster_->nodes[n].busy;
    nodes_[n].unhealthy = cluster_->nodes[n].unhealthy;
    chips += static_cast<std::size_t>(cluster_->type_of(static_cast<int>(n)).size);
  }
  seen_cap_ = std::max(kMinSeen, chips);
}

Scheduler Scheduler::snapshot() const {
  Scheduler s(cluster_, index_, ttl_);
  s.nodes_ = nodes_;
  s.jobs_ = jobs_;
  s.pods_ = pods_;
  s.changes_ = changes_;
  s.placed_ = placed_;
  s.refused_ = refused_;
  return s;
}

Result<Scheduler> Scheduler::job_snapshot(const std::string& ns, const std::string& job) const {
  auto it = jobs_.find(ns + "/" + job);
  if (it == jobs_.end()) return Error::not_found("no job " + ns + "/" + job);
  Scheduler s(cluster_, index_, ttl_);
  s.jobs_.emplace(it->first, it->second);
  return s;
}

void Scheduler::remember(const PodInfo& pod, Clock::time_point now) {
  auto it = seen_.find(pod.key());
  if (it == seen_.end() && seen_.size() >= seen_cap_) {
    // Full: forget the oldest (a scan, only when full; seen_ is bounded, so it is bounded too).
    auto oldest = std::min_element(seen_.begin(), seen_.end(),
                                   [](const auto& a, const auto& b) { return a.second.at < b.second.at; });
    seen_.erase(oldest);
  }
  seen_[pod.key()] = Seen{pod, now};
}

int Scheduler::node_index(std::string_view name) const {
  return index_->find(name);
}

namespace {

// a == b, without a call to memcmp for a name of 8 to 16 bytes (most node names).
bool same_name(std::string_view a, std::string_view b) {
  std::size_t n = a.size();
  if (n != b.size()) return false;
  if (n < 8 || n > 16) return std::memcmp(a.data(), b.data(), n) == 0;
  std::uint64_t x[2], y[2];
  std::memcpy(&x[0], a.data(), 8);
  std::memcpy(&x[1], a.data() + n - 8, 8);
  std::memcpy(&y[0], b.data(), 8);
  std::memcpy(&y[1], b.data() + n - 8, 8);
  return x[0] == y[0] && x[1] == y[1];
}

}  // namespace

const std::vector<int>& Scheduler::indices_of(std::span<const std::string_view> names) const {
  if (names.size() == last_names_.size() &&
      std::equal(names.begin(), names.end(), last_names_.begin(), same_name)) {
    return last_indices_;
  }
  // kube-scheduler's /prioritize gets the nodes its /filter passed: the last list with some left out, in its
  // order. Found by one walk along the last list, which is kept for the next pod's /filter.
  if (names.size() < last_names_.size()) {
    sub_indices_.clear();
    std::size_t j = 0;
    for (const auto& name : names) {
      while (j < last_names_.size() && !same_name(last_names_[j], name)) ++j;
      if (j == last_names_.size()) break;
      sub_indices_.push_back(last_indices_[j++]);
    }
    if (sub_indices_.size() == names.size()) return sub_indices_;
  }
  last_names_.assign(names.begin(), names.end());
  last_indices_.resize(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) last_indices_[i] = node_index(names[i]);
  return last_indices_;
}

// ---- chips ----------------------------------------------------------------------------------------------

std::uint64_t Scheduler::free_mask(int node) const {
  const NodeState& s = nodes_[idx(node)];
  if (s.absent) return 0;
  return cluster_->type_of(node).all() & ~s.busy & ~s.unhealthy & ~s.held & ~s.claimed;
}

std::uint64_t Scheduler::mask_of(int node, const std::vector<int>& phys) const {
  const auto& t = cluster_->type_of(node);
  std::uint64_t m = 0;
  for (int p : phys) {
    int slot = t.slot_of_phy(p);
    if (slot >= 0) m |= 1ULL << slot;
  }
  return m;
}

std::vector<int> Scheduler::phys_of(int node, std::uint64_t mask) const {
  const auto& t = cluster_->type_of(node);
  std::vector<int> out;
  for (int s = 0; s < t.size; ++s) {
    if ((mask >> s & 1) != 0) out.push_back(t.phy[idx(s)]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void Scheduler::hold(const Slot& s) {
  nodes_[idx(s.node)].held |= mask_of(s.node, s.phys);
}

void Scheduler::unhold(const Slot& s) {
  nodes_[idx(s.node)].held &= ~mask_of(s.node, s.phys);
}

const std::string& Scheduler::resource_of(int node) const {
  return cluster_->type_of(node).host.resource_name;
}

std::string Scheduler::no_room(int node, std::uint64_t free, int chips) const {
  const NodeState& s = nodes_[idx(node)];
  int n_free = std::popcount(free);
  std::string why =
      std::to_string(n_free) + " of " + std::to_string(cluster_->type_of(node).size) + " chips free";
  std::vector<std::string> parts;
  if (int u = std::popcount(s.unhealthy); u > 0) parts.push_back(std::to_string(u) + " unhealthy");
  if (int h = std::popcount(s.held & ~s.unhealthy); h > 0)
    parts.push_back(std::to_string(h) + " reserved for pods");
  if (int b = std::popcount(s.busy & ~s.held & ~s.unhealthy); b > 0)
    parts.push_back(std::to_string(b) + " in use");
  if (int d = std::popcount(s.claimed & ~s.busy & ~s.held & ~s.unhealthy); d > 0)
    parts.push_back(std::to_string(d) + " claimed through DRA");
  for (std::size_t i = 0; i < parts.size(); ++i) why += (i == 0 ? " (" : ", ") + parts[i];
  if (!parts.empty()) why += ")";
  return why + "; the pod needs " + std::to_string(chips);
}

Result<std::vector<int>> Scheduler::choose_on(int node, const std::string& resource, int chips) const {
  if (resource_of(node) != resource) {
    return Error::invalid("node has " + resource_of(node) + " chips; the pod asks for " + resource);
  }
  std::uint64_t free = free_mask(node);
  if (std::popcount(free) < chips) return Error(ENOSPC, no_room(node, free, chips));
  return remembered_choice(node, chips, free).chips;
}

const Scheduler::Choice& Scheduler::remembered_choice(int node, int chips, std::uint64_t free) const {
  ChoiceKey key{cluster_->nodes[idx(node)].type, chips, free};
  if (auto it = choices_.find(key); it != choices_.end()) return it->second;
  if (choices_.size() >= 65536) {
    choices_.clear();
    ++choices_generation_;  // the nodes' answers pointed into it
  }
  Choice c{topology::choose(cluster_->type_of(node).host, phys_of(node, free), {}, chips)};
  if (c.chips.ok()) {
    // Fewer whole HCCS domains (or cards) broken, and fewer chips left free (best fit), score higher.
    const auto& t = cluster_->type_of(node);
    std::uint64_t after = free & ~mask_of(node, *c.chips);
    const auto& units = t.domain_masks.size() > 1 ? t.domain_masks : t.card_masks;
    int broken = 0;
    for (std::uint64_t u : units) {
      if ((free & u) == u && (after & u) != u && (after & u) != 0) ++broken;
    }
    int left = (5 * std::popcount(after) + t.size - 1) / t.size;  // 0..5
    c.score = std::clamp(10 - 4 * broken - left, 1, 10);
  }
  return choices_.emplace(key, std::move(c)).first->second;
}

const Scheduler::NodeAnswer& Scheduler::answer_anew(int node, int chips) const {
  if (answers_.nodes.empty()) answers_.nodes.resize(nodes_.size());
  const NodeState& s = nodes_[idx(node)];
  NodeAnswer& a = answers_.nodes[idx(node)];
  a.busy = s.busy;
  a.unhealthy = s.unhealthy;
  a.held = s.held;
  a.claimed = s.claimed;
  a.absent = s.absent;
  a.chips = chips;
  std::uint64_t free = free_mask(node);
  if (std::popcount(free) < chips) {
    a.choice = nullptr;
    a.why = no_room(node, free, chips);
  } else {
    a.choice = &remembered_choice(node, chips, free);
    a.why.clear();
  }
  a.generation = choices_generation_;  // after remembered_choice, which may have cleared the choices
  return a;
}

std::vector<char> Scheduler::types_of(const std::string& resource) const {
  std::vector<char> out(cluster_->types.size());
  for (std::size_t t = 0; t < out.size(); ++t)
    out[t] = cluster_->types[t].host.resource_name == resource ? 1 : 0;
  return out;
}

// ---- filter -------------------------------------------------------------------------------------------

namespace {

std::vector<std::string_view> views_of(const std::vector<std::string>& names) {
  return {names.begin(), names.end()};
}

}  // namespace

FilterResult Scheduler::filter(const PodInfo& pod, const std::vector<std::string>& nodes,
                               Clock::time_point now) {
  return filter(pod, views_of(nodes), now);
}

std::vector<NodeScore> Scheduler::prioritize(const PodInfo& pod,
                                             const std::vector<std::string>& nodes) const {
  return prioritize(pod, views_of(nodes));
}

FilterResult Scheduler::filter(const PodInfo& pod, std::span<const std::string_view> nodes,
                               Clock::time_point now) {
  if (!pod.job && pod.job_error.empty()) {
    FilterResult r = filter_plain(pod, nodes);
    if (!pod.resource.empty()) remember(pod, now);
    return r;
  }
  return filter_job(pod, nodes, now);
}

FilterResult Scheduler::filter_plain(const PodInfo& pod, std::span<const std::string_view> nodes) const {
  FilterResult r;
  if (pod.resource.empty()) {  // vNPUs or nothing of ours: the kubelet and the device plugin decide
    r.passed.assign(nodes.begin(), nodes.end());
    return r;
  }
  const auto bound = pods_.find(pod.key());
  std::uint32_t bound_why = 0;
  if (bound != pods_.end()) {
    bound_why =
        r.unresolvable.reason("pod is bound to " + cluster_->nodes[idx(bound->second.slot.node)].name);
  }
  const std::vector<char> ours = types_of(pod.resource);
  const std::vector<int>& index = indices_of(nodes);
  r.passed.reserve(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    std::string_view name = nodes[i];
    int n = index[i];
    if (n < 0) {
      r.unresolvable.set(name,
                         std::string("node ").append(name).append(" is not in the scheduler's cluster file"));
      continue;
    }
    if (bound != pods_.end()) {  // already bound: only its node
      if (bound->second.slot.node == n) {
        r.passed.emplace_back(name);
      } else {
        r.unresolvable.add(name, bound_why, index_->rank(n));
      }
      continue;
    }
    if (ours[idx(index_->type(n))] == 0) {
      r.unresolvable.add(name, r.unresolvable.reason(choose_on(n, pod.resource, pod.chips).error().message()),
                         index_->rank(n));
      continue;
    }
    const NodeAnswer& a = answer_on(n, pod.chips);
    if (a.choice == nullptr) {
      r.failed.add(name, r.failed.reason(a.why), index_->rank(n));
    } else if (a.choice->chips.ok()) {
      r.passed.emplace_back(name);
    } else {
      const Error& e = a.choice->chips.error();
      auto& to = e.code() == ENOSPC ? r.failed : r.unresolvable;
      to.add(name, to.reason(e.message()), index_->rank(n));
    }
  }
  r.failed.sort();
  r.unresolvable.sort();
  return r;
}

std::string Scheduler::job_mismatch(const JobRecord& j, const PodInfo& pod) const {
  if (j.spec.pods == pod.job->pods && j.spec.tp == pod.job->tp && j.spec.pp == pod.job->pp &&
      j.spec.dp == pod.job->dp && j.spec.order == pod.job->order && j.resource == pod.resource &&
      j.chips_per_pod == pod.chips) {
    return {};
  }
  return "job " + j.key() + " was placed as " + describe(j.spec, j.chips_per_pod) + " " + j.resource +
         "; this pod says " + describe(*pod.job, pod.chips) + " " + pod.resource;
}

FilterResult Scheduler::filter_job(const PodInfo& pod, std::span<const std::string_view> nodes,
                                   Clock::time_point now) {
  FilterResult r;
  // Every node but the cluster's node `target` (-1: none) fails for one reason. A name is that node's when
  // its index is (names and indices are one to one): no name compared.
  auto fail_others = [&](NodeReasons& to, const std::string& why, int target) {
    std::uint32_t reason = to.reason(why);
    to.reserve(nodes.size());
    const std::vector<int>& index = indices_of(nodes);
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      std::string_view name = nodes[i];
      int n = index[i];
      if (n < 0) {
        to.add(name, reason, NodeReasons::kNoRank);
      } else if (n == target) {
        r.passed.emplace_back(name);
      } else {
        to.add(name, reason, index_->rank(n));
      }
    }
    to.sort();
  };
  auto fail_all = [&](const std::string& why, bool resolvable) {
    fail_others(resolvable ? r.failed : r.unresolvable, why, -1);
    return std::move(r);
  };
  if (!pod.job_error.empty()) return fail_all(pod.job_error, false);
  if (!pod.vnpu_resource.empty() && pod.job->pods > 1) {
    return fail_all("a multi-pod job cannot use vNPUs (" + pod.vnpu_resource +
                        "): vNPUs are for small single-pod work; ask for whole chips (" + kResource910 + ")",
                    false);
  }
  if (pod.resource.empty() || pod.chips < 1) {
    // A job pod whose chips come through DRA ResourceClaims arrives with `resource` and `chips` set from
    // its claims (dra_claims.h, read in the API server): here it asked none of either.
    return fail_all(std::string("a pod of a job must ask for whole chips: ") + kResource910 + " or " +
                        kResource310P + ", or ResourceClaims for chips of the DeviceClass " + kDraChipClass +
                        " (read from the API server)",
                    false);
  }
  if (pod.index < 0 || pod.index >= pod.job->pods) {
    return fail_all("pod index " + std::to_string(pod.index) + " is outside the job's " +
                        std::to_string(pod.job->pods) + " pods",
                    false);
  }
  std::string key = pod.ns + "/" + pod.job->name;
  auto it = jobs_.find(key);
  if (it == jobs_.end()) {
    std::vector<int> candidates;
    for (const auto& name : nodes) {
      int n = node_index(name);
      if (n >= 0 && resource_of(n) == pod.resource) candidates.push_back(n);
    }
    auto placed = place_job(pod, candidates, now);
    if (!placed.ok()) {
      ++refused_;
      return fail_all("job " + key + " (" + describe(*pod.job, pod.chips) +
                          ") cannot be placed: " + placed.error().message(),
                      placed.error().code() == ENOSPC);
    }
    ++placed_;
    ++changes_;
    it = jobs_.emplace(key, std::move(*placed)).first;
  }
  JobRecord& j = it->second;
  if (auto why = job_mismatch(j, pod); !why.empty()) return fail_all(why, false);
  if (j.state == JobState::kFailed) {
    return fail_all(fmt::format("job {} failed ({}): its pods are not placed again; its record is kept until "
                                "{} min after the failure, then the job may run anew",
                                key, j.state_why, kRecordHold.count()),
                    false);
  }
  Slot& s = j.slots[idx(pod.index)];
  if (holds(s.state) && !s.pod.empty() && s.pod != pod.name) {
    return fail_all("pod " + std::to_string(pod.index) + " of job " + key + " is already pod " + s.pod,
                    false);
  }
  if (holds(s.state) && s.pod == pod.name && !s.uid.empty() && !pod.uid.empty() && s.uid != pod.uid) {
    // This pod made again (an Indexed Job's or a StatefulSet's, after an eviction) before the watch told of
    // the old one's deletion: the API server has one pod of a name, so the old one is gone, and its chips
    // with it.
    unhold(s);
    s.state = SlotState::kReleased;
    s.pod.clear();
    s.uid.clear();
    s.since = now;
    ++j.version;
    ++changes_;
  }
  if (!holds(s.state)) {  // released or expired: take the same chips again if they are free
    std::uint64_t want = mask_of(s.node, s.phys);
    if ((free_mask(s.node) & want) != want) {
      // Taken since: every pod of the job without chips is placed again around the pods that hold theirs,
      // on the candidates' free chips (as place_job does).
      topology::ClusterState st;
      st.free.assign(cluster_->nodes.size(), 0);
      for (const auto& name : nodes) {
        int n = node_index(name);
        if (n >= 0 && resource_of(n) == j.resource) st.free[idx(n)] = free_mask(n);
      }
      // The other pods without chips whose own chips are free and healthy keep them (a job coming back after
      // a fault returns to its nodes); only the rest is placed again.
      std::vector<bool> keep;
      std::vector<std::uint64_t> claimed(cluster_->nodes.size(), 0);
      for (const Slot& x : j.slots) {
        bool back = false;
        if (!holds(x.state) && &x != &s) {
          std::uint64_t m = mask_of(x.node, x.phys);
          back = (free_mask(x.node) & ~claimed[idx(x.node)] & m) == m;
          if (back) claimed[idx(x.node)] |= m;
        }
        keep.push_back(holds(x.state) || back);
      }
      for (std::size_t n = 0; n < claimed.size(); ++n) st.free[n] &= ~claimed[n];
      auto p = topology::place_missing(*cluster_, st, j.job(), j.placement, keep, topology::Policy::kTopo);
      if (!p.ok()) {
        return fail_all("the chips of pod " + std::to_string(pod.index) + " of job " + key + " (" +
                            cluster_->nodes[idx(s.node)].name + " chips " + join(s.phys) +
                            ") are no longer free and its pods without chips cannot be placed again around "
                            "the others (" +
                            p.error().message() + "); delete the job's pods to place it again",
                        true);
      }
      j.placement = std::move(*p);
      for (std::size_t i = 0; i < j.slots.size(); ++i) {
        if (keep[i] && holds(j.slots[i].state)) continue;
        if (keep[i]) {  // taken back: reserved for the pod with its index
          j.slots[i].state = SlotState::kReserved;
          j.slots[i].pod.clear();
          j.slots[i].uid.clear();
          j.slots[i].since = now;
          hold(j.slots[i]);
          continue;
        }
        auto [node, mask] = pod_chips(j.placement, static_cast<int>(i));
        j.slots[i] = Slot{node, phys_of(node, mask), SlotState::kReserved, "", "", now};
        hold(j.slots[i]);
      }
    } else {
      s.state = SlotState::kReserved;
      s.pod.clear();
      s.uid.clear();
      s.since = now;
      hold(s);
    }
    ++j.version;
    ++changes_;
  }
  remember(pod, now);
  const std::string& target = cluster_->nodes[idx(s.node)].name;
  fail_others(r.unresolvable, "job " + key + " reserves " + target + " for pod " + std::to_string(pod.index),
              s.node);
  return r;
}

Result<JobRecord> Scheduler::place_job(const PodInfo& pod, const std::vector<int>& candidates,
                                       Clock::time_point now) {
  JobRecord j;
  j.ns = pod.ns;
  j.spec = *pod.job;
  j.resource = pod.resource;
  j.chips_per_pod = pod.chips;
  j.placed_at = now;
  j.state_since = now;
  std::int64_t npus = j.spec.npus();
  if (npus != static_cast<std::int64_t>(j.spec.pods) * pod.chips) {
    return Error::invalid("tp x pp x dp = " + std::to_string(npus) + " is not " +
                          std::to_string(j.spec.pods) + " pods x " + std::to_string(pod.chips) + " chips");
  }
  if (candidates.empty()) return Error(ENOSPC, "no candidate node has " + pod.resource + " chips");
  topology::Job job = j.job();
  topology::ClusterState st;
  st.free.assign(cluster_->nodes.size(), 0);
  for (int n : candidates) st.free[idx(n)] = free_mask(n);
  auto p = topology::place(*cluster_, st, job, topology::Policy::kTopo);
  if (!p.ok()) return p.error();
  j.placement = std::move(*p);
  j.slots.resize(idx(j.spec.pods));
  for (int pod_i = 0; pod_i < j.spec.pods; ++pod_i) {
    Slot& s = j.slots[idx(pod_i)];
    std::uint64_t mask = 0;
    for (int k = 0; k < pod.chips; ++k) {
      const auto& c = j.placement.chips[idx(pod_i * pod.chips + k)];
      s.node = c.node;
      mask |= 1ULL << c.slot;
    }
    s.phys = phys_of(s.node, mask);
    s.since = now;
    hold(s);
  }
  return j;
}

// ---- prioritize ---------------------------------------------------------------------------------------

std::vector<int> Scheduler::scores(const PodInfo& pod, std::span<const std::string_view> nodes) const {
  std::vector<int> out(nodes.size(), 0);
  if (pod.job) {  // the reserved node 10, the others 0
    if (auto it = jobs_.find(pod.ns + "/" + pod.job->name);
        it != jobs_.end() && pod.index >= 0 && pod.index < static_cast<int>(it->second.slots.size())) {
      const std::string_view reserved = cluster_->nodes[idx(it->second.slots[idx(pod.index)].node)].name;
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        if (same_name(nodes[i], reserved)) out[i] = 10;
      }
    }
    return out;
  }
  if (pod.resource.empty()) return out;
  // The score of the node-level choice (remembered_choice): fewer whole HCCS domains (or cards) broken, and
  // fewer chips left free, score higher; 0 where the pod does not fit.
  const std::vector<char> ours = types_of(pod.resource);
  const std::vector<int>& index = indices_of(nodes);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (int n = index[i]; n >= 0 && ours[idx(index_->type(n))] != 0) {
      const NodeAnswer& a = answer_on(n, pod.chips);
      if (a.choice != nullptr && a.choice->chips.ok()) out[i] = a.choice->score;
    }
  }
  return out;
}

std::vector<NodeScore> Scheduler::prioritize(const PodInfo& pod,
                                             std::span<const std::string_view> nodes) const {
  const std::vector<int> each = scores(pod, nodes);
  std::vector<NodeScore> out(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    out[i].host.assign(nodes[i]);
    out[i].score = each[i];
  }
  return out;
}

// ---- bind / release / expire --------------------------------------------------------------------------

std::string Scheduler::waiting_same_size(int node, std::size_t size, const std::string& job_key,
                                         const std::string& pod_key, Clock::time_point now) const {
  auto waiting = [&](const Slot& s) {
    return s.node == node && s.state == SlotState::kBound && s.phys.size() == size && now - s.since < ttl_;
  };
  for (const auto& [key, j] : jobs_) {
    if (key == job_key) continue;
    for (const Slot& s : j.slots) {
      if (waiting(s)) return j.ns + "/" + s.pod;
    }
  }
  // Two pods without a job may swap chips of one size harmlessly (neither has ranks): only a job's pod makes
  // a swap matter.
  if (job_key.empty()) return {};
  for (const auto& [key, p] : pods_) {
    if (key != pod_key && waiting(p.slot)) return key;
  }
  return {};
}

Result<std::vector<int>> Scheduler::claimed_chips(int node, const std::string& key,
                                                  const std::vector<int>& claimed, std::size_t want,
                                                  const Slot* self, const JobRecord* job) const {
  const std::string& name = cluster_->nodes[idx(node)].name;
  const auto& t = cluster_->type_of(node);
  std::vector<int> phys = claimed;
  std::sort(phys.begin(), phys.end());
  phys.erase(std::unique(phys.begin(), phys.end()), phys.end());
  for (int p : phys) {
    if (t.slot_of_phy(p) < 0) {
      return Error::invalid(fmt::format("the DRA claims of pod {} name chip {}, which {} ({}) does not have",
                                        key, p, name, t.profile));
    }
  }
  if (phys.size() != want) {
    return Error::invalid(fmt::format("pod {} asks for {} chips; its DRA claims on {} name {} ({})", key,
                                      want, name, phys.size(), join(phys)));
  }
  const std::uint64_t mask = mask_of(node, phys);
  auto taken = [&](const Slot& s) {
    return &s != self && s.node == node && holds(s.state) && (mask_of(node, s.phys) & mask) != 0;
  };
  auto busy = [&](const Slot& s, const std::string& who) {
    std::vector<int> both = phys_of(node, mask_of(node, s.phys) & mask);
    return Error(EBUSY, fmt::format("the DRA claims of pod {} name chips {} of {}, which {} holds", key,
                                    join(both), name, who));
  };
  for (const auto& [jk, j] : jobs_) {
    for (std::size_t i = 0; i < j.slots.size(); ++i) {
      const Slot& s = j.slots[i];
      // kube-scheduler's allocator does not know our plan: it may give the pod chips planned for a pod of its
      // job that is not bound yet, which then takes the chips this pod leaves (move_pod).
      const bool yields = &j == job && s.state == SlotState::kReserved && s.pod.empty();
      if (!taken(s) || yields) continue;
      return busy(s, s.pod.empty() ? fmt::format("the reservation of pod {} of job {}", i, jk)
                                   : fmt::format("pod {}/{} of job {}", j.ns, s.pod, jk));
    }
  }
  for (const auto& [pk, p] : pods_) {
    if (taken(p.slot)) return busy(p.slot, "pod " + pk);
  }
  return phys;
}

void Scheduler::move_pod(JobRecord& j, std::size_t index, std::vector<int> phys) {
  const int n = j.slots[index].node;
  const std::uint64_t want = mask_of(n, phys);
  // The chips the pod leaves: as many as it takes that it did not hold, so enough for every reservation
  // (claimed_chips let no other holder through) that loses some of its chips to it.
  std::uint64_t left = mask_of(n, j.slots[index].phys) & ~want;
  std::vector<std::pair<std::size_t, std::vector<int>>> moves;
  moves.emplace_back(index, std::move(phys));
  for (std::size_t k = 0; k < j.slots.size(); ++k) {
    const Slot& r = j.slots[k];
    const std::uint64_t had = r.node == n && k != index && holds(r.state) ? mask_of(n, r.phys) : 0;
    const std::uint64_t lost = had & want;
    if (lost == 0) continue;
    std::uint64_t got = 0;
    for (int b = 0; b < 64 && std::popcount(got) < std::popcount(lost); ++b) got |= left & (1ULL << b);
    left &= ~got;
    moves.emplace_back(k, phys_of(n, (had & ~lost) | got));
  }
  // Held bits are not counted: every moved slot lets go before any takes.
  for (const auto& m : moves) unhold(j.slots[m.first]);
  const auto& t = cluster_->type_of(n);
  auto& chips = j.placement.chips;
  const std::size_t size = idx(j.placement.pod_size);
  for (auto& [k, to] : moves) {
    Slot& s = j.slots[k];
    s.phys = std::move(to);
    hold(s);
    for (std::size_t c = 0; c < size && c < s.phys.size(); ++c)
      chips[k * size + c] = topology::ChipRef{n, t.slot_of_phy(s.phys[c])};
  }
  topology::Job job = j.job();
  j.placement.eval = topology::evaluate(*cluster_, job, topology::groups_of(job), chips);
}

Status Scheduler::bind(const std::string& ns, const std::string& name, const std::string& uid,
                       const std::string& node, Clock::time_point now, const std::vector<int>* claimed) {
  std::string key = ns + "/" + name;
  int n = node_index(node);
  if (n < 0) return Error::invalid("node " + node + " is not in the scheduler's cluster file");
  // A DRA pod's slot takes its claimed chips (and is allocated: no Allocate comes for it).
  auto take_claimed = [&](JobRecord& j, std::size_t i) -> Status {
    Slot& s = j.slots[i];
    ASCEND_ASSIGN(std::vector<int> phys, claimed_chips(n, key, *claimed, s.phys.size(), &s, &j), "");
    if (s.phys == phys && s.state == SlotState::kAllocated && s.pod == name && s.uid == uid)
      return ok_status();
    move_pod(j, i, std::move(phys));
    s.state = SlotState::kAllocated;
    s.pod = name;
    s.uid = uid;
    s.since = now;
    ++j.version;
    ++changes_;
    settle(j, now);
    return ok_status();
  };
  for (auto& [jk, j] : jobs_) {
    if (j.ns != ns) continue;
    for (std::size_t i = 0; i < j.slots.size(); ++i) {
      Slot& s = j.slots[i];
      if (s.pod != name || !holds(s.state)) continue;
      if (s.node != n) {
        return Error::invalid(
            fmt::format("pod {} is reserved on {}, not {}", key, cluster_->nodes[idx(s.node)].name, node));
      }
      if (claimed != nullptr) return take_claimed(j, i);  // a retry, perhaps with other claimed chips
      return ok_status();                                 // bound already (a retry)
    }
  }
  auto seen = seen_.find(key);
  if (auto it = pods_.find(key); it != pods_.end()) {
    Slot& s = it->second.slot;
    if (s.node != n) {
      return Error::invalid("pod " + key + " is bound to " + cluster_->nodes[idx(s.node)].name);
    }
    if (claimed != nullptr) {  // a retry, perhaps with other claimed chips
      ASCEND_ASSIGN(std::vector<int> phys, claimed_chips(n, key, *claimed, s.phys.size(), &s, nullptr), "");
      if (s.phys != phys || s.state != SlotState::kAllocated) {
        unhold(s);
        s.phys = std::move(phys);
        s.state = SlotState::kAllocated;
        s.since = now;
        hold(s);
        ++changes_;
      }
    }
    return ok_status();
  }
  if (seen == seen_.end()) {
    return Error::invalid("pod " + key +
                          " is unknown: it did not pass this extender's filter (or it expired)");
  }
  const PodInfo& pod = seen->second.pod;
  if (pod.job) {
    auto jt = jobs_.find(ns + "/" + pod.job->name);
    if (jt == jobs_.end())
      return Error::invalid("the reservation of job " + ns + "/" + pod.job->name + " is gone (expired)");
    Slot& s = jt->second.slots[idx(pod.index)];
    if (!holds(s.state)) {
      return Error::invalid("the reservation of pod " + std::to_string(pod.index) + " of job " + jt->first +
                            " " + std::string(to_string(s.state)));
    }
    if (s.node != n) {
      return Error::invalid("pod " + key + " is reserved on " + cluster_->nodes[idx(s.node)].name + ", not " +
                            node);
    }
    if (claimed != nullptr) {
      ASCEND_CHECK(take_claimed(jt->second, idx(pod.index)), "");
      seen_.erase(seen);
      return ok_status();
    }
    if (auto other = waiting_same_size(n, s.phys.size(), jt->first, key, now); !other.empty()) {
      return same_size_waits(other, node, s.phys.size(), key);
    }
    s.state = SlotState::kBound;
    s.pod = name;
    s.uid = uid;
    s.since = now;
    ++jt->second.version;
    ++changes_;
    settle(jt->second, now);
  } else if (claimed != nullptr) {
    if (resource_of(n) != pod.resource) {
      return Error::invalid("pod " + key + " on " + node + ": node has " + resource_of(n) +
                            " chips; the pod asks for " + pod.resource);
    }
    ASCEND_ASSIGN(std::vector<int> phys,
                  claimed_chips(n, key, *claimed, static_cast<std::size_t>(pod.chips), nullptr, nullptr), "");
    PodRecord r{ns, pod.resource, Slot{n, std::move(phys), SlotState::kAllocated, name, uid, now}};
    hold(r.slot);
    pods_.emplace(key, std::move(r));
    ++changes_;
  } else {
    if (auto other = waiting_same_size(n, static_cast<std::size_t>(pod.chips), "", key, now);
        !other.empty()) {
      return same_size_waits(other, node, static_cast<std::size_t>(pod.chips), key);
    }
    auto c = choose_on(n, pod.resource, pod.chips);
    if (!c.ok()) return c.error().context("pod " + key + " on " + node);
    PodRecord r{ns, pod.resource, Slot{n, *c, SlotState::kBound, name, uid, now}};
    hold(r.slot);
    pods_.emplace(key, std::move(r));
    ++changes_;
  }
  seen_.erase(seen);
  return ok_status();
}

void Scheduler::unbind(const std::string& ns, const std::string& name, Clock::time_point now) {
  std::string key = ns + "/" + name;
  ++changes_;
  if (auto it = pods_.find(key); it != pods_.end()) {
    unhold(it->second.slot);
    pods_.erase(it);
    return;
  }
  for (auto& [jk, j] : jobs_) {
    if (j.ns != ns) continue;
    for (Slot& s : j.slots) {
      if (s.pod == name && s.state == SlotState::kBound) {
        s.state = SlotState::kReserved;
        s.pod.clear();
        s.uid.clear();
        s.since = now;
        ++j.version;
      }
    }
  }
}

Status Scheduler::release(const std::string& ns, const std::string& name, Clock::time_point now,
                          const std::string& uid) {
  std::string key = ns + "/" + name;
  // Another pod of this name (different uid) is not this one: a late DELETED of the pod it replaced leaves it
  // be.
  auto other = [&](const std::string& held_uid) {
    return !uid.empty() && !held_uid.empty() && held_uid != uid;
  };
  if (auto it = seen_.find(key); it != seen_.end() && !other(it->second.pod.uid)) seen_.erase(it);
  if (auto it = pods_.find(key); it != pods_.end() && !other(it->second.slot.uid)) {
    unhold(it->second.slot);
    pods_.erase(it);
    ++changes_;
    return ok_status();
  }
  for (auto& [jk, j] : jobs_) {
    if (j.ns != ns) continue;
    for (Slot& s : j.slots) {
      if (s.pod != name || !holds(s.state) || other(s.uid)) continue;
      unhold(s);
      s.state = SlotState::kReleased;
      s.since = now;
      ++j.version;
      ++changes_;
      std::string k = jk;
      forget_if_done(k);
      return ok_status();
    }
  }
  return Error::not_found("the scheduler holds no chips for pod " + key);
}

void Scheduler::forget_if_done(const std::string& job_key) {
  auto it = jobs_.find(job_key);
  if (it == jobs_.end()) return;
  for (const Slot& s : it->second.slots) {
    if (holds(s.state)) return;
  }
  // A job recovering from a fault (or failed) keeps its record: its pods come back to its nodes, with its
  // restart count; expire() forgets it after kRecordHold.
  if (it->second.state == JobState::kRecovering || it->second.state == JobState::kFailed) return;
  jobs_.erase(it);
}

int Scheduler::expire(Clock::time_point now, std::vector<std::string>* jobs) {
  int n = 0;
  std::vector<std::string> touched;
  for (auto& [key, j] : jobs_) {
    for (Slot& s : j.slots) {
      if (s.state == SlotState::kReserved && now - s.since >= ttl_) {
        unhold(s);
        s.state = SlotState::kExpired;
        s.since = now;
        ++j.version;
        ++n;
        touched.push_back(key);
      }
    }
  }
  for (const auto& k : touched) forget_if_done(k);
  // Records kept for a recovery that never came (the job's owner did not make its pods again) or of a failed
  // job, once nothing of them holds chips.
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    const JobRecord& j = it->second;
    bool kept = j.state == JobState::kRecovering || j.state == JobState::kFailed;
    bool empty = std::none_of(j.slots.begin(), j.slots.end(), [](const Slot& s) { return holds(s.state); });
    if (kept && empty && now - j.state_since >= kRecordHold) {
      touched.push_back(it->first);
      it = jobs_.erase(it);
      ++changes_;
    } else {
      ++it;
    }
  }
  if (jobs != nullptr) {
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    *jobs = std::move(touched);
  }
  if (n > 0) ++changes_;
  std::erase_if(seen_, [&](const auto& kv) { return now - kv.second.at >= ttl_; });
  return n;
}

// ---- device plugins -----------------------------------------------------------------------------------

Status Scheduler::put_inventory(const std::string& node, const Inventory& inv, Clock::time_point now) {
  int n = node_index(node);
  if (n < 0) return Error::not_found("node " + node + " is not in the scheduler's cluster file");
  const auto& t = cluster_->type_of(n);
  if (!inv.resource.empty() && inv.resource != t.host.resource_name) {
    return Error::invalid("node " + node + " is a " + t.profile + " (" + t.host.resource_name +
                          ") in the cluster file; the plugin reports " + inv.resource);
  }
  std::uint64_t busy = 0;
  std::uint64_t unhealthy = 0;
  std::uint64_t seen = 0;
  for (const auto& c : inv.chips) {
    int slot = t.slot_of_phy(c.phy_id);
    if (slot < 0) {
      return Error::invalid("node " + node + " (" + t.profile + ") has no chip " + std::to_string(c.phy_id));
    }
    if ((seen >> slot & 1) != 0)
      return Error::invalid("chip " + std::to_string(c.phy_id) + " reported twice");
    seen |= 1ULL << slot;
    if (c.in_use) busy |= 1ULL << slot;
    if (!c.healthy) unhealthy |= 1ULL << slot;
  }
  // A chip the plugin does not list is gone: not usable.
  unhealthy |= t.all() & ~seen;
  NodeState& s = nodes_[idx(n)];
  s.load.assign(static_cast<std::size_t>(t.size), {});
  for (const auto& c : inv.chips) {
    s.load[idx(t.slot_of_phy(c.phy_id))] = {c.aicore_pct, c.hbm_used_mb, c.hbm_total_mb};
  }
  if (!s.reported || s.busy != busy || s.unhealthy != unhealthy) ++changes_;
  s.busy = busy;
  s.unhealthy = unhealthy;
  s.reported = true;
  s.reported_at = now;
  return ok_status();
}

Status Scheduler::put_claimed(const std::string& node, const std::vector<int>& phys) {
  int n = node_index(node);
  if (n < 0) return Error::not_found("node " + node + " is not in the scheduler's cluster file");
  const auto& t = cluster_->type_of(n);
  std::uint64_t claimed = 0;
  for (int p : phys) {
    int slot = t.slot_of_phy(p);
    if (slot < 0) {
      return Error::invalid(
          fmt::format("node {} ({}) has no chip {}: its DRA claims name it", node, t.profile, p));
    }
    claimed |= 1ULL << slot;
  }
  NodeState& s = nodes_[idx(n)];
  if (s.claimed != claimed) ++changes_;
  s.claimed = claimed;
  return ok_status();
}

Result<std::vector<Reservation>> Scheduler::reservations(const std::string& node) const {
  int n = node_index(node);
  if (n < 0) return Error::not_found("node " + node + " is not in the scheduler's cluster file");
  std::vector<Reservation> out;
  for (const auto& [key, j] : jobs_) {
    for (const Slot& s : j.slots) {
      if (s.node == n && s.state == SlotState::kBound) out.push_back({j.ns, s.pod, j.spec.name, s.phys});
    }
  }
  for (const auto& [key, p] : pods_) {
    if (p.slot.node == n && p.slot.state == SlotState::kBound)
      out.push_back({p.ns, p.slot.pod, "", p.slot.phys});
  }
  return out;
}

Result<Grant> Scheduler::take_allocation(const std::string& node, std::vector<int> chips,
                                         Clock::time_point now) {
  int n = node_index(node);
  if (n < 0) return Error::not_found("node " + node + " is not in the scheduler's cluster file");
  std::sort(chips.begin(), chips.end());
  std::vector<std::string> others;
  auto note = [&](const std::string& who, const Slot& s) {
    std::vector<int> bad;
    for (int p : s.phys) {
      int slot = cluster_->type_of(n).slot_of_phy(p);
      if (slot >= 0 && (nodes_[idx(n)].unhealthy >> slot & 1) != 0) bad.push_back(p);
    }
    others.push_back("pod " + who + " holds chips " + join(s.phys) +
                     (bad.empty() ? "" : " (unhealthy now: " + join(bad) + ")"));
  };
  for (auto& [key, j] : jobs_) {
    for (std::size_t i = 0; i < j.slots.size(); ++i) {
      Slot& s = j.slots[i];
      if (s.node != n || s.state != SlotState::kBound || s.phys.size() != chips.size()) continue;
      if (s.phys == chips) {
        s.state = SlotState::kAllocated;
        s.since = now;
        ++j.version;
        ++changes_;
        return grant_of(j, static_cast<int>(i));
      }
      note(j.ns + "/" + s.pod, s);
    }
  }
  for (auto& [key, p] : pods_) {
    Slot& s = p.slot;
    if (s.node != n || s.state != SlotState::kBound || s.phys.size() != chips.size()) continue;
    if (s.phys == chips) {
      s.state = SlotState::kAllocated;
      s.since = now;
      ++changes_;
      return Grant{p.ns, s.pod, "", {}, std::nullopt};
    }
    note(key, s);
  }
  if (others.empty()) {
    return Error::not_found("no pod bound to " + node + " waits for " + std::to_string(chips.size()) +
                            " chips");
  }
  std::string why = "the kubelet allocated chips " + join(chips) + " on " + node + ", but ";
  for (std::size_t i = 0; i < others.size(); ++i) why += (i == 0 ? "" : "; ") + others[i];
  return Error(EBUSY, why + ": delete the pod so that it is placed again");
}

Status Scheduler::return_allocation(const std::string& node, std::vector<int> chips, Clock::time_point now) {
  int n = node_index(node);
  if (n < 0) return Error::not_found("node " + node + " is not in the scheduler's cluster file");
  std::sort(chips.begin(), chips.end());
  auto give_back = [&](Slot& s) {
    if (s.node != n || s.state != SlotState::kAllocated || s.phys != chips) return false;
    s.state = SlotState::kBound;
    s.since = now;
    ++changes_;
    return true;
  };
  for (auto& [key, j] : jobs_) {
    for (Slot& s : j.slots) {
      if (give_back(s)) {
        ++j.version;
        return ok_status();
      }
    }
  }
  for (auto& [key, p] : pods_) {
    if (give_back(p.slot)) return ok_status();
  }
  return Error::not_found(fmt::format("no pod on {} holds allocated chips {}", node, fmt::join(chips, ",")));
}

Grant Scheduler::grant_of(const JobRecord& j, int index) const {
  const Slot& s = j.slots[idx(index)];
  Grant g{j.ns, s.pod, j.spec.name, {}, topology::rank_table(*cluster_, j.placement)};
  std::int64_t world = j.spec.npus();
  g.env = {{"ASCEND_JOB", j.spec.name},
           {"RANK_TABLE_FILE", kRankTablePath},
           {"RANK_SIZE", std::to_string(world)},
           {"WORLD_SIZE", std::to_string(world)},
           {"RANK_START", std::to_string(index * j.chips_per_pod)},
           {"NODE_RANK", std::to_string(index)},
           {"NNODES", std::to_string(j.spec.pods)},
           {"NPROC_PER_NODE", std::to_string(j.chips_per_pod)}};
  return g;
}

}  // namespace ascend::scheduler
