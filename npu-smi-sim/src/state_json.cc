// The state file's JSON form (state.h: serialize, parse_state, state_from_json and to_json).
#include "ascend/npu/state.h"

#include <fmt/format.h>
#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

namespace ascend::npu {

using nlohmann::json;

namespace {

// Reads fields of one JSON object, remembering which were seen so that unknown ones can be reported.
class Reader {
 public:
  Reader(const json& j, std::string where) : j_(j), where_(std::move(where)) {
    if (!j.is_object()) err_ = where_ + ": expected an object";
  }

  template <typename T>
  void get(const char* key, T& out) {
    seen_.insert(key);
    if (!err_.empty() || !j_.contains(key)) return;
    const json& v = j_.at(key);
    try {
      if constexpr (std::is_same_v<T, std::string>) {
        out = v.is_string() ? v.get<std::string>() : v.dump();
      } else if constexpr (std::is_same_v<T, bool>) {
        out = v.get<bool>();
      } else if constexpr (std::is_integral_v<T>) {
        if (!v.is_number_integer()) throw std::runtime_error("expected an integer");
        out = v.get<T>();
      } else if constexpr (std::is_floating_point_v<T>) {
        if (!v.is_number()) throw std::runtime_error("expected a number");
        out = v.get<T>();
      } else {
        out = v.get<T>();
      }
    } catch (const std::exception& e) {
      err_ = where_ + "." + key + ": " + e.what();
    }
  }

  // Marks a key as known without reading it (the caller handles it).
  const json* sub(const char* key) {
    seen_.insert(key);
    if (!err_.empty() || !j_.contains(key)) return nullptr;
    return &j_.at(key);
  }

  void fail(std::string msg) {
    if (err_.empty()) err_ = std::move(msg);
  }

  Status finish() {
    if (err_.empty() && j_.is_object()) {
      for (auto it = j_.begin(); it != j_.end(); ++it) {
        if (seen_.count(it.key()) == 0) {
          err_ = where_ + ": unknown field '" + it.key() + "'";
          break;
        }
      }
    }
    if (!err_.empty()) return Error::invalid(err_);
    return {};
  }

  const std::string& where() const { return where_; }

 private:
  const json& j_;
  std::string where_;
  std::set<std::string, std::less<>> seen_;
  std::string err_;
};

std::string hex_code(std::uint32_t code) {
  return fmt::format("0x{:08X}", code);
}

Result<std::uint32_t> parse_code(const std::string& s) {
  try {
    std::size_t pos = 0;
    unsigned long v = std::stoul(s, &pos, 0);
    if (pos != s.size() || v > 0xFFFFFFFFUL) throw std::out_of_range("range");
    return static_cast<std::uint32_t>(v);
  } catch (const std::exception&) {
    return Error::invalid("bad fault code '" + s + "' (expected 0xHEX)");
  }
}

template <typename T, typename F>
Status read_list(Reader& r, const char* key, std::vector<T>& out, F&& one) {
  const json* arr = r.sub(key);
  if (arr == nullptr) return {};
  if (!arr->is_array()) return Error::invalid(r.where() + "." + key + ": expected a list");
  out.clear();
  for (std::size_t i = 0; i < arr->size(); ++i) {
    T item{};
    Reader sub((*arr)[i], r.where() + "." + key + "[" + std::to_string(i) + "]");
    one(sub, item);
    if (auto s = sub.finish(); !s) return s;
    out.push_back(std::move(item));
  }
  return {};
}

}  // namespace

void to_json(json& j, const HostState& s) {
  j = json::object();
  j["schema"] = s.schema;
  j["profile"] = s.profile;
  j["description"] = s.description;
  j["family"] = to_string(s.family);
  j["chip_type"] = s.chip_type;
  j["smi_version"] = s.smi_version;
  j["driver_version"] = s.driver_version;
  j["firmware_version"] = s.firmware_version;
  j["resource_name"] = s.resource_name;
  const auto& c = s.vnpu_capacity;
  j["vnpu_capacity"] = {{"aicore", c.aicore}, {"memory_gb", c.memory_gb}, {"aicpu", c.aicpu},
                        {"vpc", c.vpc},       {"venc", c.venc},           {"vdec", c.vdec},
                        {"jpegd", c.jpegd},   {"jpege", c.jpege},         {"pngd", c.pngd}};
  j["templates"] = json::array();
  for (const auto& t : s.templates) {
    j["templates"].push_back({{"name", t.name},
                              {"aicore", t.aicore},
                              {"memory_mb", t.memory_mb},
                              {"aicpu", t.aicpu},
                              {"vpc", t.vpc},
                              {"venc", t.venc},
                              {"vdec", t.vdec},
                              {"jpegd", t.jpegd},
                              {"jpege", t.jpege},
                              {"pngd", t.pngd}});
  }
  j["chips"] = json::array();
  for (const auto& ch : s.chips) {
    json cj = {{"phy_id", ch.phy_id},
               {"logic_id", ch.logic_id},
               {"card_id", ch.card_id},
               {"chip_index", ch.chip_index},
               {"name", ch.name},
               {"bus_id", ch.bus_id},
               {"numa_node", ch.numa_node},
               {"cpu_affinity", ch.cpu_affinity},
               {"hccs_domain", ch.hccs_domain},
               {"device_ip", ch.device_ip},
               {"aicore_count", ch.aicore_count},
               {"hbm_total_mb", ch.hbm_total_mb},
               {"hbm_used_mb", ch.hbm_used_mb},
               {"mem_total_mb", ch.mem_total_mb},
               {"mem_used_mb", ch.mem_used_mb},
               {"power_w", ch.power_w},
               {"power_na", ch.power_na},
               {"temp_c", ch.temp_c},
               {"aicore_usage_pct", ch.aicore_usage_pct},
               {"hugepages_used", ch.hugepages_used},
               {"hugepages_total", ch.hugepages_total}};
    // Written only when they differ from their default, so that the state of a host nobody loaded or
    // unplugged reads as before.
    if (ch.aicpu_usage_pct != 0) cj["aicpu_usage_pct"] = ch.aicpu_usage_pct;
    if (!ch.link_up) cj["link_up"] = false;
    cj["processes"] = json::array();
    for (const auto& p : ch.processes) {
      cj["processes"].push_back(
          {{"pid", p.pid}, {"name", p.name}, {"memory_mb", p.memory_mb}, {"container_pid", p.container_pid}});
    }
    cj["faults"] = json::array();
    for (const auto& f : ch.faults) {
      cj["faults"].push_back({{"code", hex_code(f.code)}, {"severity", to_string(f.severity)}});
    }
    j["chips"].push_back(std::move(cj));
  }
  j["vnpus"] = json::array();
  for (const auto& v : s.vnpus) {
    j["vnpus"].push_back({{"id", v.id},
                          {"phy_id", v.phy_id},
                          {"template", v.template_name},
                          {"vgroup", v.vgroup},
                          {"container_id", v.owner.container_id},
                          {"status", v.status}});
    if (v.dynamic()) {
      j["vnpus"].back()["owner"] = {{"state_root", v.owner.state_root},
                                    {"pid", v.owner.pid},
                                    {"pid_start", v.owner.pid_start},
                                    {"pid_ns", v.owner.pid_ns},
                                    {"boot", v.owner.boot}};
    }
  }
  if (!s.workloads.empty()) {
    j["workloads"] = json::array();
    for (const auto& w : s.workloads) {
      j["workloads"].push_back({{"phy_id", w.phy_id},
                                {"aicore_pct", w.aicore_pct},
                                {"aicpu_pct", w.aicpu_pct},
                                {"hbm_mb", w.hbm_mb},
                                {"until_ms", w.until_ms}});
    }
  }
  j["majors"] = {{"davinci", s.majors.davinci},
                 {"manager", s.majors.manager},
                 {"svm", s.majors.svm},
                 {"hdc", s.majors.hdc},
                 {"vdavinci", s.majors.vdavinci}};
  j["vnpu_mode"] = s.vnpu_mode;
  j["device_nodes"] = s.device_nodes;
  j["generation"] = s.generation;
  if (!s.boot_id.empty()) j["boot_id"] = s.boot_id;
}

Result<HostState> state_from_json(const json& j) {
  HostState s;
  Reader r(j, "state");
  std::string family = std::string(to_string(s.family));
  r.get("schema", s.schema);
  r.get("profile", s.profile);
  r.get("description", s.description);
  r.get("family", family);
  r.get("chip_type", s.chip_type);
  r.get("smi_version", s.smi_version);
  r.get("driver_version", s.driver_version);
  r.get("firmware_version", s.firmware_version);
  r.get("resource_name", s.resource_name);
  r.get("vnpu_mode", s.vnpu_mode);
  r.get("device_nodes", s.device_nodes);
  r.get("generation", s.generation);
  r.get("boot_id", s.boot_id);
  if (const json* c = r.sub("vnpu_capacity")) {
    Reader cr(*c, "state.vnpu_capacity");
    auto& v = s.vnpu_capacity;
    cr.get("aicore", v.aicore);
    cr.get("memory_gb", v.memory_gb);
    cr.get("aicpu", v.aicpu);
    cr.get("vpc", v.vpc);
    cr.get("venc", v.venc);
    cr.get("vdec", v.vdec);
    cr.get("jpegd", v.jpegd);
    cr.get("jpege", v.jpege);
    cr.get("pngd", v.pngd);
    if (auto st = cr.finish(); !st) return st.error();
  }
  if (const json* m = r.sub("majors")) {
    Reader mr(*m, "state.majors");
    mr.get("davinci", s.majors.davinci);
    mr.get("manager", s.majors.manager);
    mr.get("svm", s.majors.svm);
    mr.get("hdc", s.majors.hdc);
    mr.get("vdavinci", s.majors.vdavinci);
    if (auto st = mr.finish(); !st) return st.error();
  }
  auto st = read_list(r, "templates", s.templates, [](Reader& t, VnpuTemplate& v) {
    t.get("name", v.name);
    t.get("aicore", v.aicore);
    t.get("memory_mb", v.memory_mb);
    t.get("aicpu", v.aicpu);
    t.get("vpc", v.vpc);
    t.get("venc", v.venc);
    t.get("vdec", v.vdec);
    t.get("jpegd", v.jpegd);
    t.get("jpege", v.jpege);
    t.get("pngd", v.pngd);
  });
  if (!st) return st.error();
  std::string fault_error;
  st = read_list(r, "chips", s.chips, [&](Reader& c, Chip& ch) {
    c.get("phy_id", ch.phy_id);
    ch.logic_id = ch.phy_id;
    c.get("logic_id", ch.logic_id);
    c.get("card_id", ch.card_id);
    c.get("chip_index", ch.chip_index);
    c.get("name", ch.name);
    c.get("bus_id", ch.bus_id);
    c.get("numa_node", ch.numa_node);
    c.get("cpu_affinity", ch.cpu_affinity);
    c.get("hccs_domain", ch.hccs_domain);
    c.get("device_ip", ch.device_ip);
    c.get("aicore_count", ch.aicore_count);
    c.get("hbm_total_mb", ch.hbm_total_mb);
    c.get("hbm_used_mb", ch.hbm_used_mb);
    c.get("mem_total_mb", ch.mem_total_mb);
    c.get("mem_used_mb", ch.mem_used_mb);
    c.get("power_w", ch.power_w);
    c.get("power_na", ch.power_na);
    c.get("temp_c", ch.temp_c);
    c.get("aicore_usage_pct", ch.aicore_usage_pct);
    c.get("aicpu_usage_pct", ch.aicpu_usage_pct);
    c.get("link_up", ch.link_up);
    c.get("hugepages_used", ch.hugepages_used);
    c.get("hugepages_total", ch.hugepages_total);
    auto ps = read_list(c, "processes", ch.processes, [](Reader& p, Process& pr) {
      p.get("pid", pr.pid);
      p.get("name", pr.name);
      p.get("memory_mb", pr.memory_mb);
      p.get("container_pid", pr.container_pid);
    });
    if (!ps) c.fail(ps.error().message());
    struct RawFault {
      std::string code, severity;
    };
    std::vector<RawFault> raw;
    auto fs = read_list(c, "faults", raw, [](Reader& f, RawFault& rf) {
      f.get("code", rf.code);
      f.get("severity", rf.severity);
    });
    if (!fs) c.fail(fs.error().message());
    for (const auto& rf : raw) {
      auto code = parse_code(rf.code);
      if (!code) {
        c.fail(c.where() + ".faults: " + code.error().message());
        continue;
      }
      Fault f{*code, severity_of_code(*code)};
      if (!rf.severity.empty()) {
        auto h = parse_health(rf.severity);
        if (!h) {
          c.fail(c.where() + ".faults: " + h.error().message());
          continue;
        }
        f.severity = *h;
      }
      ch.faults.push_back(f);
    }
  });
  if (!st) return st.error();
  st = read_list(r, "vnpus", s.vnpus, [](Reader& v, Vnpu& vn) {
    v.get("id", vn.id);
    v.get("phy_id", vn.phy_id);
    v.get("template", vn.template_name);
    v.get("vgroup", vn.vgroup);
    v.get("container_id", vn.owner.container_id);
    v.get("status", vn.status);
    if (const json* o = v.sub("owner")) {
      Reader r2(*o, v.where() + ".owner");
      r2.get("state_root", vn.owner.state_root);
      r2.get("pid", vn.owner.pid);
      r2.get("pid_start", vn.owner.pid_start);
      r2.get("pid_ns", vn.owner.pid_ns);
      r2.get("boot", vn.owner.boot);
      if (auto fin = r2.finish(); !fin) v.fail(fin.error().message());
    }
  });
  if (!st) return st.error();
  st = read_list(r, "workloads", s.workloads, [](Reader& w, Workload& wl) {
    w.get("phy_id", wl.phy_id);
    w.get("aicore_pct", wl.aicore_pct);
    w.get("aicpu_pct", wl.aicpu_pct);
    w.get("hbm_mb", wl.hbm_mb);
    w.get("until_ms", wl.until_ms);
  });
  if (!st) return st.error();
  if (auto fin = r.finish(); !fin) return fin.error();

  auto fam = parse_family(family);
  if (!fam) return fam.error().context("state.family");
  s.family = *fam;
  if (s.chips.empty()) return Error::invalid("state.chips: a host needs at least one chip");
  std::sort(s.chips.begin(), s.chips.end(), [](const Chip& a, const Chip& b) { return a.phy_id < b.phy_id; });
  std::sort(s.vnpus.begin(), s.vnpus.end(), [](const Vnpu& a, const Vnpu& b) { return a.id < b.id; });
  std::set<int> phys;
  std::set<std::pair<int, int>> slots;
  for (const auto& c : s.chips) {
    if (c.phy_id < 0 || c.phy_id > 63) {
      return Error::invalid("state.chips: phy_id " + std::to_string(c.phy_id) + " out of range 0-63");
    }
    if (!phys.insert(c.phy_id).second) {
      return Error::invalid("state.chips: phy_id " + std::to_string(c.phy_id) + " appears twice");
    }
    if (!slots.insert({c.card_id, c.chip_index}).second) {
      return Error::invalid("state.chips: card " + std::to_string(c.card_id) + " chip " +
                            std::to_string(c.chip_index) + " appears twice");
    }
    if (c.name.empty())
      return Error::invalid("state.chips: chip " + std::to_string(c.phy_id) + " has no name");
  }
  for (const auto& v : s.vnpus) {
    if (s.chip(v.phy_id) == nullptr) {
      return Error::invalid("state.vnpus: vNPU " + std::to_string(v.id) + " is on unknown chip " +
                            std::to_string(v.phy_id));
    }
  }
  std::sort(s.workloads.begin(), s.workloads.end(),
            [](const Workload& a, const Workload& b) { return a.phy_id < b.phy_id; });
  for (std::size_t i = 0; i < s.workloads.size(); ++i) {
    const Workload& w = s.workloads[i];
    const std::string where = "state.workloads: chip " + std::to_string(w.phy_id);
    if (s.chip(w.phy_id) == nullptr) return Error::invalid(where + " is unknown");
    if (i > 0 && s.workloads[i - 1].phy_id == w.phy_id) return Error::invalid(where + " appears twice");
  }
  if (s.vnpu_mode != "docker" && s.vnpu_mode != "vm") {
    return Error::invalid("state.vnpu_mode: '" + s.vnpu_mode + "' (use docker or vm)");
  }
  return s;
}

std::string serialize(const HostState& s) {
  json j = s;
  return j.dump(1) + "\n";
}

Result<HostState> parse_state(std::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error::invalid("not valid JSON");
  return state_from_json(j);
}

}  // namespace ascend::npu
