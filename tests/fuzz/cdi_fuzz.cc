// The CDI spec validator (a CDI document in, accepted or refused naming a field) and the device names of an
// accepted spec. Oracle: an accepted spec's names are "<kind>=<device name>", unique, one per device.
#include <set>

#include "ascend/hook/cdi.h"
#include "fuzz_util.h"

using namespace ascend;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto j = nlohmann::json::parse(fuzz::as_text(data, size), nullptr, false);
  if (j.is_discarded()) return 0;
  auto st = hook::validate_cdi_spec(j);
  if (!st.ok()) {
    fuzz::check(!st.error().message().empty(), "a refusal without a message");
    return 0;
  }
  fuzz::check(j.is_object() && j.contains("kind") && j["kind"].is_string(), "accepted a spec with no kind");
  const std::string kind = j["kind"].get<std::string>();
  auto names = hook::cdi_device_names(j);
  fuzz::check(names.size() == j["devices"].size(), "not one name per device");
  std::set<std::string> seen;
  for (const auto& n : names) {
    fuzz::check(n.starts_with(kind + "=") && n.size() > kind.size() + 1,
                "a device name without its kind: " + n);
    fuzz::check(seen.insert(n).second, "a device name twice: " + n);
  }
  return 0;
}
