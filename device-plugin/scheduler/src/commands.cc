#include "ascend/scheduler/commands.h"

#include <cerrno>
#include <cstdlib>
#include <optional>

#include <nlohmann/json.hpp>

#include "ascend/common/fs.h"
#include "ascend/common/yaml_json.h"
#include "ascend/scheduler/input.h"
#include "ascend/topology/calibrate.h"
#include "ascend/topology/faults.h"
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

namespace {

// --faults MTBF_HOURS[,SEED] and the recovery assumptions.
Result<topology::FaultOptions> fault_options(const SimulateOptions& o) {
  topology::FaultOptions f;
  std::string mtbf = o.faults.substr(0, o.faults.find(','));
  std::string seed = o.faults.find(',') == std::string::npos ? "1" : o.faults.substr(o.faults.find(',') + 1);
  char* end = nullptr;
  f.mtbf_hours = std::strtod(mtbf.c_str(), &end);
  bool good = !mtbf.empty() && end == mtbf.c_str() + mtbf.size() && f.mtbf_hours > 0;
  char* seed_end = nullptr;
  f.seed = std::strtoull(seed.c_str(), &seed_end, 10);
  good = good && !seed.empty() && seed_end == seed.c_str() + seed.size();
  if (!good) {
    return Error::invalid("--faults: '" + o.faults + "' is not MTBF_HOURS[,SEED] (e.g. 2000 or 2000,7)");
  }
  f.checkpoint_s = o.checkpoint_minutes * 60;
  f.repair_s = o.repair_hours * 3600;
  f.restart_s = o.restart_minutes * 60;
  return f;
}

}  // namespace

int run_simulate(const SimulateOptions& o, std::ostream& out, std::ostream& err) {
  auto policy = topology::parse_policy(o.policy);
  if (!policy.ok()) return bad_input(err, policy.error().context("--policy"));
  auto cluster = load_cluster(o.cluster);
  if (!cluster.ok()) return bad_input(err, cluster.error());
  auto trace = load_trace(o.trace);
  if (!trace.ok()) return bad_input(err, trace.error());
  auto r = topology::simulate(*cluster, *trace, {*policy, o.backfill});
  nlohmann::ordered_json j = topology::to_json(r);
  if (!o.faults.empty()) {
    auto fo = fault_options(o);
    if (!fo.ok()) return bad_input(err, fo.error());
    auto f = topology::simulate_faults(*cluster, *trace, *policy, *fo);
    if (!f.ok()) return bad_input(err, f.error());
    j["faults"] = topology::to_json(*f);
  }
  out << j.dump(2) << "\n";
  return kExitOk;
}

namespace {

Result<topology::PlanRequest> plan_request(const PlanOptions& o) {
  topology::PlanRequest r = o.request;
  ASCEND_ASSIGN(r.train.recompute, topology::parse_recompute(o.recompute), "--recompute");
  if (names_yaml_file(o.chip)) {
    ASCEND_ASSIGN(r.chip_spec, load_chip(o.chip), "--chip");
  } else {
    r.chip = o.chip;
  }
  return r;
}

std::string nothing_fits(const topology::PlanResult& r) {
  std::string why = "no (tp, pp, dp) of " + std::to_string(r.request.npus) + " x " + r.chip.name + " fits";
  if (!r.entries.empty()) why += ": the best " + r.entries.front().why_not;
  return why;
}

struct Placed {
  const topology::PlanEntry* entry = nullptr;
  int rank = 0;  // position of the entry in the plan
  topology::Placement placement;
};

// The best fitting layout that topo can place on the cluster as it is (busy chips included).
Result<Placed> place_best(const topology::PlanResult& r, const topology::Cluster& c) {
  topology::ClusterState state = topology::ClusterState::initial(c);
  std::string first_why;
  for (std::size_t i = 0; i < r.entries.size() && r.entries[i].fits; ++i) {
    auto p = topology::place(c, state, topology::job_of(r, r.entries[i]), topology::Policy::kTopo);
    if (p.ok()) return Placed{&r.entries[i], static_cast<int>(i), std::move(*p)};
    if (first_why.empty()) first_why = p.error().message();
  }
  return Error(ENOSPC,
               "no layout that fits the chip fits cluster " + c.name + " (the best: " + first_why + ")");
}

std::string placed_line(const topology::PlanEntry& e, int rank, const topology::Placement& p,
                        const topology::Cluster& c, const std::string& job_file) {
  const auto& l = e.layout;
  return "placed layout #" + std::to_string(rank + 1) + " (tp " + std::to_string(l.tp) + " x pp " +
         std::to_string(l.pp) + " x dp " + std::to_string(l.dp) + ", v " + std::to_string(l.v) + ") on " +
         c.name + ": " + std::to_string(topology::nodes_of(p).size()) + " nodes, cost " +
         std::to_string(p.eval.cost.total) + " s, " + std::to_string(p.eval.tp_groups_outside_hccs) +
         " TP groups outside HCCS; job written to " + job_file + "\n";
}

void add_explanation(const topology::PlanResult& r, bool json, nlohmann::ordered_json& j, std::string& text) {
  topology::Explanation x = topology::explain(r);
  if (x.deciding_term.empty()) {
    if (!json) text += "explain: fewer than two layouts fit\n";
    return;
  }
  if (json) {
    j["explain"] = {{"deciding_term", x.deciding_term}, {"margin_s", x.margin_s}, {"text", x.text}};
  } else {
    text += "explain: " + x.text;
  }
}

// plan --measured: the plan with the factors fitted to the measured step times in `path`.
Result<topology::PlanResult> calibrated_plan(const topology::PlanRequest& req, const std::string& path,
                                             std::optional<topology::Calibration>& fit) {
  ASCEND_ASSIGN(std::string text, read_file(path), "--measured");
  ASCEND_ASSIGN(auto rows, topology::measurements_from_csv(text, path), "--measured");
  ASCEND_ASSIGN(topology::Calibrated c, topology::calibrate(req, rows, path), "--measured");
  fit = std::move(c.fit);
  return std::move(c.plan);
}

}  // namespace

int run_plan(const PlanOptions& o, std::ostream& out, std::ostream& err) {
  auto req = plan_request(o);
  if (!req.ok()) return bad_input(err, req.error());
  std::optional<topology::Calibration> fit;
  auto r = o.measured.empty() ? topology::plan(*req) : calibrated_plan(*req, o.measured, fit);
  if (!r.ok()) return bad_input(err, r.error());
  bool any = !r->entries.empty() && r->entries.front().fits;
  nlohmann::ordered_json j = o.json ? topology::to_json(*r) : nlohmann::ordered_json();
  std::string text = o.json ? "" : topology::to_text(*r);
  if (fit && o.json) j["calibration"] = topology::to_json(*fit);
  if (fit && !o.json) text = topology::to_text(*fit) + text;
  if (!any) {
    std::string why = nothing_fits(*r);
    if (o.json) {
      j["error"] = why;
      out << j.dump(2) << "\n";
    } else {
      out << text;
    }
    err << "ascend-scheduler: " << why << "\n";
    return kExitInfeasible;
  }
  if (!o.place.empty()) {
    auto cluster = load_cluster(o.cluster);
    if (!cluster.ok()) return bad_input(err, cluster.error());
    auto placed = place_best(*r, *cluster);
    if (!placed.ok()) return infeasible(out, err, placed.error().message());
    const topology::PlanEntry& e = *placed->entry;
    topology::Job job = topology::job_of(*r, e);
    if (auto s = atomic_replace(o.place, topology::to_job_yaml(job, *r, e)); !s.ok()) {
      err << "ascend-scheduler: job file: " << s.error().message() << "\n";
      return kExitIo;
    }
    if (o.json) {
      j["placed"] = {{"rank", placed->rank + 1}, {"job_file", o.place}};
      j["placement"] = topology::to_json(*cluster, placed->placement);
    } else {
      text += placed_line(e, placed->rank, placed->placement, *cluster, o.place);
    }
  }
  if (o.explain) add_explanation(*r, o.json, j, text);
  if (o.json) {
    out << j.dump(2) << "\n";
  } else {
    out << text;
  }
  return kExitOk;
}

}  // namespace ascend::scheduler
