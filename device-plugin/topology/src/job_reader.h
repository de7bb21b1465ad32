// Reads the job fields of a JSON object (a job file, or one entry of a trace) into a Job. Internal.
#pragma once

#include "ascend/topology/job.h"
#include "reader.h"

namespace ascend::topology::detail {

// Reads name, npus, tp, pp, dp, order, npus_per_pod, comm_bytes and model from `r`, leaving other keys to
// the caller (who calls r.done()). Throws FieldError.
Job read_job(ObjectReader& r);

}  // namespace ascend::topology::detail
