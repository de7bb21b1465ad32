#include "ascend/scheduler/commands.h"

#include <cerrno>

#include <nlohmann/json.hpp>

#include "ascend/common/fs.h"
#include "ascend/scheduler/input.h"
#include "ascend/topology/place.h"
#include "ascend/topology/ranktable.h"
#include "ascend/topology/simulate.h"
#include "ascend/topology/svg.h"

namespace ascend::scheduler {

using nlohmann::json;

namespace {

int bad_input(std::ostream& err, const Error& e) {
  err << "ascend-scheduler: " << e.message() << "\n";
  return kExitBadInput;
}

int infeasible(std::ostream& out, std::ostream& err, const std::string& why) {
  out << json{{"error", why}}.dump() << "\n";
  err << "ascend-scheduler: " << why << "\n";
  return kExitInfeasible;
}

}  // namespace

int run_place(const PlaceOptions& o, std::ostream& out, std::ostream& err) {
  auto policy = topology::parse_policy(o.policy);
  if (!policy.ok()) return bad_input(err, policy.error().context("--policy"));
  auto cluster = load_cluster(o.cluster);
  if (!cluster.ok()) return bad_input(err, cluster.error());
  auto job = load_job(o.job);
  if (!job.ok()) return bad_input(err, job.error());
  topology::ClusterState state = topology::ClusterState::initial(*cluster);
  auto p = topology::place(*cluster, state, *job, *policy);
  if (!p.ok()) return infeasible(out, err, p.error().message());
  out << topology::to_json(*cluster, *p).dump(2) << "\n";
  if (!o.ranktable.empty()) {
    if (auto s = atomic_replace(o.ranktable, topology::rank_table(*cluster, *p).dump(4) + "\n"); !s.ok()) {
      err << "ascend-scheduler: rank table: " << s.error().message() << "\n";
      return kExitIo;
    }
  }
  if (!o.svg.empty()) {
    if (auto s = atomic_replace(o.svg, topology::render_svg(*cluster, state, *job, *p)); !s.ok()) {
      err << "ascend-scheduler: svg: " << s.error().message() << "\n";
      return kExitIo;
    }
  }
  return kExitOk;
}

int run_simulate(const SimulateOptions& o, std::ostream& out, std::ostream& err) {
  auto policy = topology::parse_policy(o.policy);
  if (!policy.ok()) return bad_input(err, policy.error().context("--policy"));
  auto cluster = load_cluster(o.cluster);
  if (!cluster.ok()) return bad_input(err, cluster.error());
  auto trace = load_trace(o.trace);
  if (!trace.ok()) return bad_input(err, trace.error());
  auto r = topology::simulate(*cluster, *trace, {*policy, o.backfill});
  out << topology::to_json(r).dump(2) << "\n";
  return kExitOk;
}

int run_plan(const PlanOptions& o, std::ostream& out, std::ostream& err) {
  auto r = topology::plan(o.request);
  if (!r.ok()) return bad_input(err, r.error());
  bool any = false;
  for (const auto& e : r->entries) any = any || e.fits;
  std::string why;
  if (!any) {
    why = "no (tp, pp, dp) of " + std::to_string(o.request.npus) + " x " + r->chip_name + " fits";
    if (!r->entries.empty()) why += ": the best needs " + r->entries.front().why_not;
  }
  if (o.json) {
    json j = topology::to_json(*r);
    if (!any) j["error"] = why;
    out << j.dump(2) << "\n";
  } else {
    out << topology::to_text(*r);
  }
  if (!any) {
    err << "ascend-scheduler: " << why << "\n";
    return kExitInfeasible;
  }
  return kExitOk;
}

}  // namespace ascend::scheduler
