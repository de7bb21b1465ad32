#include "ascend/topology/simulate.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <numeric>
#include <queue>

#include <nlohmann/json.hpp>

#include "job_reader.h"

namespace ascend::topology {

using nlohmann::json;
using nlohmann::ordered_json;

Result<std::vector<TraceJob>> trace_from_json(const json& j, const LineLocator& where) {
  try {
    const json* list = &j;
    FieldPath base;
    std::optional<detail::ObjectReader> top;
    if (j.is_object()) {
      top.emplace(j, FieldPath{});
      (void)top->string("name", std::string("trace"));
      list = &top->required("jobs");
      base = base.key("jobs");
      top->done();
    }
    if (!list->is_array()) detail::fail(base, "expected a list of jobs, found " + detail::type_name(*list));
    std::vector<TraceJob> out;
    for (std::size_t i = 0; i < list->size(); ++i) {
      detail::ObjectReader r((*list)[i], base.index(static_cast<int>(i)));
      TraceJob t;
      t.job = detail::read_job(r);
      t.arrival = r.non_negative("arrival");
      if (r.has("duration")) {
        t.duration = r.positive("duration");
        if (r.has("steps")) detail::fail(r.path("steps"), "give duration or steps, not both");
      } else {
        if (!r.has("steps")) detail::fail(r.path("duration"), "give duration, or steps and step_compute_s");
        t.steps = r.integer("steps", 1, 1LL << 40);
        t.step_compute_s = r.non_negative("step_compute_s");
      }
      r.done();
      out.push_back(std::move(t));
    }
    return out;
  } catch (const detail::FieldError& e) {
    return detail::to_error(e, where);
  }
}

namespace {

double run_time(const TraceJob& t, const Placement& p) {
  if (t.duration >= 0) return t.duration;
  return static_cast<double>(t.steps) * (t.step_compute_s + p.eval.cost.total);
}

struct Running {
  double end;
  std::size_t job;
  bool operator>(const Running& o) const { return end > o.end || (end == o.end && job > o.job); }
};

}  // namespace

SimResult simulate(const Cluster& c, const std::vector<TraceJob>& trace, const SimOptions& opt) {
  SimResult res;
  res.policy = opt.policy;
  res.jobs = static_cast<int>(trace.size());
  res.detail.resize(trace.size());
  std::vector<std::size_t> arrivals(trace.size());
  std::iota(arrivals.begin(), arrivals.end(), 0);
  std::stable_sort(arrivals.begin(), arrivals.end(),
                   [&](std::size_t a, std::size_t b) { return trace[a].arrival < trace[b].arrival; });
  for (std::size_t i = 0; i < trace.size(); ++i) {
    res.detail[i].name = trace[i].job.name;
    res.detail[i].npus = trace[i].job.npus;
    res.detail[i].arrival = trace[i].arrival;
  }
  const ClusterState empty = ClusterState::initial(c);
  const int capacity = empty.free_chips();
  ClusterState state = empty;
  std::vector<Placement> placed(trace.size());
  std::priority_queue<Running, std::vector<Running>, std::greater<>> running;
  std::deque<std::size_t> queue;
  std::size_t next = 0;

  auto start = [&](std::size_t i, Placement&& p, double now) {
    occupy(state, p);
    SimJob& d = res.detail[i];
    d.start = now;
    d.end = now + run_time(trace[i], p);
    d.comm_total = p.eval.cost.total;
    d.tp_groups_outside_hccs = p.eval.tp_groups_outside_hccs;
    placed[i] = std::move(p);
    running.push({d.end, i});
  };
  auto try_place = [&](std::size_t i, const ClusterState& s) -> Result<Placement> {
    if (s.free_chips() < trace[i].job.npus) return Error(ENOSPC, "not enough free chips");
    return place(c, s, trace[i].job, opt.policy);
  };
  // Earliest time the head job could start if running jobs end as planned and nothing else starts.
  auto shadow_time = [&](std::size_t head) {
    std::vector<Running> ends;
    auto copy = running;
    while (!copy.empty()) {
      ends.push_back(copy.top());
      copy.pop();
    }
    ClusterState s = state;
    for (const auto& r : ends) {
      release(s, placed[r.job]);
      if (try_place(head, s).ok()) return r.end;
    }
    return std::numeric_limits<double>::infinity();
  };
  auto schedule = [&](double now) {
    while (!queue.empty()) {
      auto p = try_place(queue.front(), state);
      if (!p.ok()) break;
      start(queue.front(), std::move(p).value(), now);
      queue.pop_front();
    }
    if (!opt.backfill || queue.size() < 2) return;
    double shadow = shadow_time(queue.front());
    for (auto it = std::next(queue.begin()); it != queue.end();) {
      // Run time is at least the compute time: a job that cannot end before the shadow time is not tried.
      const TraceJob& tj = trace[*it];
      double at_least = tj.duration >= 0 ? tj.duration : static_cast<double>(tj.steps) * tj.step_compute_s;
      if (now + at_least > shadow + 1e-9) {
        ++it;
        continue;
      }
      auto p = try_place(*it, state);
      if (p.ok() && now + run_time(trace[*it], *p) <= shadow + 1e-9) {
        start(*it, std::move(p).value(), now);
        it = queue.erase(it);
      } else {
        ++it;
      }
    }
  };

  while (next < arrivals.size() || !running.empty()) {
    double now = std::numeric_limits<double>::infinity();
    if (next < arrivals.size()) now = trace[arrivals[next]].arrival;
    if (!running.empty()) now = std::min(now, running.top().end);
    while (!running.empty() && running.top().end <= now) {
      release(state, placed[running.top().job]);
      running.pop();
    }
    while (next < arrivals.size() && trace[arrivals[next]].arrival <= now) {
      std::size_t i = arrivals[next++];
      // topo places whatever first-fit can (and first-fit is cheap); the others are asked themselves.
      auto fits = place(c, empty, trace[i].job, opt.policy == Policy::kTopo ? Policy::kFirstFit : opt.policy);
      if (!fits.ok()) {
        res.detail[i].rejected = fits.error().message();
        continue;
      }
      queue.push_back(i);
    }
    schedule(now);
    if (running.empty() && next >= arrivals.size() && !queue.empty()) {
      // Cannot happen: every queued job fits the empty cluster. Guard against an endless loop anyway.
      for (auto i : queue) res.detail[i].rejected = "never started";
      queue.clear();
    }
  }

  std::vector<double> waits;
  double first = std::numeric_limits<double>::infinity();
  double last = 0;
  double busy = 0;
  double comm = 0;
  for (const auto& d : res.detail) {
    first = std::min(first, d.arrival);
    if (d.start < 0) {
      ++res.rejected;
      continue;
    }
    ++res.completed;
    waits.push_back(d.start - d.arrival);
    last = std::max(last, d.end);
    busy += d.npus * (d.end - d.start);
    comm += d.comm_total;
    res.tp_groups_outside_hccs += d.tp_groups_outside_hccs;
  }
  if (!waits.empty()) {
    res.mean_wait_s = std::accumulate(waits.begin(), waits.end(), 0.0) / static_cast<double>(waits.size());
    std::sort(waits.begin(), waits.end());
    std::size_t k = static_cast<std::size_t>(std::ceil(0.95 * static_cast<double>(waits.size()))) - 1;
    res.p95_wait_s = waits[std::min(k, waits.size() - 1)];
    res.makespan_s = last - first;
    res.mean_comm_cost = comm / res.completed;
    if (res.makespan_s > 0 && capacity > 0) res.utilization = busy / (capacity * res.makespan_s);
  }
  return res;
}

ordered_json to_json(const SimResult& r) {
  return {{"policy", to_string(r.policy)},      {"jobs", r.jobs},
          {"completed", r.completed},           {"rejected", r.rejected},
          {"mean_wait_s", r.mean_wait_s},       {"p95_wait_s", r.p95_wait_s},
          {"makespan_s", r.makespan_s},         {"utilization", r.utilization},
          {"mean_comm_cost", r.mean_comm_cost}, {"tp_groups_outside_hccs", r.tp_groups_outside_hccs}};
}

}  // namespace ascend::topology
