#include "ascend/topology/faults.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <numeric>
#include <queue>

#include <nlohmann/json.hpp>

#include "ascend/common/splitmix.h"

namespace ascend::topology {

std::string_view to_string(Recovery r) {
  return r == Recovery::kPod ? "pod" : "job";
}

Status check(const Cluster& c, const FaultOptions& o) {
  if (o.fixed.empty() && !(o.mtbf_hours > 0 && std::isfinite(o.mtbf_hours))) {
    return Error::invalid("--faults: the MTBF must be a positive number of hours");
  }
  if (!(o.checkpoint_s > 0)) return Error::invalid("--checkpoint-minutes must be positive");
  if (!(o.repair_s >= 0) || !(o.restart_s >= 0)) {
    return Error::invalid("--repair-hours and --restart-minutes must not be negative");
  }
  for (const auto& f : o.fixed) {
    if (f.node < 0 || f.node >= static_cast<int>(c.nodes.size()) || f.slot < 0 ||
        f.slot >= c.type_of(f.node).size || !(f.time >= 0)) {
      return Error::invalid("fault at node " + std::to_string(f.node) + " slot " + std::to_string(f.slot) +
                            ": no such chip or a negative time");
    }
  }
  return ok_status();
}

namespace {

using SplitMix = SplitMix64;  // one stream per chip (ascend/common/splitmix.h)

enum Kind { kEnd = 0, kRepair = 1, kFault = 2, kArrival = 3 };

struct Event {
  double t;
  int kind;
  long long seq;
  int a;    // job (end, arrival) or node (fault, repair)
  int b;    // slot (fault, repair) or generation (end)
  int gen;  // fault: the chip's random stream index (-1: a fixed fault)
  bool operator>(const Event& o) const {
    if (t != o.t) return t > o.t;
    if (kind != o.kind) return kind > o.kind;
    return seq > o.seq;
  }
};

enum class State { kWaiting, kQueued, kRunning, kRecovering, kDone, kRejected };

struct JobRun {
  State state = State::kWaiting;
  Placement placed;
  std::vector<bool> keep;  // pods that hold their chips (pod recovery)
  double work = -1;        // seconds of running needed, from the first placement
  double progress = 0;     // seconds of work done and kept
  double seg_start = 0;
  double seg_overhead = 0;
  int gen = 0;
  double end = -1;
};

class Replay {
 public:
  Replay(const Cluster& c, const std::vector<TraceJob>& trace, Policy policy, const FaultOptions& o,
         Recovery mode)
      : c_(c),
        trace_(trace),
        policy_(policy),
        o_(o),
        empty_(ClusterState::initial(c)),
        state_(empty_),
        jobs_(trace.size()) {
    stats_.mode = mode;
    broken_.assign(c.nodes.size(), 0);
    owner_.resize(c.nodes.size());
    for (std::size_t n = 0; n < c.nodes.size(); ++n) owner_[n].assign(64, -1);
  }

  RecoveryStats run() {
    for (std::size_t i = 0; i < trace_.size(); ++i)
      push(trace_[i].arrival, kArrival, static_cast<int>(i), 0, 0);
    schedule_faults();
    remaining_ = static_cast<int>(trace_.size());
    double last = 0;
    // A bound on the events, so that faults faster than any job can finish still end the replay (the jobs
    // left count as unfinished).
    long long budget = 20'000'000;
    while (!events_.empty() && remaining_ > 0 && budget-- > 0) {
      Event e = events_.top();
      events_.pop();
      held_s_ += static_cast<double>(held_chips_) * (e.t - last);
      last = e.t;
      switch (e.kind) {
        case kArrival:
          arrive(e.a);
          break;
        case kEnd:
          finish(e.a, e.b, e.t);
          break;
        case kFault:
          fault(e, e.t);
          break;
        case kRepair:
          repair(e.a, e.b);
          break;
        default:
          break;
      }
      schedule(e.t);
    }
    return summary();
  }

 private:
  void push(double t, int kind, int a, int b, int gen) { events_.push({t, kind, seq_++, a, b, gen}); }

  void schedule_faults() {
    if (!o_.fixed.empty()) {
      for (const auto& f : o_.fixed) push(f.time, kFault, f.node, f.slot, -1);
      return;
    }
    for (std::size_t n = 0; n < c_.nodes.size(); ++n) {
      std::uint64_t free = c_.initially_free(static_cast<int>(n));
      for (int s = 0; s < c_.type_of(static_cast<int>(n)).size; ++s) {
        if ((free >> s & 1U) == 0) continue;
        int stream = static_cast<int>(streams_.size());
        streams_.push_back({o_.seed * 0x100000001B3ULL + static_cast<std::uint64_t>(stream)});
        push(streams_.back().exponential(o_.mtbf_hours * 3600), kFault, static_cast<int>(n), s, stream);
      }
    }
  }

  int npus(int j) const { return trace_[static_cast<std::size_t>(j)].job.npus; }

  void take(int j, const ChipRef& ch) {
    state_.free[static_cast<std::size_t>(ch.node)] &= ~(1ULL << ch.slot);
    owner_[static_cast<std::size_t>(ch.node)][static_cast<std::size_t>(ch.slot)] = j;
    ++held_chips_;
  }
  void give_back(const ChipRef& ch) {
    auto n = static_cast<std::size_t>(ch.node);
    if ((broken_[n] >> ch.slot & 1U) == 0) state_.free[n] |= 1ULL << ch.slot;
    owner_[n][static_cast<std::size_t>(ch.slot)] = -1;
    --held_chips_;
  }

  void arrive(int j) {
    const Job& job = trace_[static_cast<std::size_t>(j)].job;
    auto fits = place(c_, empty_, job, policy_ == Policy::kTopo ? Policy::kFirstFit : policy_);
    JobRun& r = jobs_[static_cast<std::size_t>(j)];
    if (!fits.ok()) {
      r.state = State::kRejected;
      --remaining_;
      return;
    }
    r.state = State::kQueued;
    queue_.push_back(j);
  }

  void start(int j, double t, double overhead) {
    JobRun& r = jobs_[static_cast<std::size_t>(j)];
    const TraceJob& tj = trace_[static_cast<std::size_t>(j)];
    if (r.work < 0) {
      r.work = tj.duration >= 0
                   ? tj.duration
                   : static_cast<double>(tj.steps) * (tj.step_compute_s + r.placed.eval.cost.total);
    }
    r.state = State::kRunning;
    r.keep.assign(r.placed.chips.size() / static_cast<std::size_t>(std::max(1, r.placed.pod_size)), true);
    r.seg_start = t;
    r.seg_overhead = overhead;
    push(t + overhead + (r.work - r.progress), kEnd, j, r.gen, 0);
  }

  void finish(int j, int gen, double t) {
    JobRun& r = jobs_[static_cast<std::size_t>(j)];
    if (r.state != State::kRunning || r.gen != gen) return;
    for (const auto& ch : r.placed.chips) give_back(ch);
    r.state = State::kDone;
    r.end = t;
    --remaining_;
  }

  // The job on a faulty chip goes back to its last checkpoint; its pods (pod recovery: the chip's) let go.
  void fault(const Event& e, double t) {
    int node = e.a;
    int slot = e.b;
    auto n = static_cast<std::size_t>(node);
    ++stats_.faults;
    if (e.gen >= 0) {
      // The chip's next fault comes after its repair.
      SplitMix& g = streams_[static_cast<std::size_t>(e.gen)];
      push(t + o_.repair_s + g.exponential(o_.mtbf_hours * 3600), kFault, node, slot, e.gen);
    }
    if (broken_[n] >> slot & 1U) return;
    broken_[n] |= 1ULL << slot;
    state_.free[n] &= ~(1ULL << slot);
    push(t + o_.repair_s, kRepair, node, slot, 0);
    int j = owner_[n][static_cast<std::size_t>(slot)];
    if (j < 0) return;
    ++stats_.hits;
    JobRun& r = jobs_[static_cast<std::size_t>(j)];
    if (r.state == State::kRunning) {
      double now = r.progress + std::max(0.0, t - r.seg_start - r.seg_overhead);
      double kept = std::floor(now / o_.checkpoint_s) * o_.checkpoint_s;
      rollback_s_ += (now - kept) * npus(j);
      r.progress = kept;
      ++r.gen;
      ++stats_.restarts;
      r.state = State::kRecovering;
      recovering_.push_back(j);
    }
    if (stats_.mode == Recovery::kJob) {
      for (const auto& ch : r.placed.chips) give_back(ch);
      std::fill(r.keep.begin(), r.keep.end(), false);
      return;
    }
    int pod_size = std::max(1, r.placed.pod_size);
    for (std::size_t rank = 0; rank < r.placed.chips.size(); ++rank) {
      const ChipRef& ch = r.placed.chips[rank];
      if (ch.node != node || ch.slot != slot) continue;
      std::size_t pod = rank / static_cast<std::size_t>(pod_size);
      if (!r.keep[pod]) break;
      r.keep[pod] = false;
      for (std::size_t k = pod * static_cast<std::size_t>(pod_size);
           k < (pod + 1) * static_cast<std::size_t>(pod_size); ++k) {
        give_back(r.placed.chips[k]);
      }
      break;
    }
  }

  void repair(int node, int slot) {
    auto n = static_cast<std::size_t>(node);
    broken_[n] &= ~(1ULL << slot);
    if (owner_[n][static_cast<std::size_t>(slot)] < 0) state_.free[n] |= 1ULL << slot;
  }

  // Recovering jobs first, in fault order; then the queue, FIFO, behind them.
  bool recover(int j, double t) {
    JobRun& r = jobs_[static_cast<std::size_t>(j)];
    const Job& job = trace_[static_cast<std::size_t>(j)].job;
    Result<Placement> p = stats_.mode == Recovery::kJob
                              ? place(c_, state_, job, policy_)
                              : place_missing(c_, state_, job, r.placed, r.keep, policy_);
    if (!p.ok()) return false;
    int pod_size = std::max(1, p->pod_size);
    for (std::size_t rank = 0; rank < p->chips.size(); ++rank) {
      std::size_t pod = rank / static_cast<std::size_t>(pod_size);
      if (pod >= r.keep.size() || !r.keep[pod]) take(j, p->chips[rank]);
    }
    r.placed = std::move(*p);
    start(j, t, o_.restart_s);
    return true;
  }

  void schedule(double t) {
    for (auto it = recovering_.begin(); it != recovering_.end();) {
      it = recover(*it, t) ? recovering_.erase(it) : std::next(it);
    }
    if (!recovering_.empty()) return;
    while (!queue_.empty()) {
      int j = queue_.front();
      const Job& job = trace_[static_cast<std::size_t>(j)].job;
      if (state_.free_chips() < job.npus) return;
      auto p = place(c_, state_, job, policy_);
      if (!p.ok()) return;
      queue_.pop_front();
      JobRun& r = jobs_[static_cast<std::size_t>(j)];
      r.placed = std::move(*p);
      for (const auto& ch : r.placed.chips) take(j, ch);
      start(j, t, 0);
    }
  }

  RecoveryStats summary() {
    RecoveryStats s = stats_;
    double first = std::numeric_limits<double>::infinity();
    double last = 0;
    double useful = 0;
    double completion = 0;
    for (std::size_t i = 0; i < trace_.size(); ++i) {
      first = std::min(first, trace_[i].arrival);
      const JobRun& r = jobs_[i];
      if (r.state == State::kRejected) ++s.rejected;
      if (r.state != State::kDone && r.state != State::kRejected) ++s.unfinished;
      if (r.state != State::kDone) continue;
      ++s.completed;
      last = std::max(last, r.end);
      useful += r.work * trace_[i].job.npus;
      completion += r.end - trace_[i].arrival;
    }
    s.useful_chip_hours = useful / 3600;
    s.held_chip_hours = held_s_ / 3600;
    s.lost_chip_hours = s.held_chip_hours - s.useful_chip_hours;
    s.rollback_chip_hours = rollback_s_ / 3600;
    s.goodput = held_s_ > 0 ? useful / held_s_ : 0;
    if (s.completed > 0) {
      s.makespan_s = last - first;
      s.mean_completion_s = completion / s.completed;
    }
    return s;
  }

  const Cluster& c_;
  const std::vector<TraceJob>& trace_;
  Policy policy_;
  const FaultOptions& o_;
  const ClusterState empty_;
  ClusterState state_;
  std::vector<JobRun> jobs_;
  std::vector<std::uint64_t> broken_;
  std::vector<std::vector<int>> owner_;  // node, slot -> job
  std::vector<SplitMix> streams_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::deque<int> queue_;
  std::vector<int> recovering_;
  long long seq_ = 0;
  int remaining_ = 0;
  long long held_chips_ = 0;
  double held_s_ = 0;
  double rollback_s_ = 0;
  RecoveryStats stats_;
};

nlohmann::ordered_json stats_json(const RecoveryStats& s) {
  return {{"faults", s.faults},
          {"hits", s.hits},
          {"restarts", s.restarts},
          {"completed", s.completed},
          {"rejected", s.rejected},
          {"unfinished", s.unfinished},
          {"useful_chip_hours", s.useful_chip_hours},
          {"held_chip_hours", s.held_chip_hours},
          {"lost_chip_hours", s.lost_chip_hours},
          {"rollback_chip_hours", s.rollback_chip_hours},
          {"goodput", s.goodput},
          {"makespan_s", s.makespan_s},
          {"mean_completion_s", s.mean_completion_s}};
}

}  // namespace

RecoveryStats simulate_recovery(const Cluster& c, const std::vector<TraceJob>& trace, Policy policy,
                                const FaultOptions& o, Recovery mode) {
  return Replay(c, trace, policy, o, mode).run();
}

Result<FaultReport> simulate_faults(const Cluster& c, const std::vector<TraceJob>& trace, Policy policy,
                                    const FaultOptions& o) {
  ASCEND_CHECK(check(c, o), "simulate");
  FaultReport r;
  r.options = o;
  r.pod = simulate_recovery(c, trace, policy, o, Recovery::kPod);
  r.job = simulate_recovery(c, trace, policy, o, Recovery::kJob);
  return r;
}

nlohmann::ordered_json to_json(const FaultReport& r) {
  const FaultOptions& o = r.options;
  nlohmann::ordered_json j;
  if (o.fixed.empty()) {
    j["mtbf_hours"] = o.mtbf_hours;
    j["seed"] = o.seed;
  } else {
    j["fixed_faults"] = o.fixed.size();
  }
  j["checkpoint_s"] = o.checkpoint_s;
  j["repair_s"] = o.repair_s;
  j["restart_s"] = o.restart_s;
  j["pod"] = stats_json(r.pod);
  j["job"] = stats_json(r.job);
  return j;
}

}  // namespace ascend::topology
