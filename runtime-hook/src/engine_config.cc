#include "ascend/hook/engine_config.h"

#include <toml++/toml.h>
#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ascend/common/fs.h"

namespace ascend::hook {

namespace {

using nlohmann::ordered_json;

Result<ordered_json> parse_daemon_json(std::string_view current) {
  bool blank = current.find_first_not_of(" \t\r\n") == std::string_view::npos;
  if (blank) return ordered_json::object();
  ordered_json j;
  try {
    j = ordered_json::parse(current);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based and points just past the offending character: report its line and column.
    std::size_t at = e.byte == 0 ? 0 : std::min<std::size_t>(e.byte - 1, current.size());
    std::size_t line = 1 + static_cast<std::size_t>(std::count(current.begin(), current.begin() + at, '\n'));
    std::size_t line_start = current.rfind('\n', at == 0 ? 0 : at - 1);
    std::size_t column = line_start == std::string_view::npos || at == 0 ? at + 1 : at - line_start;
    return Error::invalid("daemon.json line " + std::to_string(line) + " column " + std::to_string(column) +
                          ": not valid JSON");
  }
  if (!j.is_object()) return Error::invalid("daemon.json is not a JSON object");
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

namespace {

// The whole file re-serialised by toml++: values kept, comments and layout lost.
Result<std::string> rewrite_containerd(std::string_view current, const RuntimeEntry& entry) {
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

Result<std::string> rewrite_unconfigured_containerd(std::string_view current, const std::string& name) {
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

// The header of the runtime's table, as configure appends it:
// [plugins."<plugin>".containerd.runtimes.<name>].
std::string runtime_header(const toml::table& root, const std::string& name) {
  auto version = root["version"].value<long long>().value_or(2);
  const char* plugin = version == 3 ? "io.containerd.cri.v1.runtime" : "io.containerd.grpc.v1.cri";
  return std::string("[plugins.\"") + plugin + "\".containerd.runtimes." + name + "]";
}

std::string toml_string(const std::string& s) {
  std::ostringstream out;
  out << toml::value<std::string>(s);
  return out.str();
}

// `text` without the table `header` and its sub-tables (up to the next other header), and without the blank
// line that configure put before it. Unchanged when the header is not there on a line of its own.
std::string remove_table(std::string_view text, const std::string& header) {
  std::string sub = header.substr(0, header.size() - 1) + ".";
  std::string out;
  bool skipping = false;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    std::size_t next = end == std::string_view::npos ? text.size() : end + 1;
    std::string_view line = text.substr(pos, next - pos);
    std::string_view bare = line.substr(0, line.find_last_not_of(" \t\r\n") + 1);
    if (bare.rfind('[', 0) == 0) {
      bool ours = bare == header || bare.rfind(sub, 0) == 0;
      if (ours && !skipping && out.size() >= 2 && out.compare(out.size() - 2, 2, "\n\n") == 0) out.pop_back();
      skipping = ours;
    }
    if (!skipping) out.append(line);
    pos = next;
  }
  return out;
}

// The edit as text, if it gives the same values as the full rewrite; else the rewrite.
Result<std::string> keep_text_if_same(std::string candidate, const std::string& rewritten) {
  try {
    if (toml::parse(candidate) == toml::parse(rewritten)) return candidate;
  } catch (const toml::parse_error&) {
    // the text edit is not valid TOML (the table was defined another way): the rewrite it is
  }
  return rewritten;
}

}  // namespace

// Appends the runtime's table to the file's own text (after removing a previous one), so comments and every
// other table stay as they are; when that cannot give the same values as a full rewrite (the entry written in
// another form, set_default), the file is rewritten by toml++, which keeps values but drops comments.
Result<std::string> configure_containerd(std::string_view current, const RuntimeEntry& entry) {
  ASCEND_CHECK(check_entry(entry), "");
  ASCEND_ASSIGN(std::string rewritten, rewrite_containerd(current, entry), "");
  ASCEND_ASSIGN(toml::table root, parse_toml(current), "");
  if (entry.set_default) return rewritten;
  std::string header = runtime_header(root, entry.name);
  std::string text = remove_table(current, header);
  if (root.empty() && !root.contains("version")) text += "version = 2\n";
  if (!text.empty() && text.back() != '\n') text += '\n';
  if (!text.empty()) text += '\n';
  text += header + "\n  runtime_type = \"io.containerd.runc.v2\"\n";
  text +=
      header.substr(0, header.size() - 1) + ".options]\n    BinaryName = " + toml_string(entry.path) + "\n";
  return keep_text_if_same(std::move(text), rewritten);
}

Result<std::string> unconfigure_containerd(std::string_view current, const std::string& name) {
  ASCEND_ASSIGN(std::string rewritten, rewrite_unconfigured_containerd(current, name), "");
  ASCEND_ASSIGN(toml::table root, parse_toml(current), "");
  return keep_text_if_same(remove_table(current, runtime_header(root, name)), rewritten);
}

Result<std::string> edit_engine_config(EngineEdit edit) {
  const bool docker = edit.engine == "docker";
  if (!docker && edit.engine != "containerd") {
    return Error::invalid("unknown engine '" + edit.engine + "' (docker or containerd)");
  }
  if (edit.file.empty()) edit.file = docker ? "/etc/docker/daemon.json" : "/etc/containerd/config.toml";
  std::string current;
  if (auto text = read_file(edit.file, 4U << 20)) {
    current = std::move(*text);
  } else if (text.error().code() != ENOENT) {
    return text.error();
  }
  Result<std::string> out =
      edit.add ? (docker ? configure_docker(current, edit.entry) : configure_containerd(current, edit.entry))
               : (docker ? unconfigure_docker(current, edit.entry.name)
                         : unconfigure_containerd(current, edit.entry.name));
  if (!out) return out.error().context(edit.file);
  if (edit.dry_run) return out;
  const auto slash = edit.file.rfind('/');
  if (slash != std::string::npos && slash > 0) ASCEND_CHECK(make_dirs(edit.file.substr(0, slash)), "");
  ASCEND_CHECK(atomic_replace(edit.file, *out, 0644), "");
  return "updated " + edit.file + "; restart " + (docker ? "dockerd" : "containerd") + " to apply it\n";
}

}  // namespace ascend::hook
