// The OCI state a hook reads on stdin. Oracle: an accepted state has an absolute bundle and a pid >= 0.
#include "ascend/hook/oci.h"
#include "fuzz_util.h"

using namespace ascend;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto s = hook::parse_oci_state(fuzz::as_text(data, size));
  if (!s.ok()) return 0;
  fuzz::check(!s->bundle.empty() && s->bundle[0] == '/', "accepted a bundle that is not absolute");
  fuzz::check(s->pid >= 0, "accepted a negative pid");
  return 0;
}
