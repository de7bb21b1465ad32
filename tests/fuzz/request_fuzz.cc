// The request parser (ASCEND_VISIBLE_DEVICES, ASCEND_RUNTIME_OPTIONS, ...): one environment entry per line
// of the input, parsed against an 8-chip 910B host with two vNPUs and against an 8-chip 310P host.
// Oracle: a parsed request names only ids the host has (sorted, unique), agrees with requests_devices, and
// its ids survive format_ids -> parse_request.
#include <algorithm>
#include <set>

#include "ascend/hook/request.h"
#include "fuzz_util.h"
#include "hosts.h"

using namespace ascend;

namespace {

void check_request(const std::vector<std::string>& env, const npu::DeviceSnapshot& host) {
  auto r = hook::parse_request(env, host);
  if (!r.ok() || !*r) return;
  const hook::Request& req = **r;
  fuzz::check(hook::requests_devices(env), "parse_request gave devices where requests_devices says none");
  fuzz::check(!req.ids.empty(), "a request with no ids");
  fuzz::check(std::is_sorted(req.ids.begin(), req.ids.end()) &&
                  std::adjacent_find(req.ids.begin(), req.ids.end()) == req.ids.end(),
              "ids not sorted and unique");
  for (int id : req.ids) {
    bool known = req.is_virtual ? host.vnpu(id) != nullptr : host.chip(id) != nullptr;
    fuzz::check(known, "id " + std::to_string(id) + " is not on the host");
  }
  if (!req.vnpu_template.empty()) fuzz::check(req.ids.size() == 1, "a vNPU template for several chips");

  // The ids, formatted and parsed again with the same options, are the same ids.
  std::vector<std::string> again = {std::string(hook::kEnvVisibleDevices) + "=" + hook::format_ids(req.ids)};
  if (req.is_virtual) again.push_back(std::string(hook::kEnvRuntimeOptions) + "=VIRTUAL");
  auto r2 = hook::parse_request(again, host);
  fuzz::check(r2.ok() && *r2 && (*r2)->ids == req.ids,
              "format_ids(" + hook::format_ids(req.ids) + ") does not parse back to the same ids");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const npu::DeviceSnapshot a2 = npu::to_snapshot(fuzz::fuzz_host("atlas800t-a2", true));
  static const npu::DeviceSnapshot duo = npu::to_snapshot(fuzz::fuzz_host("atlas300i-duo", false));
  std::vector<std::string> env = fuzz::lines(fuzz::as_text(data, size));
  (void)hook::env_value(env, hook::kEnvVisibleDevices);
  check_request(env, a2);
  check_request(env, duo);
  return 0;
}
