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
// The file is written with nlohmann, and read with rapidjson (json_text.h: the texts nlohmann reads, to the
// same values; the shim reads this file for every container that asks for NPUs), by the one strict reader
// that also reads a custom profile's nlohmann document (state_from_json).
#include "ascend/npu/state.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <functional>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "ascend/common/json_depth.h"
#include "ascend/common/json_text.h"
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

// The reader's view of a JSON value, one for each library the file is read with: nlohmann's (state_from_json:
// a custom profile's YAML, the tests) and rapidjson's (parse_state: the state file, which the shim reads for
// every container that asks for NPUs; json_text.h reads the texts nlohmann reads, to the same values).
struct NlohmannJson {
  using Value = json;
  static bool is_object(const Value& v) { return v.is_object(); }
  static std::size_t member_count(const Value& v) { return v.size(); }
  static const Value* member(const Value& v, const char* key) {
    auto it = v.find(key);
    return it == v.end() ? nullptr : &*it;
  }
  template <class Visit>
  static void for_each_key(const Value& v, Visit&& visit) {
    for (auto it = v.begin(); it != v.end(); ++it) visit(std::string_view(it.key()));
  }
  static bool is_array(const Value& v) { return v.is_array(); }
  static std::size_t size(const Value& v) { return v.size(); }
  static const Value& item(const Value& v, std::size_t i) { return v[i]; }
  static bool is_integer(const Value& v) { return v.is_number_integer(); }
  static bool is_number(const Value& v) { return v.is_number(); }
  template <class T>
  static T number(const Value& v) {
    return v.get<T>();
  }
  // A text field's value: a string as it is, anything else as its JSON text (a YAML profile's unquoted 310
  // is a number); a text that is not UTF-8 cannot be written as JSON, and says so as the reader always did.
  static std::string text(const Value& v, std::string& error) {
    try {
      return v.is_string() ? v.get<std::string>() : v.dump();
    } catch (const json::exception& e) {
      error = e.what();
      return {};
    }
  }
  static bool flag(const Value& v, std::string& error) {
    try {
      return v.get<bool>();
    } catch (const json::exception& e) {
      error = e.what();
      return false;
    }
  }
};

struct RapidJson {
  using Value = JsonValue;
  static bool is_object(const Value& v) { return v.IsObject(); }
  static std::size_t member_count(const Value& v) { return v.MemberCount(); }
  static const Value* member(const Value& v, const char* key) {
    auto it = v.FindMember(key);
    return it == v.MemberEnd() ? nullptr : &it->value;
  }
  template <class Visit>
  static void for_each_key(const Value& v, Visit&& visit) {
    for (const auto& m : v.GetObject()) visit(std::string_view(m.name.GetString(), m.name.GetStringLength()));
  }
  static bool is_array(const Value& v) { return v.IsArray(); }
  static std::size_t size(const Value& v) { return v.Size(); }
  static const Value& item(const Value& v, std::size_t i) { return v[static_cast<rapidjson::SizeType>(i)]; }
  static bool is_integer(const Value& v) { return json_is_integer(v); }
  static bool is_number(const Value& v) { return v.IsNumber(); }
  template <class T>
  static T number(const Value& v) {
    if constexpr (std::is_integral_v<T>) {  // nlohmann's get<T>: a cast of its int64 or uint64
      return v.IsInt64() ? static_cast<T>(v.GetInt64()) : static_cast<T>(v.GetUint64());
    } else {
      return static_cast<T>(v.GetDouble());
    }
  }
  // What is not a string (or for a flag, a boolean) is rare: it is made nlohmann's, for nlohmann's words.
  static std::string text(const Value& v, std::string& error) {
    if (v.IsString()) return {v.GetString(), v.GetStringLength()};
    return NlohmannJson::text(json::parse(write_json(v)), error);
  }
  static bool flag(const Value& v, std::string& error) {
    if (v.IsBool()) return v.GetBool();
    return NlohmannJson::flag(json::parse(write_json(v)), error);
  }
};

template <class T>
struct IsVector : std::false_type {};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {};

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

// Reads one JSON object into a value, as the state file is read: a field left out keeps the value's own; a
// field of the wrong type, or one the value does not have, is an error naming it ("state.chips[0].phy_id:
// expected an integer", "state.chips[0]: unknown field 'nmae'"). An object's plain fields are read first,
// then its lists and objects, then its unknown fields are looked for (the first in byte order is reported);
// the first error is the one reported. A key given twice counts once, with its last value. A visitor for
// visit_fields: read_object(reader, value) below says which fields a type has in the file. `Json` is one of
// the two views above.
template <class Json>
class StrictReader {
 public:
  using Value = typename Json::Value;

  StrictReader(const Value& j, std::string where) : j_(j), where_(std::move(where)) {
    if (!Json::is_object(j)) err_ = where_ + ": expected an object";
    seen_.reserve(32);  // a chip has 27 fields
    later_.reserve(8);
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
    if (const Value* v = Json::member(j_, key)) {
      ++found_;
      read(Location{where_, key}, *v, out);
    }
  }

  // Runs `step` once the plain fields are read (in the order given), unless there is an error by then.
  void later(std::function<void()> step) { later_.push_back(std::move(step)); }

  bool has(const char* key) const { return Json::is_object(j_) && Json::member(j_, key) != nullptr; }
  const std::string& where() const { return where_; }
  void fail(std::string msg) {
    if (err_.empty()) err_ = std::move(msg);
  }

  Status finish() {
    for (std::size_t i = 0; i < later_.size() && err_.empty(); ++i) later_[i]();
    // Every key is one asked for when as many were found as the object has (each is asked for once, and an
    // object's keys are distinct in both views): the usual case, without comparing keys.
    if (err_.empty() && Json::is_object(j_) && found_ != Json::member_count(j_)) {
      std::optional<std::string_view> unknown;
      Json::for_each_key(j_, [&](std::string_view key) {
        if (std::find(seen_.begin(), seen_.end(), key) == seen_.end() && (!unknown || key < *unknown)) {
          unknown = key;
        }
      });
      if (unknown) err_ = where_ + ": unknown field '" + std::string(*unknown) + "'";
    }
    if (!err_.empty()) return Error::invalid(err_);
    return {};
  }

 private:
  template <class T, class Where>
  void read(const Where& where, const Value& v, T& out);

  const Value& j_;
  std::string where_;
  std::vector<std::string_view> seen_;  // the keys asked for: string literals, the codecs' field names
  std::vector<std::function<void()>> later_;
  std::size_t found_ = 0;  // the keys asked for that the object has
  std::string err_;
};

template <class R, class T>
void read_object(R& r, T& out);
template <class R>
void read_object(R& r, Chip& c);
template <class R>
void read_object(R& r, Vnpu& v);
template <class R>
void read_object(R& r, VnpuOwner& o);

template <class Json>
template <class T, class Where>
void StrictReader<Json>::read(const Where& where, const Value& v, T& out) {
  if constexpr (std::is_same_v<T, std::string>) {
    std::string error;
    out = Json::text(v, error);
    if (!error.empty()) fail(where_text(where) + ": " + error);
  } else if constexpr (std::is_same_v<T, bool>) {
    std::string error;
    out = Json::flag(v, error);
    if (!error.empty()) fail(where_text(where) + ": " + error);
  } else if constexpr (std::is_integral_v<T>) {
    if (!Json::is_integer(v)) return fail(where_text(where) + ": expected an integer");
    out = Json::template number<T>(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!Json::is_number(v)) return fail(where_text(where) + ": expected a number");
    out = Json::template number<T>(v);
  } else if constexpr (IsVector<T>::value) {
    if (!Json::is_array(v)) return fail(where_text(where) + ": expected a list");
    out.clear();
    const std::string base = where_text(where);  // joined once for the list, not once per item
    for (std::size_t i = 0; i < Json::size(v) && err_.empty(); ++i) {
      typename T::value_type item{};
      read(base + "[" + std::to_string(i) + "]", Json::item(v, i), item);
      if (err_.empty()) out.push_back(std::move(item));
    }
  } else {
    StrictReader sub(v, where_text(where));
    read_object(sub, out);
    if (auto st = sub.finish(); !st) fail(st.error().message());
  }
}

// A value of a type without differences: every field of its codec.
template <class R, class T>
void read_object(R& r, T& out) {
  visit_fields(out, r);
}

// The codes are checked once every fault has been read; an error names the chip's faults.
template <class R>
void read_faults(R& r, const char* key, std::vector<Fault>& out) {
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

template <class R>
void read_object(R& r, Chip& c) {
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

template <class R>
void read_object(R& r, Vnpu& v) {
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
template <class R>
void read_object(R& r, VnpuOwner& o) {
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

// The whole file, through one of the two views: every field, then what the fields alone cannot say.
template <class Json>
Result<HostState> read_state(const typename Json::Value& j) {
  HostState s;
  // The family is text in the file, checked once every field has been read.
  std::string family(to_string(s.family));
  StrictReader<Json> r(j, "state");
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
  return read_state<NlohmannJson>(j);
}

std::string serialize(const HostState& s) {
  json j = s;
  return j.dump(1) + "\n";
}

Result<HostState> parse_state(std::string_view text) {
  // The state file nests four deep; a value of another shape may be written back as text (RapidJson::text),
  // which recurses as deep as it nests.
  constexpr int kMaxDepth = 64;  // the message below says so
  JsonDocument doc;
  if (!doc.parse(text, kMaxDepth)) {
    return Error::invalid(json_nests_deeper_than(text, kMaxDepth) ? "nests deeper than 64 levels"
                                                                  : "not valid JSON");
  }
  return read_state<RapidJson>(doc.root());
}

}  // namespace ascend::npu
