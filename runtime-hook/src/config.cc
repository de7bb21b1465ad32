#include "ascend/hook/config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "ascend/common/fs.h"
#include "ascend/common/yaml_json.h"
#include "ascend/npu/backend.h"

namespace ascend::hook {

namespace {

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool key_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
         ch == '_';
}

// The characters of a plain value the flat reader takes; anything else (quotes, '#', ':', brackets, '&', '*',
// '!', '|', '>', '%', '@', '`', ',', ...) may mean something else to YAML.
bool value_char(char ch) {
  return key_char(ch) || ch == '/' || ch == '.' || ch == '+' || ch == '~' || ch == ' ';
}

}  // namespace

std::optional<nlohmann::json> parse_flat_yaml(std::string_view text) {
  nlohmann::json doc;  // null: no key at all, as yaml-cpp reads an empty or all-comment document
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string_view line =
        text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    for (char ch : line) {
      auto c = static_cast<unsigned char>(ch);
      if (c < 0x20 || c >= 0x7f) return std::nullopt;  // tabs, CR, other controls, non-ASCII (a BOM)
    }
    std::size_t first = line.find_first_not_of(' ');
    if (first == std::string_view::npos || line[first] == '#') continue;  // blank or a comment
    if (first != 0) return std::nullopt;                                  // indented: a nested block
    std::size_t colon = 0;
    while (colon < line.size() && key_char(line[colon])) ++colon;
    if (colon == 0 || colon == line.size() || line[colon] != ':') return std::nullopt;
    if (line[0] == '-' || line[0] == '_') return std::nullopt;  // a sequence entry, or unusual
    std::string key(line.substr(0, colon));
    std::string_view value = line.substr(colon + 1);
    if (!value.empty() && value[0] != ' ') return std::nullopt;  // "a:b" is a scalar, not a key
    if (std::size_t hash = value.find(" #"); hash != std::string_view::npos) value = value.substr(0, hash);
    std::size_t b = value.find_first_not_of(' ');
    value = b == std::string_view::npos ? std::string_view() : value.substr(b);
    while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
    if (!std::all_of(value.begin(), value.end(), value_char)) return std::nullopt;
    if (!value.empty() && value[0] == '-') return std::nullopt;  // "- x" would be a sequence
    if (doc.is_null()) doc = nlohmann::json::object();
    if (doc.contains(key)) return std::nullopt;  // a duplicate: left to yaml-cpp
    doc[key] = value.empty() ? nlohmann::json() : plain_scalar_to_json(value);
  }
  return doc;
}

std::string self_exe_dir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<std::size_t>(n));
  auto slash = p.rfind('/');
  return slash == 0 ? "/" : p.substr(0, slash);
}

Result<Config> load_config(const std::string& path, const ConfigDefaults& defaults) {
  Config c;
  c.hook_path = defaults.exe_dir + "/" + kHookName;
  c.dcmi_helper = defaults.exe_dir + "/" + kDcmiHelperName;
  // The installed lists live in the config folder; a build tree has them next to the binaries.
  c.mount_list_dir = is_dir(defaults.config_dir) ? defaults.config_dir : defaults.exe_dir;
  if (!defaults.log_name.empty()) c.log_file = std::string(kDefaultLogDir) + "/" + defaults.log_name;

  std::string file = path;
  if (file.empty()) {
    std::string def = defaults.config_dir + "/config.yaml";
    if (!is_file(def)) return c;
    file = def;
  }
  // The config names the binaries and folders a root process uses: only root may be able to change it.
  ASCEND_ASSIGN(std::string text, read_protected_file(file, 1U << 20), "config");
  nlohmann::json doc;
  if (auto flat = parse_flat_yaml(text)) {
    doc = std::move(*flat);
  } else {
    ASCEND_ASSIGN(doc, ascend::parse_yaml(text, file), "config");
  }
  // Absolute, because the shim hands it to the hook, which runc starts in another folder.
  if (file[0] != '/') {
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd) != nullptr) file = fmt::format("{}/{}", cwd, file);
  }
  c.config_file = file;
  if (doc.is_null()) return c;  // an empty file: all defaults
  if (!doc.is_object()) return Error::invalid("config " + file + ": expected a mapping of keys to values");

  struct Key {
    const char* name;
    std::string* field;
    bool absolute;  // must be an absolute path
  };
  const Key keys[] = {{"host-root", &c.host_root, true},       {"runtime-path", &c.runtime_path, false},
                      {"hook-path", &c.hook_path, true},       {"mount-list-dir", &c.mount_list_dir, true},
                      {"log-file", &c.log_file, false},        {"log-level", &c.log_level, false},
                      {"injection", &c.injection, false},      {"backend", &c.backend, false},
                      {"dcmi-library", &c.dcmi_library, true}, {"dcmi-helper", &c.dcmi_helper, true}};
  for (const auto& [k, v] : doc.items()) {
    const Key* key = nullptr;
    for (const auto& candidate : keys) {
      if (k == candidate.name) key = &candidate;
    }
    if (k == "accept-env-when-unprivileged") {
      if (!v.is_boolean())
        return Error::invalid(fmt::format("config {}: '{}' must be true or false", file, k));
      c.accept_env_when_unprivileged = v.get<bool>();
      continue;
    }
    if (key == nullptr) {
      return Error::invalid(fmt::format(
          "config {}: unknown key '{}' (known: host-root, runtime-path, hook-path, mount-list-dir, log-file, "
          "log-level, injection, accept-env-when-unprivileged, backend, dcmi-library, "
          "dcmi-helper)",
          file, k));
    }
    if (k == "log-file" && v.is_null()) {  // "log-file:" with no value: no log file
      c.log_file.clear();
      continue;
    }
    if (!v.is_string()) return Error::invalid(fmt::format("config {}: '{}' must be a string", file, k));
    std::string value = v.get<std::string>();
    if (key->absolute && (value.empty() || value[0] != '/')) {
      return Error::invalid(
          fmt::format("config {}: '{}' must be an absolute path, not '{}'", file, k, value));
    }
    if (k == "log-file" && !value.empty() && value[0] != '/') {
      return Error::invalid("config " + file + ": 'log-file' must be an absolute path or empty");
    }
    if (k == "injection" && value != "spec" && value != "hook") {
      return Error::invalid(
          fmt::format("config {}: 'injection' must be spec or hook, not '{}'", file, value));
    }
    if (k == "backend") ASCEND_CHECK(npu::parse_backend(value), fmt::format("config {}: 'backend'", file));
    if (k == "runtime-path" && value.empty())
      return Error::invalid("config " + file + ": 'runtime-path' is empty");
    *key->field = value;
  }
  return c;
}

}  // namespace ascend::hook
