// DCMI's return codes in the seam's terms, for the DCMI backend (dcmi_query.cc): one place maps a code to
// the errno the seam uses and to the words a message gives.
#pragma once

#include "ascend/common/error.h"

namespace ascend::npu::dcmi_backend {

// OK for DCMI_OK; else an Error naming `fn`, the code and its meaning, with the errno the emulator gives for
// the same failure (so that a caller's handling does not depend on the backend).
Status check(int rc, const char* fn);

}  // namespace ascend::npu::dcmi_backend
