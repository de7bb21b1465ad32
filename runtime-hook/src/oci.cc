#include "ascend/hook/oci.h"

namespace ascend::hook {

using nlohmann::ordered_json;

Result<OciState> parse_oci_state(std::string_view text) {
  if (text.size() > kMaxStateBytes) return Error(EFBIG, "OCI state larger than 1 MiB");
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error::invalid("OCI state on stdin is not a JSON object");
  OciState s;
  if (!j.contains("bundle") || !j["bundle"].is_string()) return Error::invalid("OCI state has no bundle");
  s.bundle = j["bundle"].get<std::string>();
  if (s.bundle.empty() || s.bundle[0] != '/')
    return Error::invalid("OCI state bundle '" + s.bundle + "' is not absolute");
  if (j.contains("id") && j["id"].is_string()) s.id = j["id"].get<std::string>();
  if (j.contains("status") && j["status"].is_string()) s.status = j["status"].get<std::string>();
  if (j.contains("pid")) {
    if (!j["pid"].is_number_integer() || j["pid"].get<long long>() < 0 ||
        j["pid"].get<long long>() > (1 << 30)) {
      return Error::invalid("OCI state pid is not a process id");
    }
    s.pid = j["pid"].get<int>();
  }
  return s;
}

Result<ordered_json> parse_spec(std::string_view text) {
  if (text.size() > kMaxSpecBytes) return Error(EFBIG, "config.json larger than 16 MiB");
  auto j = ordered_json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error::invalid("config.json is not a JSON object");
  return j;
}

Result<std::vector<std::string>> spec_env(const ordered_json& spec) {
  std::vector<std::string> env;
  auto p = spec.find("process");
  if (p == spec.end() || !p->is_object()) return env;
  auto e = p->find("env");
  if (e == p->end() || e->is_null()) return env;
  if (!e->is_array()) return Error::invalid("config.json process.env is not a list");
  for (const auto& v : *e) {
    if (!v.is_string()) return Error::invalid("config.json process.env holds a non-string entry");
    env.push_back(v.get<std::string>());
  }
  return env;
}

Result<std::string> spec_rootfs(const ordered_json& spec, const std::string& bundle) {
  auto r = spec.find("root");
  if (r == spec.end() || !r->is_object() || !r->contains("path") || !(*r)["path"].is_string()) {
    return Error::invalid("config.json has no root.path");
  }
  std::string p = (*r)["path"].get<std::string>();
  if (p.empty()) return Error::invalid("config.json root.path is empty");
  if (p[0] == '/') return p;
  return bundle + (bundle.back() == '/' ? "" : "/") + p;
}

}  // namespace ascend::hook
