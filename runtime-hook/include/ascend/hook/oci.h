// The two OCI documents the hook path reads: the runtime state a hook receives on stdin, and the bundle's
// config.json. Parsing only; bounded inputs; pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/common/json_text.h"

namespace ascend::hook {

inline constexpr std::size_t kMaxStateBytes = 1U << 20;  // the state a hook reads from stdin
inline constexpr std::size_t kMaxSpecBytes = 16U << 20;  // config.json

struct OciState {
  std::string id;
  std::string status;
  int pid = 0;  // 0 when the container has no process (poststop)
  std::string bundle;
};

// Wrong types (a pid that is not an integer, a bundle or id that is not a string) are errors naming the
// field.
Result<OciState> parse_oci_state(std::string_view text);

// config.json as parse_spec read it (rapidjson, json_text.h: the texts nlohmann reads, to the same values; a
// key given twice holds its last value, as runc reads it). Past parse_spec, every field the shim and the hook
// read (process.env and capabilities, root.path, mounts, linux.devices and resources.devices, hooks) has its
// expected type. Written back in the order it was read (write_json). Move-only.
class Spec {
 public:
  const JsonValue& root() const { return doc_.root(); }
  JsonValue& root() { return doc_.root(); }
  JsonAllocator& allocator() { return doc_.allocator(); }

 private:
  friend Result<Spec> parse_spec(std::string_view text);
  JsonDocument doc_;
};

// The boundary where untrusted JSON becomes a value: a wrong type is an error naming the field ("config.json
// hooks.prestart[0].path is not a string"), never an exception. Nesting deeper than 64 levels is refused
// by the parse (which stops there).
Result<Spec> parse_spec(std::string_view text);

// obj[key] when obj is an object that has it, else nullptr.
const JsonValue* json_member(const JsonValue& obj, std::string_view key);
JsonValue* json_member(JsonValue& obj, std::string_view key);
// obj[key] when obj is an object and the field a string, else "".
std::string json_string(const JsonValue& obj, std::string_view key);
// obj[key] when obj is an object and the field an integer, else nullopt.
std::optional<long long> json_integer(const JsonValue& obj, std::string_view key);

// process.env; entries that are not strings are errors.
Result<std::vector<std::string>> spec_env(const Spec& spec);

// root.path made absolute against the bundle.
Result<std::string> spec_rootfs(const Spec& spec, const std::string& bundle);

}  // namespace ascend::hook
