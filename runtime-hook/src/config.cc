#include "ascend/hook/config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

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

namespace {

// The type names of the options whose value is not a plain string (CLI11's messages show them).
constexpr const char* kTextOrNothing = "TEXT or nothing";
constexpr const char* kBoolean = "true|false";

// A key's value: a string, a string or nothing (null: empty), or a YAML boolean.
enum class Kind { kText, kTextOrNothing, kBoolean };

// A check on a key's value: empty when it is right, else what follows "config FILE: ".
using Check = std::string (*)(std::string_view key, const std::string& value);

std::string absolute_path(std::string_view key, const std::string& v) {
  return !v.empty() && v[0] == '/' ? std::string()
                                   : fmt::format("'{}' must be an absolute path, not '{}'", key, v);
}

// The config file's keys, in the order an unknown key's message lists them: each one's field, the kind of its
// value and its check. The one list of keys: CLI11's options are made from it (add_keys) and the flat reader
// reads through it (read_config_flat).
struct Key {
  const char* name;
  Kind kind;
  std::string Config::*text;  // a string's field; nullptr for a boolean
  bool Config::*flag;         // a boolean's field; nullptr for a string
  Check check;                // nullptr: any value
};

constexpr Key kKeys[] = {
    {"host-root", Kind::kText, &Config::host_root, nullptr, absolute_path},
    {"runtime-path", Kind::kText, &Config::runtime_path, nullptr,
     [](std::string_view /*key*/, const std::string& v) {
       return v.empty() ? std::string("'runtime-path' is empty") : std::string();
     }},
    {"hook-path", Kind::kText, &Config::hook_path, nullptr, absolute_path},
    {"mount-list-dir", Kind::kText, &Config::mount_list_dir, nullptr, absolute_path},
    {"log-file", Kind::kTextOrNothing, &Config::log_file, nullptr,
     [](std::string_view /*key*/, const std::string& v) {
       return !v.empty() && v[0] != '/' ? std::string("'log-file' must be an absolute path or empty")
                                        : std::string();
     }},
    {"log-level", Kind::kText, &Config::log_level, nullptr, nullptr},
    {"injection", Kind::kText, &Config::injection, nullptr,
     [](std::string_view /*key*/, const std::string& v) {
       return v == "spec" || v == "hook" ? std::string()
                                         : fmt::format("'injection' must be spec or hook, not '{}'", v);
     }},
    {"accept-env-when-unprivileged", Kind::kBoolean, nullptr, &Config::accept_env_when_unprivileged, nullptr},
    {"backend", Kind::kText, &Config::backend, nullptr,
     [](std::string_view /*key*/, const std::string& v) {
       auto b = npu::parse_backend(v);
       return b ? std::string() : b.error().context("'backend'").message();
     }},
    {"dcmi-library", Kind::kText, &Config::dcmi_library, nullptr, absolute_path},
    {"dcmi-helper", Kind::kText, &Config::dcmi_helper, nullptr, absolute_path},
};

const Key* key_named(std::string_view name) {
  const Key* k =
      std::find_if(std::begin(kKeys), std::end(kKeys), [&](const Key& x) { return name == x.name; });
  return k == std::end(kKeys) ? nullptr : k;
}

// A key's value as the text its CLI11 option takes ("true" or "false" for a boolean, "" for nothing), or
// what is wrong with its kind (empty when right). Both readers take a value through here.
std::string input_of(const Key& k, const nlohmann::json& value, std::string& input) {
  if (k.kind == Kind::kBoolean) {
    if (!value.is_boolean()) return fmt::format("'{}' must be true or false", k.name);
    input = value.get<bool>() ? "true" : "false";
  } else if (k.kind == Kind::kTextOrNothing && value.is_null()) {  // "log-file:" with no value: no log file
    input.clear();
  } else {
    if (!value.is_string()) return fmt::format("'{}' must be a string", k.name);
    input = value.get<std::string>();
  }
  return {};
}

// The config file's keys: one option each, bound to its field and carrying its value's check.
void add_keys(CLI::App& app, Config& c) {
  app.set_help_flag();  // "help" is not a key
  for (const Key& key : kKeys) {
    CLI::Option* opt = key.kind == Kind::kBoolean
                           ? app.add_option(std::string("--") + key.name, c.*key.flag)->type_name(kBoolean)
                           : app.add_option(std::string("--") + key.name, c.*key.text);
    if (key.kind == Kind::kTextOrNothing) opt->type_name(kTextOrNothing);
    if (key.check != nullptr) {
      opt->check(CLI::Validator(
          [check = key.check, name = std::string_view(key.name)](std::string& v) { return check(name, v); },
          ""));
    }
  }
}

// CLI11's config reader for the file: the flat form (parse_flat_yaml) or, failing that, YAML; a mapping of
// key names to values. Unknown keys and values of the wrong kind are refused here, naming the file; CLI11
// then applies each value through its option's check.
class ConfigFile final : public CLI::Config {
 public:
  // `given`: the path as given (YAML errors name it); `file`: the absolute one (every other error names it).
  ConfigFile(const CLI::App& app, std::string given, std::string file)
      : app_(app), given_(std::move(given)), file_(std::move(file)) {}

  std::string to_config(const CLI::App* /*app*/, bool /*defaults*/, bool /*descriptions*/,
                        std::string /*prefix*/) const override {
    return {};  // never written: the installer writes the file
  }

  std::vector<CLI::ConfigItem> from_config(std::istream& in) const override {
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    nlohmann::json doc;
    if (auto flat = parse_flat_yaml(text)) {
      doc = std::move(*flat);
    } else {
      auto yaml = ascend::parse_yaml(text, given_);
      if (!yaml) throw CLI::ConfigError(yaml.error().context("config").message());
      doc = std::move(*yaml);
    }
    std::vector<CLI::ConfigItem> items;
    if (doc.is_null()) return items;  // an empty file: all defaults
    if (!doc.is_object()) throw CLI::ConfigError(refusal("expected a mapping of keys to values"));
    // Keys in name order, each checked in full before the next: the items before a key of the wrong kind go
    // through their options' checks first, and the refusal is reported after them (refused()).
    for (const auto& [key, value] : doc.items()) {
      CLI::ConfigItem item;
      if (auto why = to_item(key, value, item); !why.empty()) {
        refused_ = refusal(why);
        break;
      }
      items.push_back(std::move(item));
    }
    return items;
  }

  // The refusal of the key that stopped from_config; empty when none did.
  const std::string& refused() const { return refused_; }

 private:
  std::string refusal(const std::string& what) const { return fmt::format("config {}: {}", file_, what); }

  // Fills `item` from a key and its value, or says what is wrong with them.
  std::string to_item(const std::string& key, const nlohmann::json& value, CLI::ConfigItem& item) const {
    const Key* k = key_named(key);
    if (k == nullptr || app_.get_option_no_throw("--" + key) == nullptr)
      return fmt::format("unknown key '{}' (known: {})", key, known_keys());
    item.name = key;
    std::string input;
    if (auto why = input_of(*k, value, input); !why.empty()) return why;
    item.inputs = {std::move(input)};
    return {};
  }

  std::string known_keys() const {
    std::string out;
    for (const CLI::Option* o : app_.get_options())
      out.append(out.empty() ? "" : ", ").append(o->get_single_name());
    return out;
  }

  const CLI::App& app_;
  std::string given_;
  std::string file_;
  mutable std::string refused_;
};

}  // namespace

bool read_config_flat(std::string_view text, Config& c) {
  auto doc = parse_flat_yaml(text);
  if (!doc) return false;
  Config read = c;
  for (const auto& [name, value] : doc->items()) {  // none for comments only: every default
    const Key* key = key_named(name);
    std::string v;
    if (key == nullptr || !input_of(*key, value, v).empty()) return false;
    if (key->kind == Kind::kBoolean) {
      read.*key->flag = v == "true";
      continue;
    }
    if (key->check != nullptr && !key->check(key->name, v).empty()) return false;
    read.*key->text = std::move(v);
  }
  c = std::move(read);
  return true;
}

Status read_config_cli11(std::string_view text, Config& c, const std::string& given,
                         const std::string& file) {
  CLI::App app;
  add_keys(app, c);
  auto reader = std::make_shared<ConfigFile>(app, given, file);
  app.config_formatter(reader);
  std::istringstream in{std::string(text)};
  try {
    app.parse_from_stream(in);
  } catch (const CLI::ValidationError& e) {
    // CLI11 puts the option's name before its check's message ("--host-root: ...").
    const std::string what = e.what();
    const auto colon = what.find(": ");
    return Error::invalid(
        fmt::format("config {}: {}", file, colon == std::string::npos ? what : what.substr(colon + 2)));
  } catch (const CLI::Error& e) {
    return Error::invalid(e.what());
  }
  if (!reader->refused().empty()) return Error::invalid(reader->refused());
  return {};
}

Result<Config> load_config(const std::string& path, const ConfigDefaults& defaults, ConfigReaders readers) {
  Config c;
  c.hook_path = defaults.exe_dir + "/" + kHookName;
  c.dcmi_helper = defaults.exe_dir + "/" + kDcmiHelperName;
  // The installed lists live in the config folder; a build tree has them next to the binaries.
  c.mount_list_dir = is_dir(defaults.config_dir) ? defaults.config_dir : defaults.exe_dir;
  if (!defaults.log_name.empty()) c.log_file = std::string(kDefaultLogDir) + "/" + defaults.log_name;

  std::string given = path;
  if (given.empty()) {
    std::string def = defaults.config_dir + "/config.yaml";
    if (!is_file(def)) return c;
    given = def;
  }
  // The config names the binaries and folders a root process uses: only root may be able to change it.
  ASCEND_ASSIGN(std::string text, read_protected_file(given, 1U << 20), "config");
  // Absolute, because the shim hands it to the hook, which runc starts in another folder.
  std::string file = given;
  if (file[0] != '/') {
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd) != nullptr) file = fmt::format("{}/{}", cwd, file);
  }
  // The installer's flat form without CLI11; anything else, every fault included, through CLI11's reader.
  if (!read_config_flat(text, c)) {
    if (readers == ConfigReaders::flat_only) return Error::invalid(given + ": not the installer's flat form");
    if (auto applied = read_config_cli11(text, c, given, file); !applied) return applied.error();
  }
  c.config_file = file;
  return c;
}

}  // namespace ascend::hook
