// `plan --measured`: the step model calibrated to a cluster. A user gives the measured step times of a few
// layouts; the model's two efficiency factors, the compute efficiency e (the fraction of peak the layers
// reach) and the communication factor c (measured over modelled time of every TP, PP and DP transfer), are
// fitted to them by least squares (Gauss-Newton; the step time is piecewise linear in 1/e and c), and every
// layout is ranked again with them. Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/topology/plan.h"

namespace ascend::topology {

struct Measurement {
  Layout layout;
  int micro_batch = 0;  // 0: the request's
  double step_s = 0;
  int line = 0;  // 1-based line in the file
};

// The CSV form: a header naming the columns (any order, case-insensitive) tp, pp, dp, step_seconds and
// optionally v (default 1) and micro_batch (default the request's); one measured layout per line; blank lines
// and lines starting with '#' are skipped. Errors (EINVAL) read "<name>:<line>: <what>".
Result<std::vector<Measurement>> measurements_from_csv(std::string_view text, const std::string& name);

struct FittedRow {
  Measurement measured;
  double predicted_s = 0;  // with the fitted factors
  double residual_s = 0;   // predicted - measured
};

struct Calibration {
  std::string source;  // the file's name, for messages
  double efficiency = 0;
  double comm_factor = 0;
  double rms_s = 0;         // root mean square of the residuals
  double rms_relative = 0;  // of residual / measured
  int iterations = 0;       // Gauss-Newton steps taken
  std::vector<FittedRow> rows;
};

struct Calibrated {
  Calibration fit;
  PlanResult plan;  // every layout, with the fitted factors
};

// Fits e and c to `ms` (at least 2 rows, whose layouts plan considers and finds fitting) and plans `r` again
// with them. EINVAL naming the file and line of a row that is not a layout of r.npus, that plan does not
// consider or that does not fit; EINVAL when the rows cannot separate compute from communication or the fit
// leaves (0, 1] x (0, inf).
Result<Calibrated> calibrate(const PlanRequest& r, const std::vector<Measurement>& ms,
                             const std::string& source);

nlohmann::ordered_json to_json(const Calibration& c);
std::string to_text(const Calibration& c);

}  // namespace ascend::topology
