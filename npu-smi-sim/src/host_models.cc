// Host models from the emulator's profiles (host_model.h).
#include "ascend/npu/host_model.h"

#include "ascend/npu/profiles.h"

namespace ascend::npu {
namespace {

HostModel model_of(const HostState& s) {
  return {s.profile, s.description, to_snapshot(s)};
}

}  // namespace

Result<HostModel> builtin_host_model(std::string_view name) {
  ASCEND_ASSIGN(HostState s, builtin_profile(name), "");
  return model_of(s);
}

Result<HostModel> load_host_model(const std::string& name_or_path) {
  ASCEND_ASSIGN(HostState s, load_profile(name_or_path), "");
  return model_of(s);
}

}  // namespace ascend::npu
