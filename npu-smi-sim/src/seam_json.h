// The one JSON codec of each seam type (seam.h). Two forms are made from it: the seam's own (seam.cc:
// snapshots, vNPUs and owners across a process boundary, every field required, unknown ones ignored) and the
// emulator's state file (state_json.cc: strict, every field optional, with a few differences of its own).
// Private to the two libraries: a component reaches the seam's JSON only through seam.h's functions.
//
// ASCEND_JSON_TYPE(Type, fields...) is NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE (to_json, from_json) plus
// visit_fields(t, visit), which calls visit("field", t.field) for each field in the same order: what a reader
// of another form walks, so that a type's fields are listed once. ASCEND_JSON_FIELDS gives visit_fields
// alone, for a type whose to_json is declared elsewhere. ASCEND_JSON_ENUM writes an enum by its to_string
// name, so that the names too are written once.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "ascend/npu/seam.h"

// NOLINTBEGIN(bugprone-macro-parentheses,cppcoreguidelines-macro-usage): `field` names a member.
#define ASCEND_JSON_VISIT_FIELD(field) visit(#field, t.field);
#define ASCEND_JSON_FIELDS(Type, ...)                                               \
  template <class Visit>                                                            \
  void visit_fields(Type& t, Visit&& visit) {                                       \
    NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(ASCEND_JSON_VISIT_FIELD, __VA_ARGS__)) \
  }                                                                                 \
  template <class Visit>                                                            \
  void visit_fields(const Type& t, Visit&& visit) {                                 \
    NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(ASCEND_JSON_VISIT_FIELD, __VA_ARGS__)) \
  }
// An enum's JSON is its name as seam.h's to_string gives it; a name it does not know (or a value that is not
// a name) reads as the first value listed.
#define ASCEND_JSON_ENUM(Enum, ...)                                                \
  inline void to_json(nlohmann::json& j, Enum e) {                                 \
    j = std::string(to_string(e));                                                 \
  }                                                                                \
  inline void from_json(const nlohmann::json& j, Enum& e) {                        \
    constexpr Enum kAll[] = {__VA_ARGS__};                                         \
    e = kAll[0];                                                                   \
    for (Enum v : kAll) {                                                          \
      if (j.is_string() && j.get_ref<const std::string&>() == to_string(v)) e = v; \
    }                                                                              \
  }
#define ASCEND_JSON_TYPE(Type, ...)                     \
  NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Type, __VA_ARGS__) \
  ASCEND_JSON_FIELDS(Type, __VA_ARGS__)
// NOLINTEND(bugprone-macro-parentheses,cppcoreguidelines-macro-usage)

namespace ascend::npu {

ASCEND_JSON_ENUM(Health, Health::kOk, Health::kWarning, Health::kAlarm, Health::kCritical)
ASCEND_JSON_ENUM(Link, Link::kNa, Link::kSelf, Link::kSio, Link::kHccs, Link::kHccsSw, Link::kPix, Link::kPxb,
                 Link::kPhb, Link::kSys)
ASCEND_JSON_ENUM(Family, Family::k910B, Family::k910, Family::k910_93, Family::k310P)
ASCEND_JSON_TYPE(VnpuTemplate, name, aicore, memory_mb, aicpu, vpc, venc, vdec, jpegd, jpege, pngd)
ASCEND_JSON_TYPE(VnpuCapacity, aicore, memory_gb, aicpu, vpc, venc, vdec, jpegd, jpege, pngd)
ASCEND_JSON_TYPE(Process, pid, name, memory_mb, container_pid)
ASCEND_JSON_TYPE(Fault, code, severity)
ASCEND_JSON_TYPE(Chip, phy_id, logic_id, card_id, chip_index, name, chip_version, vdie_id, bus_id, numa_node,
                 cpu_affinity, hccs_domain, device_ip, aicore_count, hbm_total_mb, hbm_used_mb, mem_total_mb,
                 mem_used_mb, power_w, power_na, temp_c, aicore_usage_pct, aicpu_usage_pct, link_up,
                 hugepages_used, hugepages_total, processes, faults)
ASCEND_JSON_TYPE(VnpuOwner, container_id, state_root, pid, pid_start, pid_ns, boot)
ASCEND_JSON_TYPE(Vnpu, id, phy_id, template_name, vgroup, owner, status)
ASCEND_JSON_TYPE(DeviceNode, path, major, minor, mode)
ASCEND_JSON_TYPE(DeviceSnapshot, backend, family, chip_type, driver_version, resource_name, vnpu_capacity,
                 templates, chips, chip_nodes, vnpus, vnpu_nodes, control, links, vnpu_mode, boot_id)

}  // namespace ascend::npu
