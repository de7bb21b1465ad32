// plan --measured (calibrate.h): step times made by hand from known factors are fitted back to those factors;
// with noise the fit is the least-squares solution of the hand-derived linear model; bad CSV rows and layouts
// are named by file and line.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ascend/topology/calibrate.h"

namespace ascend::topology {
namespace {

// One server of 8 chips of 100 TFLOPS on a full mesh of 7 HCCS links of 56 GB/s, no latency.
PlanRequest request() {
  ChipSpec chip;
  chip.name = "mesh8";
  chip.hbm_gib = 64;
  chip.peak_tflops_bf16 = 100;
  chip.chips_per_node = 8;
  chip.interconnect.library = Library::kHccl;
  chip.interconnect.domain = {true, 7, 56, 0, Fabric::kFullMesh};
  PlanRequest r;
  r.npus = 8;
  r.chip_spec = chip;
  // 8 layers of 12 h^2 parameters, h = s = 1024, 8 heads, no vocabulary, b = 1, B = 8: m = 8 with dp 1.
  r.model = {8 * 12.0 * 1024 * 1024, 8, 1024, 8, 1024, 0, 1, 8};
  return r;
}

// The hand-derived step times T = a/e + b c of three layouts with dp 1 (docs/scheduler.md, "The step model";
// docs/planner-collectives.md), as coefficients a (of 1/e) and b (of c).
struct Linear {
  Layout layout;
  double a;
  double b;
  int micro_batch = 1;
};

std::vector<Linear> hand_model() {
  const double h = 1024;
  const double s = 1024;
  const double f = 2 * s * 12 * h * h + 4 * s * s * h;  // one layer forward, one micro-batch
  const double peak = 100e12;
  const double compute = 8 * 3 * f / peak;  // m (L/p) 3F / (t peak), the same for the three
  const double msg = 2 * s * h;             // 2bsh bytes
  const double link = 56e9;
  // tp 8: 4 all-reduces x 8 layers x 8 micro-batches, each a mesh all-reduce 2 (7/8) M / (7 links) = M / 4b.
  Linear tp8{{8, 1, 1, 1}, compute, 4 * 8 * 8 * msg / (4 * link)};
  // pp 8: bubble 7/8 of compute; 2 (m + p - 1) = 30 sends of M over one mesh link.
  Linear pp8{{1, 8, 1, 1}, compute * (1 + 7.0 / 8), 30 * msg / link};
  // tp 2 x pp 4: tp 4 x 2 layers x 8 of a 2-rank mesh all-reduce, 2 (1/2) M / b; bubble 3/8 of (compute +
  // tp); 2 (8 + 3) = 22 sends of M/2.
  double tp = 4 * 2 * 8 * msg / link;
  Linear mixed{{2, 4, 1, 1}, compute * (1 + 3.0 / 8), tp * (1 + 3.0 / 8) + 22 * (msg / 2) / link};
  // pp 8 with micro-batch 2 (the same global batch of 8): m = 4 micro-batches of twice the FLOPs, so the same
  // compute; bubble 7/4 of it; 2 (4 + 7) = 22 sends of 2M.
  Linear pp8_b2{{1, 8, 1, 1}, compute * (1 + 7.0 / 4), 22 * 2 * msg / link, 2};
  return {tp8, pp8, mixed, pp8_b2};
}

std::string csv(const std::vector<Linear>& rows, const std::vector<double>& seconds) {
  std::string out = "# measured on the test's imaginary cluster\ntp,pp,dp,micro_batch,step_seconds\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Layout& l = rows[i].layout;
    char buf[128];
    std::snprintf(buf, sizeof buf, "%d,%d,%d,%d,%.17g\n", l.tp, l.pp, l.dp, rows[i].micro_batch, seconds[i]);
    out += buf;
  }
  return out;
}

TEST(Calibrate, RecoversTheFactorsThatMadeTheStepTimes) {
  const double e = 0.45;
  const double c = 1.3;
  std::vector<Linear> rows = hand_model();
  std::vector<double> y;
  for (const auto& r : rows) y.push_back(r.a / e + r.b * c);
  auto ms = measurements_from_csv(csv(rows, y), "m.csv");
  ASSERT_TRUE(ms.ok()) << ms.error().message();
  ASSERT_EQ(ms->size(), 4U);
  EXPECT_EQ((*ms)[3].micro_batch, 2);
  EXPECT_EQ((*ms)[0].line, 3);
  auto fit = calibrate(request(), *ms, "m.csv");
  ASSERT_TRUE(fit.ok()) << fit.error().message();
  EXPECT_NEAR(fit->fit.efficiency, e, 1e-9);
  EXPECT_NEAR(fit->fit.comm_factor, c, 1e-9);
  EXPECT_LT(fit->fit.rms_s, 1e-12);
  // The calibrated plan (micro-batch 1) predicts the measured layouts of micro-batch 1 as measured.
  for (std::size_t i = 0; i < 3; ++i) {
    bool found = false;
    for (const auto& entry : fit->plan.entries) {
      const Layout& l = entry.layout;
      if (l.tp == rows[i].layout.tp && l.pp == rows[i].layout.pp && l.v == 1) {
        EXPECT_NEAR(entry.time.total, y[i], 1e-9 * y[i]);
        found = true;
      }
    }
    EXPECT_TRUE(found);
  }
  EXPECT_EQ(fit->plan.request.efficiency, fit->fit.efficiency);
}

TEST(Calibrate, NoisyTimesGiveTheLeastSquaresSolution) {
  std::vector<Linear> rows = hand_model();
  std::vector<double> noise = {1.01, 0.99, 1.005, 0.995};
  std::vector<double> y;
  for (std::size_t i = 0; i < rows.size(); ++i) y.push_back((rows[i].a / 0.5 + rows[i].b * 1.0) * noise[i]);
  // Normal equations of y = a u + b c in (u, c).
  double aa = 0, ab = 0, bb = 0, ay = 0, by = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    aa += rows[i].a * rows[i].a;
    ab += rows[i].a * rows[i].b;
    bb += rows[i].b * rows[i].b;
    ay += rows[i].a * y[i];
    by += rows[i].b * y[i];
  }
  double det = aa * bb - ab * ab;
  double u = (bb * ay - ab * by) / det;
  double c = (aa * by - ab * ay) / det;
  auto ms = measurements_from_csv(csv(rows, y), "m.csv");
  ASSERT_TRUE(ms.ok());
  auto fit = calibrate(request(), *ms, "m.csv");
  ASSERT_TRUE(fit.ok()) << fit.error().message();
  EXPECT_NEAR(fit->fit.efficiency, 1 / u, 1e-7);
  EXPECT_NEAR(fit->fit.comm_factor, c, 1e-7);
  double sq = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    double r = rows[i].a * u + rows[i].b * c - y[i];
    EXPECT_NEAR(fit->fit.rows[i].residual_s, r, 1e-9);
    sq += r * r;
  }
  EXPECT_NEAR(fit->fit.rms_s, std::sqrt(sq / 4), 1e-9);
  EXPECT_GT(fit->fit.rms_s, 0);
}

TEST(Calibrate, BadRowsNameTheFileAndLine) {
  struct Case {
    std::string text;
    std::string error;
  } cases[] = {
      {"tp,pp,dp,step_seconds\n8,1,1,abc\n", "m.csv:2: step_seconds 'abc' is not a positive number"},
      {"tp,pp,dp,step_seconds\n\n8,1,1,-2\n", "m.csv:3: step_seconds '-2'"},
      {"tp,pp,dp,step_seconds\n8,1,1\n", "m.csv:2: 3 fields where the header has 4"},
      {"# c\ntp,pp,dp,step_seconds\n8,x,1,2\n", "m.csv:3: pp 'x' is not a positive integer"},
      {"tp,pp,dp,seconds\n", "m.csv:1: unknown column 'seconds'"},
      {"tp,pp,step_seconds\n", "m.csv:1: the header lacks dp"},
      {"# only a comment\n", "m.csv: no header line"},
      {"tp,pp,dp,step_seconds\n", "m.csv: no measured layouts"},
  };
  for (const auto& c : cases) {
    auto ms = measurements_from_csv(c.text, "m.csv");
    ASSERT_FALSE(ms.ok()) << c.text;
    EXPECT_NE(ms.error().message().find(c.error), std::string::npos) << ms.error().message();
  }
}

TEST(Calibrate, UnknownLayoutsAndTooFewRowsAreErrors) {
  struct Case {
    std::string text;
    std::string error;
  } cases[] = {
      {"tp,pp,dp,step_seconds\n8,1,1,2\n", "m.csv: 1 measured layout; at least 2"},
      {"tp,pp,dp,step_seconds\n8,1,1,2\n4,1,1,3\n",
       "m.csv:3: tp 4 x pp 1 x dp 1, v 1 is 4 NPUs; the plan is for 8"},
      {"tp,pp,dp,v,step_seconds\n8,1,1,1,2\n1,8,1,3,3\n", "m.csv:3: tp 1 x pp 8 x dp 1, v 3 is not among"},
      {"tp,pp,dp,step_seconds\n8,1,1,2\n8,1,1,2.1\n", "cannot tell compute from communication apart"},
      {"tp,pp,dp,step_seconds\n8,1,1,0.006005\n1,8,1,0.007888\n", "compute efficiency 2 is above 1"},
      {"tp,pp,dp,step_seconds\n8,1,1,0.01\n1,8,1,0.03\n", "the best fit needs no communication"},
  };
  for (const auto& c : cases) {
    auto ms = measurements_from_csv(c.text, "m.csv");
    ASSERT_TRUE(ms.ok()) << ms.error().message();
    auto fit = calibrate(request(), *ms, "m.csv");
    ASSERT_FALSE(fit.ok()) << c.text;
    EXPECT_NE(fit.error().message().find(c.error), std::string::npos) << fit.error().message();
  }
}

}  // namespace
}  // namespace ascend::topology
