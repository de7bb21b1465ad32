#include "ascend/topology/calibrate.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

namespace ascend::topology {

namespace {

std::string number(const char* f, double x) {
  char buf[48];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

std::string lower(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::vector<std::string> fields(std::string_view line) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = line.find(',', start);
    out.push_back(trim(line.substr(start, comma == std::string_view::npos ? comma : comma - start)));
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

enum Column { kTp, kPp, kDp, kV, kMicroBatch, kStep, kColumns };
constexpr std::array<const char*, kColumns> kNames = {"tp", "pp", "dp", "v", "micro_batch", "step_seconds"};

Error at(const std::string& name, int line, const std::string& what) {
  return Error::invalid(name + ":" + std::to_string(line) + ": " + what);
}

std::optional<int> positive_int(const std::string& s) {
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 1) return std::nullopt;
  return v;
}

std::optional<double> positive_seconds(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v) || v <= 0) return std::nullopt;
  return v;
}

// Which field holds each column (-1: absent).
Result<std::array<int, kColumns>> header_of(const std::string& line, const std::string& name, int n) {
  std::array<int, kColumns> where{};
  where.fill(-1);
  std::vector<std::string> cols = fields(line);
  for (std::size_t i = 0; i < cols.size(); ++i) {
    std::string c = lower(cols[i]);
    auto it = std::find(kNames.begin(), kNames.end(), c);
    if (it == kNames.end()) {
      return at(name, n, "unknown column '" + cols[i] + "' (use tp, pp, dp, v, micro_batch, step_seconds)");
    }
    auto k = static_cast<std::size_t>(it - kNames.begin());
    if (where[k] >= 0) return at(name, n, "column " + c + " twice");
    where[k] = static_cast<int>(i);
  }
  for (Column required : {kTp, kPp, kDp, kStep}) {
    if (where[required] < 0) {
      return at(
          name, n,
          "the header lacks " + std::string(kNames[required]) + " (it needs tp, pp, dp and step_seconds)");
    }
  }
  return where;
}

Result<Measurement> row_of(const std::vector<std::string>& f, const std::array<int, kColumns>& where,
                           const std::string& name, int n) {
  Measurement m;
  m.line = n;
  auto integer = [&](Column c, int fallback) -> Result<int> {
    if (where[c] < 0) return fallback;
    const std::string& s = f[static_cast<std::size_t>(where[c])];
    auto v = positive_int(s);
    if (!v) return at(name, n, std::string(kNames[c]) + " '" + s + "' is not a positive integer");
    return *v;
  };
  ASCEND_ASSIGN(m.layout.tp, integer(kTp, 1), "");
  ASCEND_ASSIGN(m.layout.pp, integer(kPp, 1), "");
  ASCEND_ASSIGN(m.layout.dp, integer(kDp, 1), "");
  ASCEND_ASSIGN(m.layout.v, integer(kV, 1), "");
  ASCEND_ASSIGN(m.micro_batch, integer(kMicroBatch, 0), "");
  const std::string& s = f[static_cast<std::size_t>(where[kStep])];
  auto step = positive_seconds(s);
  if (!step) return at(name, n, "step_seconds '" + s + "' is not a positive number of seconds");
  m.step_s = *step;
  return m;
}

}  // namespace

Result<std::vector<Measurement>> measurements_from_csv(std::string_view text, const std::string& name) {
  std::vector<Measurement> out;
  std::optional<std::array<int, kColumns>> where;
  int n = 0;
  std::size_t columns = 0;
  while (!text.empty()) {
    std::size_t nl = text.find('\n');
    std::string line = trim(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++n;
    if (line.empty() || line[0] == '#') continue;
    if (!where) {
      auto h = header_of(line, name, n);
      if (!h.ok()) return h.error();
      where = *h;
      columns = fields(line).size();
      continue;
    }
    std::vector<std::string> f = fields(line);
    if (f.size() != columns) {
      return at(name, n,
                std::to_string(f.size()) + " fields where the header has " + std::to_string(columns));
    }
    auto row = row_of(f, *where, name, n);
    if (!row.ok()) return row.error();
    out.push_back(*row);
  }
  if (!where) return Error::invalid(name + ": no header line (e.g. tp,pp,dp,step_seconds)");
  if (out.empty()) return Error::invalid(name + ": no measured layouts after the header");
  return out;
}

namespace {

// One measured row as the model sees it: its shape, layout and modelled communication.
struct Point {
  ModelShape model;
  Layout layout;
  CommTime comm;
  std::optional<ZeroComm> zero;
  double y = 0;
};

std::string layout_name(const Layout& l) {
  return "tp " + std::to_string(l.tp) + " x pp " + std::to_string(l.pp) + " x dp " + std::to_string(l.dp) +
         ", v " + std::to_string(l.v);
}

bool same(const Layout& a, const Layout& b) {
  return a.tp == b.tp && a.pp == b.pp && a.dp == b.dp && a.v == b.v;
}

Result<Point> point_of(const PlanResult& p, const Measurement& m, const std::string& source) {
  const Layout& l = m.layout;
  long long npus = static_cast<long long>(l.tp) * l.pp * l.dp;
  if (npus != p.request.npus) {
    return at(source, m.line,
              layout_name(l) + " is " + std::to_string(npus) + " NPUs; the plan is for " +
                  std::to_string(p.request.npus));
  }
  for (const auto& e : p.entries) {
    if (!same(e.layout, l)) continue;
    if (!e.fits) return at(source, m.line, layout_name(l) + ": plan's model cannot run it: " + e.why_not);
    return Point{p.request.model, l, e.comm, e.zero, m.step_s};
  }
  return at(source, m.line,
            layout_name(l) + " is not among plan's layouts (v must split each stage's layers evenly, and " +
                "--virtual-stages allows only that v)");
}

struct Model {
  const TrainOptions& train;
  double peak;

  // x = (1/e, c).
  double at(const Point& p, double u, double c) const {
    return step_time(p.model, train, p.layout, peak, 1 / u, scaled(p.comm, c), scaled(p.zero, c)).total;
  }
  double sse(const std::vector<Point>& ps, double u, double c) const {
    double s = 0;
    for (const auto& p : ps) s += (at(p, u, c) - p.y) * (at(p, u, c) - p.y);
    return s;
  }
};

struct Fit {
  double u = 0;
  double c = 0;
  int iterations = 0;
};

// Gauss-Newton with step halving on the residuals T(u, c) - y. The step time is piecewise linear in (u, c)
// (a max() where the gradient reduction's exposure changes), so the forward differences are exact inside a
// piece and the iteration ends in a few steps.
Result<Fit> gauss_newton(const Model& model, const std::vector<Point>& ps, Fit x, const std::string& source) {
  for (; x.iterations < 100; ++x.iterations) {
    double a00 = 0;
    double a01 = 0;
    double a11 = 0;
    double g0 = 0;
    double g1 = 0;
    double hu = 1e-7 * x.u;
    double hc = 1e-7 * std::max(x.c, 1e-3);
    for (const auto& p : ps) {
      double t = model.at(p, x.u, x.c);
      double ju = (model.at(p, x.u + hu, x.c) - t) / hu;
      double jc = (model.at(p, x.u, x.c + hc) - t) / hc;
      a00 += ju * ju;
      a01 += ju * jc;
      a11 += jc * jc;
      g0 += ju * (t - p.y);
      g1 += jc * (t - p.y);
    }
    double det = a00 * a11 - a01 * a01;
    if (!(det > 1e-9 * a00 * a11)) {
      return Error::invalid(
          source +
          ": the measured layouts cannot tell compute from communication apart (their modelled "
          "compute and communication times are in the same proportion); measure layouts with "
          "different tp, pp or dp");
    }
    double du = -(a11 * g0 - a01 * g1) / det;
    double dc = -(a00 * g1 - a01 * g0) / det;
    double before = model.sse(ps, x.u, x.c);
    double step = 1;
    auto inside = [&](double s) { return x.u + s * du > 0 && x.c + s * dc > 0; };
    while (step > 1e-9 && (!inside(step) || model.sse(ps, x.u + step * du, x.c + step * dc) > before))
      step /= 2;
    if (step <= 1e-9) break;
    x.u += step * du;
    x.c += step * dc;
    if (std::abs(step * du) <= 1e-13 * x.u && std::abs(step * dc) <= 1e-13 * x.c) {
      ++x.iterations;
      break;
    }
  }
  return x;
}

}  // namespace

Result<Calibrated> calibrate(const PlanRequest& r, const std::vector<Measurement>& ms,
                             const std::string& source) {
  if (ms.size() < 2) {
    return Error::invalid(source + ": " + std::to_string(ms.size()) +
                          " measured layout; at least 2 are needed to fit the compute efficiency and the "
                          "communication factor");
  }
  PlanRequest base = r;
  base.comm_factor = 1;
  if (base.model.global_batch == 0) base.model.global_batch = std::max(1024, r.npus * r.model.micro_batch);
  std::map<int, PlanResult> plans;  // by micro-batch
  std::vector<Point> points;
  for (const auto& m : ms) {
    int b = m.micro_batch > 0 ? m.micro_batch : base.model.micro_batch;
    if (!plans.contains(b)) {
      PlanRequest q = base;
      q.model.micro_batch = b;
      ASCEND_ASSIGN(PlanResult p, plan(q), source + ":" + std::to_string(m.line));
      plans.emplace(b, std::move(p));
    }
    ASCEND_ASSIGN(Point pt, point_of(plans.at(b), m, source), "");
    points.push_back(pt);
  }
  const PlanResult& any = plans.begin()->second;
  Model model{any.request.train, any.chip.peak_tflops_bf16 * 1e12};
  ASCEND_ASSIGN(Fit x, gauss_newton(model, points, Fit{1 / r.efficiency, 1, 0}, source), "");
  Calibrated out;
  Calibration& c = out.fit;
  c.source = source;
  c.efficiency = 1 / x.u;
  c.comm_factor = x.c;
  c.iterations = x.iterations;
  if (c.comm_factor < 1e-3) {
    return Error::invalid(source + ": the best fit needs no communication at all (factor " +
                          number("%.3g", c.comm_factor) +
                          "): these step times do not grow with the modelled communication; check them, or "
                          "measure layouts whose communication differs more");
  }
  if (c.efficiency > 1) {
    return Error::invalid(source + ": the fitted compute efficiency " + number("%.3g", c.efficiency) +
                          " is above 1 (faster than the chip's peak): check --chip and the step times");
  }
  double sq = 0;
  double rel = 0;
  for (std::size_t i = 0; i < ms.size(); ++i) {
    FittedRow row{ms[i], model.at(points[i], x.u, x.c), 0};
    row.residual_s = row.predicted_s - ms[i].step_s;
    sq += row.residual_s * row.residual_s;
    rel += (row.residual_s / ms[i].step_s) * (row.residual_s / ms[i].step_s);
    c.rows.push_back(row);
  }
  c.rms_s = std::sqrt(sq / static_cast<double>(ms.size()));
  c.rms_relative = std::sqrt(rel / static_cast<double>(ms.size()));
  PlanRequest calibrated = r;
  calibrated.efficiency = c.efficiency;
  calibrated.comm_factor = c.comm_factor;
  ASCEND_ASSIGN(out.plan, plan(calibrated), "calibrated plan");
  return out;
}

nlohmann::ordered_json to_json(const Calibration& c) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const auto& r : c.rows) {
    const Layout& l = r.measured.layout;
    rows.push_back({{"line", r.measured.line},
                    {"tp", l.tp},
                    {"pp", l.pp},
                    {"dp", l.dp},
                    {"v", l.v},
                    {"micro_batch", r.measured.micro_batch},
                    {"measured_s", r.measured.step_s},
                    {"predicted_s", r.predicted_s},
                    {"residual_s", r.residual_s}});
  }
  return {{"source", c.source},     {"efficiency", c.efficiency},     {"comm_factor", c.comm_factor},
          {"rms_s", c.rms_s},       {"rms_relative", c.rms_relative}, {"iterations", c.iterations},
          {"rows", std::move(rows)}};
}

std::string to_text(const Calibration& c) {
  std::string o = "calibrated to " + c.source + " (" + std::to_string(c.rows.size()) +
                  " measured layouts, least squares): compute efficiency " + number("%.4g", c.efficiency) +
                  ", communication x" + number("%.4g", c.comm_factor) + " of the model; residual RMS " +
                  number("%.4g", c.rms_s) + " s (" + number("%.3g", 100 * c.rms_relative) + "%)\n";
  char buf[256];
  std::snprintf(buf, sizeof buf, "%6s %5s %4s %5s %3s %5s  %10s %10s %10s\n", "line", "tp", "pp", "dp", "v",
                "b", "measured", "predicted", "residual");
  o += buf;
  for (const auto& r : c.rows) {
    const Layout& l = r.measured.layout;
    std::string b = r.measured.micro_batch > 0 ? std::to_string(r.measured.micro_batch) : "-";
    std::snprintf(buf, sizeof buf, "%6d %5d %4d %5d %3d %5s  %10.4g %10.4g %+10.3g\n", r.measured.line, l.tp,
                  l.pp, l.dp, l.v, b.c_str(), r.measured.step_s, r.predicted_s, r.residual_s);
    o += buf;
  }
  return o;
}

}  // namespace ascend::topology
