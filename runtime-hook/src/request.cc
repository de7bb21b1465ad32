#include "ascend/hook/request.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace ascend::hook {

namespace {

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) s.remove_suffix(1);
  return std::string(s);
}

std::vector<std::string> split_commas(std::string_view s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    std::size_t comma = s.find(',', start);
    out.push_back(
        trim(s.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

// A decimal id: digits only, at most 6 of them.
std::optional<int> parse_id(std::string_view s) {
  if (s.empty() || s.size() > 6) return std::nullopt;
  int v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + (ch - '0');
  }
  return v;
}

bool no_devices(const std::string& v) {
  std::string l = lower(trim(v));
  return l.empty() || l == "void" || l == "none";
}

// "Ascend910" for a host whose resource is "huawei.com/Ascend910".
std::string chip_name_prefix(const npu::DeviceSnapshot& host) {
  auto slash = host.resource_name.rfind('/');
  std::string p = slash == std::string::npos ? host.resource_name : host.resource_name.substr(slash + 1);
  return p.empty() ? "Ascend" : p;
}

class DeviceParser {
 public:
  DeviceParser(const std::string& value, const npu::DeviceSnapshot& host, bool is_virtual)
      : value_(value), host_(host), virtual_(is_virtual) {
    if (virtual_) {
      for (const auto& v : host.vnpus) valid_.insert(v.id);
    } else {
      for (const auto& c : host.chips) valid_.insert(c.phy_id);
    }
  }

  Result<std::vector<int>> parse() {
    if (lower(trim(value_)) == "all") {
      if (valid_.empty()) return fail(virtual_ ? "no vNPU exists on this host" : "this host has no device");
      return std::vector<int>(valid_.begin(), valid_.end());
    }
    std::set<int> ids;
    for (const auto& tok : split_commas(value_)) {
      if (tok.empty()) return fail("empty entry");
      auto dash = tok.find('-');
      if (auto id = parse_id(tok)) {
        ASCEND_CHECK(add(ids, *id), "");
      } else if (auto named = parse_name(tok)) {
        if (!named->ok()) return named->error();
        ASCEND_CHECK(add(ids, named->value()), "");
      } else if (dash != std::string::npos) {
        auto lo = parse_id(trim(tok.substr(0, dash)));
        auto hi = parse_id(trim(tok.substr(dash + 1)));
        if (!lo || !hi) return fail("'" + tok + "' is neither an id, a range nor a device name");
        if (*lo > *hi) return fail("reversed range " + tok);
        for (int id = *lo; id <= *hi; ++id) ASCEND_CHECK(add(ids, id), "");
      } else {
        return fail("'" + tok + "' is neither an id, a range nor a device name");
      }
    }
    return std::vector<int>(ids.begin(), ids.end());
  }

 private:
  // Ascend910-3 (the host's chip family) or npu-3. nullopt: not name-shaped at all.
  std::optional<Result<int>> parse_name(const std::string& tok) {
    auto dash = tok.rfind('-');
    if (dash == std::string::npos || dash == 0) return std::nullopt;
    std::string prefix = tok.substr(0, dash);
    auto id = parse_id(tok.substr(dash + 1));
    if (!id) return std::nullopt;
    if (lower(prefix) == "npu") return Result<int>(*id);
    if (lower(prefix).rfind("ascend", 0) != 0) return std::nullopt;
    std::string want = chip_name_prefix(host_);
    if (lower(prefix) != lower(want)) {
      return Result<int>(invalid("device name '" + tok + "' does not match this host's chips (use " + want +
                                 "-N or npu-N)"));
    }
    return Result<int>(*id);
  }

  Status add(std::set<int>& ids, int id) {
    if (valid_.count(id) == 0) {
      return invalid(std::string(virtual_ ? "no vNPU " : "no device ") + std::to_string(id) +
                     " on this host");
    }
    ids.insert(id);
    return {};
  }

  Error invalid(const std::string& what) const {
    std::vector<int> valid(valid_.begin(), valid_.end());
    std::string hint = valid.empty()
                           ? (virtual_ ? "no vNPU exists" : "no device exists")
                           : std::string(virtual_ ? "valid vNPU ids: " : "valid ids: ") + format_ids(valid);
    return Error::invalid(std::string(kEnvVisibleDevices) + "=" + value_ + ": " + what + " (" + hint + ")");
  }
  Error fail(const std::string& what) const { return invalid(what); }

  const std::string& value_;
  const npu::DeviceSnapshot& host_;
  bool virtual_;
  std::set<int> valid_;
};

bool valid_list_name(const std::string& n) {
  if (n.empty() || n[0] == '.' || n.size() > 64) return false;
  return std::all_of(n.begin(), n.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '-' || ch == '_' || ch == '.';
  });
}

}  // namespace

std::optional<std::string> env_value(const std::vector<std::string>& env, std::string_view key) {
  std::optional<std::string> found;
  for (const auto& e : env) {
    if (e.size() > key.size() && e.compare(0, key.size(), key) == 0 && e[key.size()] == '=') {
      found = e.substr(key.size() + 1);
    } else if (e == key) {
      found = std::string();  // "KEY" alone: an empty value
    }
  }
  return found;
}

bool requests_devices(const std::vector<std::string>& env) {
  auto v = env_value(env, kEnvVisibleDevices);
  return v && !no_devices(*v);
}

std::string format_ids(const std::vector<int>& ids) {
  std::string out;
  std::size_t i = 0;
  while (i < ids.size()) {
    std::size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(ids[i]);
    if (j > i)
      out.append(j == i + 1 ? "," : "-").append(std::to_string(ids[j]));  // not `"-" + ...`: -Wrestrict
    i = j + 1;
  }
  return out;
}

Result<std::optional<Request>> parse_request(const std::vector<std::string>& env,
                                             const npu::DeviceSnapshot& host) {
  if (!requests_devices(env)) return std::optional<Request>();
  Request r;

  if (auto opts = env_value(env, kEnvRuntimeOptions); opts && !trim(*opts).empty()) {
    for (const auto& o : split_commas(*opts)) {
      if (o == "NODRV") {
        r.nodrv = true;
      } else if (o == "VIRTUAL") {
        r.is_virtual = true;
      } else {
        return Error::invalid(std::string(kEnvRuntimeOptions) + "=" + *opts + ": unknown option '" + o +
                              "' (valid: NODRV, VIRTUAL)");
      }
    }
  }

  if (auto mounts = env_value(env, kEnvRuntimeMounts); mounts && !trim(*mounts).empty()) {
    r.mount_lists.clear();
    for (const auto& m : split_commas(*mounts)) {
      if (!valid_list_name(m)) {
        return Error::invalid(std::string(kEnvRuntimeMounts) + "=" + *mounts + ": '" + m +
                              "' is not a mount-list name (letters, digits, '-', '_', '.')");
      }
      if (std::find(r.mount_lists.begin(), r.mount_lists.end(), m) == r.mount_lists.end())
        r.mount_lists.push_back(m);
    }
  }

  if (auto link = env_value(env, kEnvAllowLink); link && !trim(*link).empty()) {
    std::string l = lower(trim(*link));
    if (l == "true") {
      r.allow_link = true;
    } else if (l != "false") {
      return Error::invalid(std::string(kEnvAllowLink) + "=" + *link + ": expected True or False");
    }
  }

  std::string devices = *env_value(env, kEnvVisibleDevices);
  ASCEND_ASSIGN(r.ids, DeviceParser(devices, host, r.is_virtual).parse(), "");

  if (auto spec = env_value(env, kEnvVnpuSpecs); spec && !trim(*spec).empty()) {
    std::string name = trim(*spec);
    std::string prefix = std::string(kEnvVnpuSpecs) + "=" + *spec + ": ";
    if (r.is_virtual)
      return Error::invalid(prefix + "cannot be combined with VIRTUAL (it creates the vNPU itself)");
    if (r.ids.size() != 1) {
      return Error::invalid(prefix + "needs exactly one physical device in " + kEnvVisibleDevices + ", got " +
                            devices);
    }
    if (host.find_template(name) == nullptr) {
      std::string names;
      for (const auto& t : host.templates) names += (names.empty() ? "" : ", ") + t.name;
      return Error::invalid(prefix + "unknown vNPU template (valid: " + (names.empty() ? "none" : names) +
                            ")");
    }
    r.vnpu_template = name;
  }
  return std::optional<Request>(std::move(r));
}

}  // namespace ascend::hook
