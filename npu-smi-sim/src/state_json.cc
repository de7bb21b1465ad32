// The state file's JSON form (state.h: serialize, parse_state, state_from_json and to_json). Every type is
// written and read through its one codec: seam_json.h's for the seam's types, the ones below for the state's
// own. The file's form differs from the seam's in ways it has always had:
// - every field may be left out (it keeps its default; a chip's logic_id is then its phy_id), and a field of
//   the wrong type, or one the type does not have, is an error naming it (StrictReader);
// - a chip has no chip_version or vdie_id (the emulator derives them when it answers), and its
//   aicpu_usage_pct and link_up are written only when they differ from their default, so that the state of a
//   host nobody loaded or unplugged reads as before;
// - a fault's code is hex text, as an operator types it, and its severity may be left out (the code's class);
// - a vNPU's template is "template", its owner's container id sits beside its other fields, and the rest of
//   the owner is written only for a dynamic vNPU.
#include "ascend/npu/state.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "seam_json.h"

namespace ascend::npu {

using nlohmann::json;

ASCEND_JSON_TYPE(DeviceMajors, davinci, manager, svm, hdc, vdavinci)
ASCEND_JSON_TYPE(Workload, phy_id, aicore_pct, aicpu_pct, hbm_mb, until_ms)
// The top level; its to_json is state.h's. The lists and objects are read in this order.
ASCEND_JSON_FIELDS(HostState, schema, profile, description, family, chip_type, smi_version, driver_version,
                   firmware_version, resource_name, vnpu_mode, device_nodes, generation, boot_id,
                   vnpu_capacity, majors, templates, chips, vnpus, workloads)

// A fault as the state file has it. Not in the unnamed namespace, where clang would count its codec's
// from_json (the file is read by StrictReader) as an unused function.
namespace state_file {
struct Fault {
  std::string code;      // "0x80E01801"
  std::string severity;  // empty: the code's class
};
ASCEND_JSON_TYPE(Fault, code, severity)
}  // namespace state_file

namespace {

// Fields of a chip the state file does not have: the emulator derives them from the profile when it answers.
constexpr std::array<const char*, 2> kDerivedChipFields = {"chip_version", "vdie_id"};

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

Result<Fault> from_state_form(const state_file::Fault& f) {
  ASCEND_ASSIGN(const std::uint32_t code, parse_code(f.code), "");
  Fault out{code, severity_of_code(code)};
  if (!f.severity.empty()) {
    ASCEND_ASSIGN(out.severity, parse_health(f.severity), "");
  }
  return out;
}

// ---- Writing ------------------------------------------------------------------------------------------

// A value as the state file has it: its codec's JSON, but for the differences above.
template <class T>
json state_form(const T& v) {
  return v;
}

json state_form(const Chip& c) {
  json j = c;
  for (const char* key : kDerivedChipFields) j.erase(key);
  if (c.aicpu_usage_pct == 0) j.erase("aicpu_usage_pct");
  if (c.link_up) j.erase("link_up");
  j["faults"] = json::array();
  for (const auto& f : c.faults) {
    j["faults"].push_back(state_file::Fault{hex_code(f.code), std::string(to_string(f.severity))});
  }
  return j;
}

json state_form(const Vnpu& v) {
  json j = v;
  j.erase("template_name");
  j["template"] = v.template_name;
  j["container_id"] = v.owner.container_id;
  if (v.dynamic()) {
    j["owner"].erase("container_id");
  } else {
    j.erase("owner");
  }
  return j;
}

template <class T>
json state_form(const std::vector<T>& list) {
  json j = json::array();
  for (const auto& v : list) j.push_back(state_form(v));
  return j;
}

// ---- Reading ------------------------------------------------------------------------------------------

template <class T>
struct IsVector : std::false_type {};

// Where a field is, for an error message: its object's place and its key, joined only when a message needs
// them (issue 25, the shim reads this file for every container that asks for NPUs). A list's items and the
// objects in it still get their place each (`chips[3]`), which the reader of an object keeps.
struct Location {
  const std::string& parent;
  const char* key;
};
const std::string& where_text(const std::string& where) {
  return where;
}
std::string where_text(const Location& where) {
  return where.parent + "." + where.key;
}
template <class T>
struct IsVector<std::vector<T>> : std::true_type {};

// Reads one JSON object into a value, as the state file is read: a field left out keeps the value's own; a
// field of the wrong type, or one the value does not have, is an error naming it ("state.chips[0].phy_id:
// expected an integer", "state.chips[0]: unknown field 'nmae'"). An object's plain fields are read first,
// then its lists and objects, then its unknown fields are looked for; the first error is the one reported.
// A visitor for visit_fields: read_object(reader, value) below says which fields a type has in the file.
class StrictReader {
 public:
  StrictReader(const json& j, std::string where) : j_(j), where_(std::move(where)) {
    if (!j.is_object()) err_ = where_ + ": expected an object";
  }
  StrictReader(const StrictReader&) = delete;
  StrictReader& operator=(const StrictReader&) = delete;

  // Reads field `key` into `out` if the object has it: now if it is plain, after the plain ones if not.
  // `key` must outlive the reader (a string literal, as every codec's field name is): it is kept as a view.
  template <class T>
  void operator()(const char* key, T& out) {
    if constexpr (std::is_class_v<T> && !std::is_same_v<T, std::string>) {
      later([this, key, &out] { read_now(key, out); });
    } else {
      read_now(key, out);
    }
  }

  // Reads field `key` into `out` now, if the object has it.
  template <class T>
  void read_now(const char* key, T& out) {
    seen_.emplace_back(key);
    if (!err_.empty()) return;
    auto it = j_.find(key);
    if (it == j_.end()) return;
    read(Location{where_, key}, *it, out);
  }

  // Runs `step` once the plain fields are read (in the order given), unless there is an error by then.
  void later(std::function<void()> step) { later_.push_back(std::move(step)); }

  bool has(const char* key) const { return j_.is_object() && j_.contains(key); }
  const std::string& where() const { return where_; }
  void fail(std::string msg) {
    if (err_.empty()) err_ = std::move(msg);
  }

  Status finish() {
    for (std::size_t i = 0; i < later_.size() && err_.empty(); ++i) later_[i]();
    if (err_.empty() && j_.is_object()) {
      for (auto it = j_.begin(); it != j_.end(); ++it) {
        if (std::find(seen_.begin(), seen_.end(), it.key()) == seen_.end()) {
          err_ = where_ + ": unknown field '" + it.key() + "'";
          break;
        }
      }
    }
    if (!err_.empty()) return Error::invalid(err_);
    return {};
  }

 private:
  template <class T, class Where>
  void read(const Where& where, const json& v, T& out);

  const json& j_;
  std::string where_;
  std::vector<std::string_view> seen_;  // the keys asked for: string literals, the codecs' field names
  std::vector<std::function<void()>> later_;
  std::string err_;
};

template <class T>
void read_object(StrictReader& r, T& out);
void read_object(StrictReader& r, Chip& c);
void read_object(StrictReader& r, Vnpu& v);
void read_object(StrictReader& r, VnpuOwner& o);

template <class T, class Where>
void StrictReader::read(const Where& where, const json& v, T& out) {
  if constexpr (std::is_same_v<T, std::string>) {
    // Anything else is taken as its JSON text (a YAML profile's unquoted 310 is a number); a text that is
    // not UTF-8 cannot be written as JSON, and says so as the reader always did.
    try {
      out = v.is_string() ? v.get<std::string>() : v.dump();
    } catch (const json::exception& e) {
      fail(where_text(where) + ": " + e.what());
    }
  } else if constexpr (std::is_same_v<T, bool>) {
    try {
      out = v.get<bool>();
    } catch (const json::exception& e) {
      fail(where_text(where) + ": " + e.what());
    }
  } else if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer()) return fail(where_text(where) + ": expected an integer");
    out = v.get<T>();
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) return fail(where_text(where) + ": expected a number");
    out = v.get<T>();
  } else if constexpr (IsVector<T>::value) {
    if (!v.is_array()) return fail(where_text(where) + ": expected a list");
    out.clear();
    const std::string base = where_text(where);  // joined once for the list, not once per item
    for (std::size_t i = 0; i < v.size() && err_.empty(); ++i) {
      typename T::value_type item{};
      read(base + "[" + std::to_string(i) + "]", v[i], item);
      if (err_.empty()) out.push_back(std::move(item));
    }
  } else {
    StrictReader sub(v, where_text(where));
    read_object(sub, out);
    if (auto st = sub.finish(); !st) fail(st.error().message());
  }
}

// A value of a type without differences: every field of its codec.
template <class T>
void read_object(StrictReader& r, T& out) {
  visit_fields(out, r);
}

// The codes are checked once every fault has been read; an error names the chip's faults.
void read_faults(StrictReader& r, const char* key, std::vector<Fault>& out) {
  r.later([&r, key, &out] {
    std::vector<state_file::Fault> raw;
    r.read_now(key, raw);
    for (const auto& f : raw) {
      auto fault = from_state_form(f);
      if (!fault) return r.fail(r.where() + "." + key + ": " + fault.error().message());
      out.push_back(*fault);
    }
  });
}

void read_object(StrictReader& r, Chip& c) {
  visit_fields(c, [&r](const char* key, auto& field) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(field)>, std::vector<Fault>>) {
      read_faults(r, key, field);
    } else if (std::none_of(kDerivedChipFields.begin(), kDerivedChipFields.end(),
                            [key](const char* d) { return std::string_view(key) == d; })) {
      r(key, field);
    }
  });
  if (!r.has("logic_id")) c.logic_id = c.phy_id;
}

void read_object(StrictReader& r, Vnpu& v) {
  visit_fields(v, [&r](const char* key, auto& field) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(field)>, VnpuOwner>) {
      r("container_id", field.container_id);
      r(key, field);
    } else {
      r(std::string_view(key) == "template_name" ? "template" : key, field);
    }
  });
}

// The rest of a vNPU's owner: its container id is the vNPU's own field.
void read_object(StrictReader& r, VnpuOwner& o) {
  visit_fields(o, [&r](const char* key, auto& field) {
    if (std::string_view(key) != "container_id") r(key, field);
  });
}

// What the fields alone cannot say: a chip or more, each phy id and card slot once, vNPUs and workloads on
// known chips. Sorts the chips, vNPUs and workloads.
Status check_host(HostState& s) {
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
  return {};
}

}  // namespace

void to_json(json& j, const HostState& s) {
  j = json::object();
  visit_fields(s, [&j](const char* key, const auto& field) { j[key] = state_form(field); });
  // Written only when there is something to say, so that the state of a host that never ran load-gen, or of
  // one from before boot ids, reads as before.
  if (s.workloads.empty()) j.erase("workloads");
  if (s.boot_id.empty()) j.erase("boot_id");
}

Result<HostState> state_from_json(const json& j) {
  HostState s;
  // The family is text in the file, checked once every field has been read.
  std::string family(to_string(s.family));
  StrictReader r(j, "state");
  visit_fields(s, [&](const char* key, auto& field) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(field)>, Family>) {
      r(key, family);
    } else {
      r(key, field);
    }
  });
  ASCEND_CHECK(r.finish(), "");
  ASCEND_ASSIGN(s.family, parse_family(family), "state.family");
  ASCEND_CHECK(check_host(s), "");
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
