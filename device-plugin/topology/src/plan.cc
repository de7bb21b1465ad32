#include "ascend/topology/plan.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "ascend/topology/place.h"
#include "plan_comm.h"

namespace ascend::topology {

using nlohmann::ordered_json;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string number(const char* f, double x) {
  char buf[48];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

std::string gib(double bytes) {
  return number("%.1f", bytes / kGiB);
}

std::string str(int x) {
  return std::to_string(x);
}

Status check_request(const PlanRequest& r) {
  const ModelShape& m = r.model;
  if (r.npus < 1) return Error::invalid("--npus must be at least 1");
  if (!(m.params > 0)) return Error::invalid("--params must be positive");
  if (m.layers < 1 || m.hidden < 1 || m.heads < 1 || m.seq_len < 1 || m.micro_batch < 1) {
    return Error::invalid("--layers, --hidden, --heads, --seq-len and --micro-batch must be at least 1");
  }
  if (m.vocab < 0 || m.global_batch < 0 || r.virtual_stages < 0) {
    return Error::invalid("--vocab, --global-batch and --virtual-stages must not be negative");
  }
  if (m.params <= 2.0 * m.vocab * m.hidden) {
    return Error::invalid(
        "--params " + number("%.4g", m.params) + " leaves nothing for the layers after the " +
        "embedding and output layer (2 x vocab x hidden = " + number("%.4g", 2.0 * m.vocab * m.hidden) + ")");
  }
  if (!(r.efficiency > 0 && r.efficiency <= 1)) return Error::invalid("--efficiency must be in (0, 1]");
  if (!(r.comm_factor > 0)) return Error::invalid("the communication factor must be positive");
  return ok_status();
}

// The virtual-stage counts to consider for a pipeline of `pp`.
std::vector<int> virtual_stages(const PlanRequest& r, int pp) {
  if (pp == 1) return {1};
  if (r.virtual_stages > 0) return {r.virtual_stages};
  std::vector<int> out = {1};
  for (int v = 2; v * pp <= r.model.layers; ++v) {
    if (r.model.layers % (pp * v) == 0) out.push_back(v);
  }
  return out;
}

// Why a layout cannot run at all (before memory), or "".
std::string structural_problem(const PlanRequest& r, const ChipSpec& chip, const Layout& l) {
  const ModelShape& m = r.model;
  if (m.heads % l.tp != 0) return "tp " + str(l.tp) + " does not divide the " + str(m.heads) + " heads";
  if (l.tp > chip.chips_per_node && !r.allow_tp_across_nodes) {
    return "tp " + str(l.tp) + " spans nodes of " + str(chip.chips_per_node) +
           " chips (--allow-tp-across-nodes to consider it)";
  }
  if (l.pp > m.layers) return "pp " + str(l.pp) + " exceeds the " + str(m.layers) + " layers";
  if (l.v > 1 && m.layers % (l.pp * l.v) != 0) {
    return str(m.layers) + " layers do not split into pp x v = " + str(l.pp * l.v) + " equal chunks";
  }
  long long per_step = static_cast<long long>(l.dp) * m.micro_batch;
  if (m.global_batch % per_step != 0) {
    return "the global batch " + str(m.global_batch) +
           " is not a multiple of dp x micro-batch = " + std::to_string(per_step);
  }
  int micro = micro_batches(m, l);
  if (l.v > 1 && micro % l.pp != 0) {
    return "the interleaved schedule needs the " + str(micro) + " micro-batches to be a multiple of pp " +
           str(l.pp);
  }
  return "";
}

std::string overflow(const PlanEntry& e, double hbm) {
  const char* where = e.memory.stage == 0 ? "the first stage" : "the last stage";
  return "needs " + gib(e.memory.total) + " GiB per NPU on " + where + " (activations " +
         gib(e.memory.activations) + " GiB for " + number("%.3g", e.memory.in_flight) +
         " micro-batches in flight, weights+gradients+optimizer " +
         gib(e.memory.weights + e.memory.gradients + e.memory.optimizer) + " GiB), the chip has " + gib(hbm) +
         " GiB: " + gib(e.memory.total - hbm) + " GiB over";
}

// topo's placement on the ideal cluster, once per (tp, pp): its cost per byte of each kind of traffic
// (placed with the v = 1 volumes; v changes only the pipeline volume, not which levels the groups use).
struct PerByte {
  bool ok = false;
  std::string why;
  Evaluation eval;
  double tp = 0;
  double pp = 0;
  double dp = 0;
  detail::Spans spans;  // where the groups are (chips with an interconnect)
};

class Placer {
 public:
  Placer(const Cluster& c, const PlanResult& r) : cluster_(c), state_(ClusterState::initial(c)), r_(r) {}

  const PerByte& at(const Layout& l) {
    auto key = std::make_pair(l.tp, l.pp);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    return cache_.emplace(key, compute(l)).first->second;
  }

 private:
  PerByte compute(Layout l) {
    l.v = 1;
    PlanEntry e;
    e.layout = l;
    e.volumes = step_volumes(r_.request.model, r_.request.train, l);
    PerByte pb;
    auto p = place(cluster_, state_, job_of(r_, e), Policy::kTopo);
    if (!p.ok()) {
      pb.why = p.error().message();
      return pb;
    }
    pb.ok = true;
    pb.eval = p->eval;
    auto per = [](double cost, double bytes) { return bytes > 0 ? cost / bytes : 0; };
    pb.tp = per(p->eval.cost.tp, e.volumes.tp);
    pb.pp = per(p->eval.cost.pp, e.volumes.pp);
    pb.dp = per(p->eval.cost.dp, e.volumes.dp);
    if (r_.chip.interconnect.present()) pb.spans = detail::spans_of(cluster_, job_of(r_, e), *p);
    return pb;
  }

  const Cluster& cluster_;
  ClusterState state_;
  const PlanResult& r_;
  std::map<std::pair<int, int>, PerByte> cache_;
};

}  // namespace

CommTime scaled(const CommTime& c, double factor) {
  return {c.tp * factor, c.pp * factor, c.dp * factor};
}

std::optional<ZeroComm> scaled(const std::optional<ZeroComm>& z, double factor) {
  if (!z) return std::nullopt;
  return ZeroComm{z->reduce_scatter * factor, z->all_gather * factor};
}

namespace {

PlanEntry evaluate_layout(const PlanResult& r, const Layout& l, Placer& placer) {
  const PlanRequest& req = r.request;
  PlanEntry e;
  e.layout = l;
  e.layers_first = stage_layers(req.model.layers, l.pp, 0);
  e.layers_last = stage_layers(req.model.layers, l.pp, l.pp - 1);
  e.why_not = structural_problem(req, r.chip, l);
  if (!e.why_not.empty()) return e;
  e.micro_batches = micro_batches(req.model, l);
  e.memory = peak_memory(req.model, req.train, l);
  double hbm = r.chip.hbm_gib * kGiB;
  if (e.memory.total > hbm) {
    e.why_not = overflow(e, hbm);
    return e;
  }
  const PerByte& pb = placer.at(l);
  if (!pb.ok) {
    e.why_not = pb.why;
    return e;
  }
  e.fits = true;
  e.eval = pb.eval;
  e.volumes = step_volumes(req.model, req.train, l);
  CommTime comm{e.volumes.tp * pb.tp, e.volumes.pp * pb.pp, e.volumes.dp * pb.dp};
  std::optional<ZeroComm> zero;
  if (r.chip.interconnect.present()) {
    detail::PlannedComm planned =
        detail::comm_time(req.model, req.train, l, pb.spans, r.chip.interconnect, r.cluster_bw);
    comm = planned.time;
    zero = planned.zero;
    e.tp_collective = planned.tp;
    e.dp_collective = planned.dp;
  }
  e.comm = comm;
  e.zero = zero;
  e.time = step_time(req.model, req.train, l, r.chip.peak_tflops_bf16 * 1e12, req.efficiency,
                     scaled(comm, req.comm_factor), scaled(zero, req.comm_factor));
  return e;
}

Result<Cluster> ideal_cluster(const PlanResult& r, const npu::HostModel& host) {
  int nodes = (r.request.npus + r.chip.chips_per_node - 1) / r.chip.chips_per_node;
  auto specs = generate_nodes(host.profile, nodes, 16, 4, "node-");
  auto source = [&host](const std::string&) -> Result<npu::HostModel> { return host; };
  return make_cluster("ideal", r.cluster_bw, specs, source);
}

void rank(std::vector<PlanEntry>& entries) {
  std::stable_sort(entries.begin(), entries.end(), [](const PlanEntry& a, const PlanEntry& b) {
    if (a.fits != b.fits) return a.fits;
    if (a.fits) return a.time.total < b.time.total;
    bool a_sized = a.memory.total > 0;  // structural problems have no memory figure
    bool b_sized = b.memory.total > 0;
    if (a_sized != b_sized) return a_sized;
    return a.memory.total < b.memory.total;
  });
}

}  // namespace

Result<PlanResult> plan(const PlanRequest& req) {
  ASCEND_CHECK(check_request(req), "plan");
  PlanResult out;
  out.request = req;
  ModelShape& m = out.request.model;
  if (m.global_batch == 0) m.global_batch = std::max(1024, req.npus * m.micro_batch);
  if (req.chip_spec) {
    out.chip = *req.chip_spec;
  } else {
    ASCEND_ASSIGN(out.chip, builtin_chip(req.chip), "plan");
  }
  ASCEND_ASSIGN(npu::HostModel host, node_host(out.chip), "plan");
  out.profile = host.profile;
  out.cluster_bw = bandwidth_for(out.chip, req.bw);
  ASCEND_ASSIGN(Cluster cluster, ideal_cluster(out, host), "plan");
  Placer placer(cluster, out);
  for (int tp = 1; tp <= req.npus; ++tp) {
    if (req.npus % tp != 0) continue;
    for (int pp = 1; pp <= req.npus / tp; ++pp) {
      if ((req.npus / tp) % pp != 0) continue;
      for (int v : virtual_stages(out.request, pp)) {
        out.entries.push_back(evaluate_layout(out, {tp, pp, req.npus / tp / pp, v}, placer));
      }
    }
  }
  rank(out.entries);
  return out;
}

Job job_of(const PlanResult& r, const PlanEntry& e, std::string name) {
  Job j;
  j.name = std::move(name);
  j.npus = r.request.npus;
  j.tp = e.layout.tp;
  j.pp = e.layout.pp;
  j.dp = e.layout.dp;
  j.comm = {e.volumes.tp, e.volumes.pp, e.volumes.dp};
  return j;
}

std::string to_job_yaml(const Job& job, const PlanResult& r, const PlanEntry& e) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "# ascend-scheduler plan: %d x %s, tp %d x pp %d x dp %d, v %d, %d micro-batches per step;\n"
                "# predicted %.4g s per step, %.4g tokens/s per NPU, MFU %.1f%%\n"
                "name: %s\nnpus: %d\ntp: %d\npp: %d\ndp: %d\norder: %s\n"
                "comm_bytes: {tp: %.17g, pp: %.17g, dp: %.17g}\n",
                r.request.npus, r.chip.name.c_str(), e.layout.tp, e.layout.pp, e.layout.dp, e.layout.v,
                e.micro_batches, e.time.total, e.time.tokens_per_s_per_npu, 100 * e.time.mfu,
                job.name.c_str(), job.npus, job.tp, job.pp, job.dp, std::string(to_string(job.order)).c_str(),
                job.comm.tp, job.comm.pp, job.comm.dp);
  return buf;
}

namespace {

ordered_json memory_json(const Memory& m) {
  return {{"weights", m.weights / kGiB},     {"gradients", m.gradients / kGiB},
          {"optimizer", m.optimizer / kGiB}, {"activations", m.activations / kGiB},
          {"total", m.total / kGiB},         {"stage", m.stage},
          {"in_flight", m.in_flight}};
}

std::string algorithm_name(const CollectiveCost& c) {
  std::string name(to_string(c.algorithm));
  if (c.algorithm == Algorithm::kHierarchical) name += "/" + std::string(to_string(c.inter));
  return name;
}

ordered_json entry_json(const PlanEntry& e) {
  ordered_json j = {{"tp", e.layout.tp},
                    {"pp", e.layout.pp},
                    {"dp", e.layout.dp},
                    {"v", e.layout.v},
                    {"micro_batches", e.micro_batches},
                    {"layers_per_stage", {e.layers_first, e.layers_last}},
                    {"fits", e.fits}};
  if (e.memory.total > 0) j["memory_gib"] = memory_json(e.memory);
  if (!e.fits) {
    j["why_not"] = e.why_not;
    return j;
  }
  const StepTime& t = e.time;
  j["step_s"] = {{"compute", t.compute}, {"bubble", t.bubble},         {"tp", t.tp},
                 {"pp", t.pp},           {"dp_exposed", t.dp_exposed}, {"total", t.total}};
  j["tokens_per_s_per_npu"] = t.tokens_per_s_per_npu;
  j["mfu"] = t.mfu;
  j["hfu"] = t.hfu;
  j["comm_bytes"] = {{"tp", e.volumes.tp}, {"pp", e.volumes.pp}, {"dp", e.volumes.dp}};
  j["tp_groups_outside_hccs"] = e.eval.tp_groups_outside_hccs;
  if (e.tp_collective.algorithm != Algorithm::kNone || e.dp_collective.algorithm != Algorithm::kNone) {
    j["algorithms"] = {{"tp", algorithm_name(e.tp_collective)}, {"dp", algorithm_name(e.dp_collective)}};
  }
  return j;
}

}  // namespace

ordered_json to_json(const PlanResult& r) {
  const PlanRequest& q = r.request;
  ordered_json entries = ordered_json::array();
  for (const auto& e : r.entries) entries.push_back(entry_json(e));
  return {{"npus", q.npus},
          {"chip", r.chip.name},
          {"profile", r.profile},
          {"hbm_gib", r.chip.hbm_gib},
          {"peak_tflops_bf16", r.chip.peak_tflops_bf16},
          {"efficiency", q.efficiency},
          {"comm_factor", q.comm_factor},
          {"model",
           {{"params", q.model.params},
            {"layers", q.model.layers},
            {"hidden", q.model.hidden},
            {"heads", q.model.heads},
            {"seq_len", q.model.seq_len},
            {"vocab", q.model.vocab},
            {"micro_batch", q.model.micro_batch},
            {"global_batch", q.model.global_batch}}},
          {"options",
           {{"sequence_parallel", q.train.sequence_parallel},
            {"recompute", to_string(q.train.recompute)},
            {"optimizer_parallel", q.train.optimizer_parallel},
            {"virtual_stages", q.virtual_stages},
            {"allow_tp_across_nodes", q.allow_tp_across_nodes}}},
          {"candidates", std::move(entries)}};
}

namespace {

std::string header(const PlanResult& r) {
  const PlanRequest& q = r.request;
  const ModelShape& m = q.model;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%d x %s (%s, %s GiB HBM, %g TFLOPS bf16 at %.0f%% efficiency): %.3g params, %d layers, "
                "hidden %d, %d heads, seq %d, vocab %d, micro-batch %d, global batch %d; recompute %s%s%s\n",
                q.npus, r.chip.name.c_str(), r.profile.c_str(), gib(r.chip.hbm_gib * kGiB).c_str(),
                r.chip.peak_tflops_bf16, 100 * q.efficiency, m.params, m.layers, m.hidden, m.heads, m.seq_len,
                m.vocab, m.micro_batch, m.global_batch, std::string(to_string(q.train.recompute)).c_str(),
                q.train.sequence_parallel ? ", sequence parallel" : "",
                q.train.optimizer_parallel ? ", optimizer parallel" : "");
  std::string o = buf;
  o += "seconds per step";
  if (q.comm_factor != 1) o += " (every communication time x" + number("%.3g", q.comm_factor) + ")";
  o += "; memory in GiB per NPU on the largest stage\n";
  std::snprintf(buf, sizeof buf, "%5s %4s %5s %3s %6s %7s  %9s %9s %8s %8s %8s %8s  %10s %6s %6s\n", "tp",
                "pp", "dp", "v", "m", "memory", "step", "compute", "bubble", "tp", "pp", "dp_exp",
                "tok/s/NPU", "MFU", "HFU");
  return o + buf;
}

std::string row(const PlanEntry& e) {
  char buf[512];
  const Layout& l = e.layout;
  bool sized = e.memory.total > 0;  // structural problems have neither micro-batches nor memory
  int n =
      std::snprintf(buf, sizeof buf, "%5d %4d %5d %3d %6s %7s  ", l.tp, l.pp, l.dp, l.v,
                    sized ? str(e.micro_batches).c_str() : "-", sized ? gib(e.memory.total).c_str() : "-");
  const StepTime& t = e.time;
  if (e.fits) {
    std::snprintf(buf + n, sizeof buf - static_cast<std::size_t>(n),
                  "%9.4g %9.4g %8.3g %8.3g %8.3g %8.3g  %10.4g %5.1f%% %5.1f%%\n", t.total, t.compute,
                  t.bubble, t.tp, t.pp, t.dp_exposed, t.tokens_per_s_per_npu, 100 * t.mfu, 100 * t.hfu);
  } else {
    std::snprintf(buf + n, sizeof buf - static_cast<std::size_t>(n), "%s\n", e.why_not.c_str());
  }
  return buf;
}

}  // namespace

std::string to_text(const PlanResult& r) {
  std::string o = header(r);
  bool header_done = false;
  for (const auto& e : r.entries) {
    if (!e.fits && !header_done) {
      o += "does not fit:\n";
      header_done = true;
    }
    o += row(e);
  }
  return o;
}

namespace {

struct Term {
  const char* name;
  double StepTime::*field;
};
constexpr Term kTerms[] = {{"compute", &StepTime::compute},
                           {"bubble", &StepTime::bubble},
                           {"tp", &StepTime::tp},
                           {"pp", &StepTime::pp},
                           {"dp_exposed", &StepTime::dp_exposed}};

std::string layout_name(const PlanEntry& e) {
  const Layout& l = e.layout;
  return "tp " + str(l.tp) + " x pp " + str(l.pp) + " x dp " + str(l.dp) + ", v " + str(l.v) + " (" +
         number("%.4g", e.time.total) + " s)";
}

}  // namespace

Explanation explain(const PlanResult& r) {
  Explanation x;
  if (r.entries.size() < 2 || !r.entries[0].fits || !r.entries[1].fits) return x;
  const StepTime& a = r.entries[0].time;
  const StepTime& b = r.entries[1].time;
  x.margin_s = b.total - a.total;
  double best = -1;
  std::string terms;
  for (const Term& t : kTerms) {
    double gain = b.*t.field - a.*t.field;  // > 0: the first spends less on it
    if (x.deciding_term.empty() || gain > best) {
      best = gain;
      x.deciding_term = t.name;
    }
    terms += std::string(terms.empty() ? "" : ", ") + t.name + " " + number("%+.3g", -gain) + " s";
  }
  x.text = "#1 " + layout_name(r.entries[0]) + " beats #2 " + layout_name(r.entries[1]) + " by " +
           number("%.3g", x.margin_s) + " s per step; decided by " + x.deciding_term + " (" +
           number("%.3g", best) + " s less); #1 against #2: " + terms + "\n";
  return x;
}

}  // namespace ascend::topology
