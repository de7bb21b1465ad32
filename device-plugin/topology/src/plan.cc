#include "ascend/topology/plan.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "ascend/npu/profiles.h"
#include "ascend/topology/place.h"

namespace ascend::topology {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

std::string lower(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

double hbm_of(const npu::HostState& h) {
  const auto& c = h.chips.front();
  double mb = c.hbm_total_mb > 0 ? c.hbm_total_mb : c.mem_total_mb;
  return mb * 1024.0 * 1024.0;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", bytes / kGiB);
  return buf;
}

}  // namespace

Result<npu::HostState> profile_for_chip(const std::string& chip) {
  std::string want = lower(chip);
  std::string known;
  for (const auto& name : npu::builtin_profile_names()) {
    auto h = npu::builtin_profile(name);
    if (!h.ok()) continue;
    std::string chip_name = h->chips.front().name;
    std::vector<std::string> aliases = {lower(chip_name), lower(std::string(npu::to_string(h->family))),
                                        lower(name)};
    if (h->family == npu::Family::k910_93) aliases.emplace_back("910c");
    if (std::find(aliases.begin(), aliases.end(), want) != aliases.end()) return h;
    known += (known.empty() ? "" : ", ") + chip_name;
  }
  return Error::invalid("unknown chip '" + chip + "' (known: " + known + ", or a family or profile name)");
}

Memory memory_per_npu(const PlanRequest& r, int tp, int pp, int dp) {
  Memory m;
  double shard = static_cast<double>(tp) * pp;
  m.weights = 2 * r.params / shard;
  m.gradients = 2 * r.params / shard;
  m.optimizer = 12 * r.params / shard / (r.optimizer_parallel ? dp : 1);
  m.activations = 34.0 * r.seq_len * r.micro_batch * static_cast<double>(r.hidden) * r.layers / shard;
  m.total = m.weights + m.gradients + m.optimizer + m.activations;
  return m;
}

Result<PlanResult> plan(const PlanRequest& req) {
  if (req.npus < 1) return Error::invalid("--npus must be at least 1");
  if (req.params <= 0) return Error::invalid("--params must be positive");
  if (req.layers < 1 || req.hidden < 1 || req.seq_len < 1 || req.micro_batch < 1) {
    return Error::invalid("--layers, --hidden, --seq-len and --micro-batch must be at least 1");
  }
  ASCEND_ASSIGN(npu::HostState host, profile_for_chip(req.chip), "plan");
  PlanResult out;
  out.request = req;
  if (out.request.global_batch <= 0) out.request.global_batch = std::max(1024, req.npus * req.micro_batch);
  out.profile = host.profile;
  out.chip_name = host.chips.front().name;
  out.hbm_bytes = hbm_of(host);
  out.chips_per_node = static_cast<int>(host.chips.size());
  int nodes = (req.npus + out.chips_per_node - 1) / out.chips_per_node;
  auto specs = generate_nodes(host.profile, nodes, 16, 4, "node-");
  auto source = [&](const std::string&) -> Result<npu::HostState> { return host; };
  ASCEND_ASSIGN(Cluster cluster, make_cluster("ideal", req.bw, specs, source), "plan");
  ClusterState empty = ClusterState::initial(cluster);
  ModelSpec model{req.params, req.layers, req.hidden, req.seq_len, req.micro_batch, out.request.global_batch};
  for (int tp = 1; tp <= req.npus; ++tp) {
    if (req.npus % tp != 0) continue;
    for (int pp = 1; pp <= req.npus / tp; ++pp) {
      if ((req.npus / tp) % pp != 0) continue;
      PlanEntry e;
      e.tp = tp;
      e.pp = pp;
      e.dp = req.npus / tp / pp;
      e.memory = memory_per_npu(out.request, tp, pp, e.dp);
      e.comm = comm_from_model(model, tp, pp, e.dp);
      if (pp > req.layers) {
        e.why_not = std::to_string(pp) + " pipeline stages for " + std::to_string(req.layers) + " layers";
      } else if (static_cast<long long>(e.dp) * req.micro_batch > out.request.global_batch) {
        e.why_not = "dp x micro-batch = " + std::to_string(e.dp * req.micro_batch) +
                    " exceeds the global batch " + std::to_string(out.request.global_batch);
      } else if (e.memory.total > out.hbm_bytes) {
        e.why_not =
            "needs " + gib(e.memory.total) + " GiB per NPU, the chip has " + gib(out.hbm_bytes) + " GiB";
      } else {
        Job job;
        job.name = "plan";
        job.npus = req.npus;
        job.tp = tp;
        job.pp = pp;
        job.dp = e.dp;
        job.comm = e.comm;
        auto p = place(cluster, empty, job, Policy::kTopo);
        if (!p.ok()) {
          e.why_not = p.error().message();
        } else {
          e.fits = true;
          e.eval = p->eval;
        }
      }
      out.entries.push_back(std::move(e));
    }
  }
  std::stable_sort(out.entries.begin(), out.entries.end(), [](const PlanEntry& a, const PlanEntry& b) {
    if (a.fits != b.fits) return a.fits;
    if (a.fits) return a.eval.cost.total < b.eval.cost.total;
    return a.memory.total < b.memory.total;
  });
  return out;
}

ordered_json to_json(const PlanResult& r) {
  ordered_json entries = ordered_json::array();
  for (const auto& e : r.entries) {
    ordered_json j = {{"tp", e.tp},
                      {"pp", e.pp},
                      {"dp", e.dp},
                      {"fits", e.fits},
                      {"memory_gib",
                       {{"weights", e.memory.weights / kGiB},
                        {"gradients", e.memory.gradients / kGiB},
                        {"optimizer", e.memory.optimizer / kGiB},
                        {"activations", e.memory.activations / kGiB},
                        {"total", e.memory.total / kGiB}}},
                      {"comm_bytes", {{"tp", e.comm.tp}, {"pp", e.comm.pp}, {"dp", e.comm.dp}}}};
    if (e.fits) {
      j["cost"] = {{"tp", e.eval.cost.tp},
                   {"pp", e.eval.cost.pp},
                   {"dp", e.eval.cost.dp},
                   {"total", e.eval.cost.total}};
      j["tp_groups_outside_hccs"] = e.eval.tp_groups_outside_hccs;
    } else {
      j["why_not"] = e.why_not;
    }
    entries.push_back(std::move(j));
  }
  return {{"npus", r.request.npus},
          {"chip", r.chip_name},
          {"profile", r.profile},
          {"hbm_gib", r.hbm_bytes / kGiB},
          {"params", r.request.params},
          {"layers", r.request.layers},
          {"hidden", r.request.hidden},
          {"seq_len", r.request.seq_len},
          {"micro_batch", r.request.micro_batch},
          {"global_batch", r.request.global_batch},
          {"optimizer_parallel", r.request.optimizer_parallel},
          {"candidates", std::move(entries)}};
}

std::string to_text(const PlanResult& r) {
  std::string o;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%d x %s (%s, %s GiB HBM): %.3g params, %d layers, hidden %d, seq %d, micro-batch %d, global "
                "batch %d%s\n",
                r.request.npus, r.chip_name.c_str(), r.profile.c_str(), gib(r.hbm_bytes).c_str(),
                r.request.params, r.request.layers, r.request.hidden, r.request.seq_len,
                r.request.micro_batch, r.request.global_batch,
                r.request.optimizer_parallel ? ", optimizer parallel" : "");
  o += buf;
  o += "memory per NPU in GiB; cost in seconds per step on an ideal placement\n";
  std::snprintf(buf, sizeof buf, "%6s %5s %6s  %8s %8s %8s %8s %8s  %10s %10s %10s %10s\n", "tp", "pp", "dp",
                "weights", "grads", "optim", "activ", "total", "comm", "tp", "pp", "dp");
  o += buf;
  bool header_done = false;
  for (const auto& e : r.entries) {
    if (!e.fits && !header_done) {
      o += "does not fit:\n";
      header_done = true;
    }
    std::snprintf(buf, sizeof buf, "%6d %5d %6d  %8s %8s %8s %8s %8s  ", e.tp, e.pp, e.dp,
                  gib(e.memory.weights).c_str(), gib(e.memory.gradients).c_str(),
                  gib(e.memory.optimizer).c_str(), gib(e.memory.activations).c_str(),
                  gib(e.memory.total).c_str());
    o += buf;
    if (e.fits) {
      std::snprintf(buf, sizeof buf, "%10.4g %10.4g %10.4g %10.4g\n", e.eval.cost.total, e.eval.cost.tp,
                    e.eval.cost.pp, e.eval.cost.dp);
    } else {
      std::snprintf(buf, sizeof buf, "%s\n", e.why_not.c_str());
    }
    o += buf;
  }
  return o;
}

}  // namespace ascend::topology
