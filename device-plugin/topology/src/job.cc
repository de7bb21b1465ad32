#include "ascend/topology/job.h"

#include <cmath>

#include "job_reader.h"

namespace ascend::topology {

using nlohmann::json;

std::string_view to_string(RankOrder o) {
  return o == RankOrder::kTpDpPp ? "tp-dp-pp" : "tp-pp-dp";
}

CommBytes comm_from_model(const ModelSpec& m, int tp, int pp, int dp) {
  double b = m.micro_batch;
  double micro = m.global_batch > 0 ? static_cast<double>(m.global_batch) / (b * dp) : 1.0;
  double sbh = b * m.seq_len * static_cast<double>(m.hidden);
  CommBytes c;
  c.tp = 8.0 * sbh * (static_cast<double>(m.layers) / pp) * micro;
  c.pp = 4.0 * sbh * micro;
  c.dp = 2.0 * m.params / (static_cast<double>(tp) * pp);
  return c;
}

Status validate(const Job& j) {
  if (j.npus < 1) return Error::invalid("npus: must be at least 1");
  if (j.tp < 1) return Error::invalid("tp: must be at least 1");
  if (j.pp < 1) return Error::invalid("pp: must be at least 1");
  if (j.dp < 1) return Error::invalid("dp: must be at least 1");
  if (static_cast<long long>(j.tp) * j.pp * j.dp != j.npus) {
    return Error::invalid("npus: " + std::to_string(j.npus) + " is not tp x pp x dp = " +
                          std::to_string(j.tp) + " x " + std::to_string(j.pp) + " x " + std::to_string(j.dp));
  }
  if (j.npus_per_pod < 0) return Error::invalid("npus_per_pod: must be positive");
  if (j.npus_per_pod > 0 && j.npus % j.npus_per_pod != 0) {
    return Error::invalid("npus_per_pod: " + std::to_string(j.npus_per_pod) + " does not divide npus " +
                          std::to_string(j.npus));
  }
  for (double v : {j.comm.tp, j.comm.pp, j.comm.dp}) {
    if (!(v >= 0) || !std::isfinite(v)) return Error::invalid("comm_bytes: volumes must be finite and >= 0");
  }
  return ok_status();
}

namespace detail {

Job read_job(ObjectReader& r) {
  Job j;
  j.name = r.string("name", std::string("job"));
  j.npus = static_cast<int>(r.integer("npus", 1, 1 << 20));
  j.tp = static_cast<int>(r.integer("tp", 1, 1 << 20, 1));
  j.pp = static_cast<int>(r.integer("pp", 1, 1 << 20, 1));
  if (j.npus % (j.tp * j.pp) != 0 && !r.has("dp")) {
    fail(r.path("npus"),
         std::to_string(j.npus) + " is not a multiple of tp x pp = " + std::to_string(j.tp * j.pp));
  }
  j.dp = static_cast<int>(r.integer("dp", 1, 1 << 20, j.npus / (j.tp * j.pp)));
  if (static_cast<long long>(j.tp) * j.pp * j.dp != j.npus) {
    fail(r.path("npus"), std::to_string(j.npus) + " is not tp x pp x dp = " + std::to_string(j.tp) + " x " +
                             std::to_string(j.pp) + " x " + std::to_string(j.dp));
  }
  std::string order = r.string("order", std::string("tp-dp-pp"));
  if (order == "tp-dp-pp") {
    j.order = RankOrder::kTpDpPp;
  } else if (order == "tp-pp-dp") {
    j.order = RankOrder::kTpPpDp;
  } else {
    fail(r.path("order"), "unknown rank order '" + order + "' (use tp-dp-pp or tp-pp-dp)");
  }
  j.npus_per_pod = static_cast<int>(r.integer("npus_per_pod", 1, 1 << 20, 0));
  if (j.npus_per_pod > 0 && j.npus % j.npus_per_pod != 0) {
    fail(r.path("npus_per_pod"),
         std::to_string(j.npus_per_pod) + " does not divide npus " + std::to_string(j.npus));
  }
  bool have_comm = false;
  if (const json* m = r.find("model")) {
    ObjectReader mr(*m, r.path("model"));
    ModelSpec spec;
    spec.params = mr.positive("params");
    spec.layers = static_cast<int>(mr.integer("layers", 1, 1 << 20));
    spec.hidden = static_cast<int>(mr.integer("hidden", 1, 1 << 24));
    spec.seq_len = static_cast<int>(mr.integer("seq_len", 1, 1 << 26));
    spec.micro_batch = static_cast<int>(mr.integer("micro_batch", 1, 1 << 20, 1));
    spec.global_batch = static_cast<int>(mr.integer("global_batch", 1, 1 << 30, 0));
    mr.done();
    j.model = spec;
    j.comm = comm_from_model(spec, j.tp, j.pp, j.dp);
    have_comm = true;
  }
  if (const json* c = r.find("comm_bytes")) {
    ObjectReader cr(*c, r.path("comm_bytes"));
    j.comm.tp = cr.non_negative("tp", j.comm.tp);
    j.comm.pp = cr.non_negative("pp", j.comm.pp);
    j.comm.dp = cr.non_negative("dp", j.comm.dp);
    cr.done();
    have_comm = true;
  }
  if (!have_comm) fail(r.path().key("comm_bytes"), "give comm_bytes or model (the traffic volumes)");
  return j;
}

}  // namespace detail

Result<Job> job_from_json(const json& j, const LineLocator& where) {
  try {
    detail::ObjectReader r(j, {});
    Job job = detail::read_job(r);
    r.done();
    return job;
  } catch (const detail::FieldError& e) {
    return detail::to_error(e, where);
  }
}

Coord coord_of(const Job& j, int rank) {
  Coord c;
  c.t = rank % j.tp;
  int rest = rank / j.tp;
  if (j.order == RankOrder::kTpDpPp) {
    c.d = rest % j.dp;
    c.p = rest / j.dp;
  } else {
    c.p = rest % j.pp;
    c.d = rest / j.pp;
  }
  return c;
}

int rank_of(const Job& j, const Coord& c) {
  if (j.order == RankOrder::kTpDpPp) return c.t + j.tp * (c.d + j.dp * c.p);
  return c.t + j.tp * (c.p + j.pp * c.d);
}

Groups groups_of(const Job& j) {
  Groups g;
  // Enumerate in rank order of each group's first member.
  for (int r = 0; r < j.npus; ++r) {
    Coord c = coord_of(j, r);
    if (c.t == 0) {
      std::vector<int> grp;
      grp.reserve(static_cast<std::size_t>(j.tp));
      for (int t = 0; t < j.tp; ++t) grp.push_back(rank_of(j, {t, c.d, c.p}));
      g.tp.push_back(std::move(grp));
    }
    if (c.d == 0) {
      std::vector<int> grp;
      grp.reserve(static_cast<std::size_t>(j.dp));
      for (int d = 0; d < j.dp; ++d) grp.push_back(rank_of(j, {c.t, d, c.p}));
      g.dp.push_back(std::move(grp));
    }
    if (c.p + 1 < j.pp) g.pp.emplace_back(r, rank_of(j, {c.t, c.d, c.p + 1}));
  }
  return g;
}

}  // namespace ascend::topology
