#include "ascend/hook/engine_config.h"

#include <toml++/toml.h>
#include <nlohmann/json.hpp>
#include <sstream>

namespace ascend::hook {

namespace {

using nlohmann::ordered_json;

Result<ordered_json> parse_daemon_json(std::string_view current) {
  bool blank = current.find_first_not_of(" \t\r\n") == std::string_view::npos;
  if (blank) return ordered_json::object();
  auto j = ordered_json::parse(current, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error::invalid("daemon.json is not a JSON object");
  if (j.contains("runtimes") && !j["runtimes"].is_object())
    return Error::invalid("daemon.json: runtimes is not an object");
  return j;
}

Status check_entry(const RuntimeEntry& e) {
  if (e.name.empty() || e.name.find_first_of(" \t\"'.[]=") != std::string::npos) {
    return Error::invalid("runtime name '" + e.name + "' is not a plain name");
  }
  if (e.path.empty() || e.path[0] != '/')
    return Error::invalid("runtime path '" + e.path + "' is not absolute");
  return {};
}

Result<toml::table> parse_toml(std::string_view current) {
  try {
    return toml::parse(current);
  } catch (const toml::parse_error& err) {
    const auto& src = err.source();
    return Error::invalid("config.toml line " + std::to_string(src.begin.line) + ": " +
                          std::string(err.description()));
  }
}

// The CRI plugin table of a version 2 or 3 file, created when missing.
Result<toml::table*> cri_table(toml::table& root, bool create) {
  long long version = 1;
  if (auto v = root["version"].value<long long>()) {
    version = *v;
  } else if (root.empty()) {
    version = 2;
    if (create) root.insert("version", 2);
  }
  const char* plugin = nullptr;
  if (version == 2) plugin = "io.containerd.grpc.v1.cri";
  if (version == 3) plugin = "io.containerd.cri.v1.runtime";
  if (plugin == nullptr) {
    return Error::invalid("containerd config version " + std::to_string(version) +
                          " is not supported (2 or 3; run 'containerd config migrate')");
  }
  toml::table* t = &root;
  for (const char* key : {"plugins", plugin, "containerd"}) {
    toml::node* n = t->get(key);
    if (n == nullptr) {
      if (!create) return static_cast<toml::table*>(nullptr);
      t->insert(key, toml::table{});
      n = t->get(key);
    }
    if (!n->is_table()) return Error::invalid(std::string("config.toml: ") + key + " is not a table");
    t = n->as_table();
  }
  return t;
}

std::string dump(const toml::table& t) {
  std::ostringstream out;
  out << t << "\n";
  return out.str();
}

}  // namespace

Result<std::string> configure_docker(std::string_view current, const RuntimeEntry& entry) {
  ASCEND_CHECK(check_entry(entry), "");
  ASCEND_ASSIGN(ordered_json j, parse_daemon_json(current), "");
  ordered_json rt = {{"path", entry.path}};
  if (!entry.runtime_args.empty()) rt["runtimeArgs"] = entry.runtime_args;
  j["runtimes"][entry.name] = rt;
  if (entry.set_default) j["default-runtime"] = entry.name;
  return j.dump(2) + "\n";
}

Result<std::string> unconfigure_docker(std::string_view current, const std::string& name) {
  ASCEND_ASSIGN(ordered_json j, parse_daemon_json(current), "");
  if (j.contains("runtimes")) {
    j["runtimes"].erase(name);
    if (j["runtimes"].empty()) j.erase("runtimes");
  }
  if (j.contains("default-runtime") && j["default-runtime"] == name) j.erase("default-runtime");
  return j.dump(2) + "\n";
}

Result<std::string> configure_containerd(std::string_view current, const RuntimeEntry& entry) {
  ASCEND_CHECK(check_entry(entry), "");
  if (!entry.runtime_args.empty()) {
    return Error::invalid(
        "containerd's runc shim takes no runtime arguments; put the config at the default path");
  }
  ASCEND_ASSIGN(toml::table root, parse_toml(current), "");
  ASCEND_ASSIGN(toml::table * containerd, cri_table(root, true), "");
  toml::node* runtimes = containerd->get("runtimes");
  if (runtimes == nullptr) {
    containerd->insert("runtimes", toml::table{});
    runtimes = containerd->get("runtimes");
  }
  if (!runtimes->is_table()) return Error::invalid("config.toml: containerd.runtimes is not a table");
  toml::table rt{{"runtime_type", "io.containerd.runc.v2"},
                 {"options", toml::table{{"BinaryName", entry.path}}}};
  runtimes->as_table()->insert_or_assign(entry.name, std::move(rt));
  if (entry.set_default) containerd->insert_or_assign("default_runtime_name", entry.name);
  return dump(root);
}

Result<std::string> unconfigure_containerd(std::string_view current, const std::string& name) {
  ASCEND_ASSIGN(toml::table root, parse_toml(current), "");
  ASCEND_ASSIGN(toml::table * containerd, cri_table(root, false), "");
  if (containerd != nullptr) {
    if (auto* runtimes = containerd->get_as<toml::table>("runtimes")) runtimes->erase(name);
    if (auto def = (*containerd)["default_runtime_name"].value<std::string>(); def && *def == name) {
      containerd->insert_or_assign("default_runtime_name", "runc");
    }
  }
  return dump(root);
}

}  // namespace ascend::hook
