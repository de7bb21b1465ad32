#include "ascend/npu/profiles.h"

#include "profile_data.h"

namespace ascend::npu {
namespace {

VnpuTemplate tmpl(const char* name, int aicore, int mem_mb, double aicpu, int vpc, int venc, int vdec,
                  int jpegd, int jpege, double pngd) {
  return {name, aicore, mem_mb, aicpu, vpc, venc, vdec, jpegd, jpege, pngd};
}

}  // namespace

int vnpu_memory_basis_mb(const Chip& c) {
  return c.hbm_total_mb > 0 ? c.hbm_total_mb : 24576;
}

std::string resource_name_for(Family family) {
  return family == Family::k310P ? "huawei.com/Ascend310P" : "huawei.com/Ascend910";
}

Result<Family> family_of_chip_name(std::string_view n) {
  auto starts = [&](std::string_view p) { return n.substr(0, p.size()) == p; };
  if (starts("310P")) return Family::k310P;
  if (n == "Ascend910" || starts("910_93") || starts("910C")) return Family::k910_93;
  // 910B1 .. 910B4 (a digit after "910B"); the A1's own "910B" variant has none.
  if (starts("910B") && n.size() > 4 && n[4] >= '0' && n[4] <= '9') return Family::k910B;
  if (starts("910")) return Family::k910;
  return Error(ENOTSUP, "chip '" + std::string(n) + "' is of no known family (910, 910B, 910_93, 310P)");
}

std::vector<VnpuTemplate> templates_for(Family family, int hbm_mb) {
  switch (family) {
    case Family::k310P: {
      int k = hbm_mb > 24576 ? 2 : 1;  // 48 GB cards double the memory
      return {tmpl("vir01", 1, 3072 * k, 1, 1, 0, 1, 2, 1, 0),
              tmpl("vir02", 2, 6144 * k, 2, 3, 1, 3, 4, 2, 0),
              tmpl("vir02_1c", 2, 6144 * k, 1, 3, 0, 3, 4, 2, 0),
              tmpl("vir04", 4, 12288 * k, 4, 6, 2, 6, 8, 4, 0),
              tmpl("vir04_3c", 4, 12288 * k, 3, 6, 1, 6, 8, 4, 0),
              tmpl("vir04_3c_ndvpp", 4, 12288 * k, 3, 0, 0, 0, 0, 0, 0),
              tmpl("vir04_4c_dvpp", 4, 12288 * k, 4, 12, 3, 12, 16, 8, 0)};
    }
    case Family::k910: {
      int k = hbm_mb >= 32768 ? 2 : 1;
      return {
          tmpl("vir02", 2, 1024 * k, 1, 1, 0, 1, 1, 0, 1.5), tmpl("vir04", 4, 2048 * k, 1, 2, 0, 2, 2, 1, 3),
          tmpl("vir08", 8, 4096 * k, 3, 4, 0, 4, 4, 2, 6), tmpl("vir16", 16, 8192 * k, 7, 8, 0, 8, 8, 4, 12)};
    }
    case Family::k910_93:
      return {tmpl("vir12_3c_32g", 12, 32768, 3, 5, 0, 1, 14, 2, 0),
              tmpl("vir06_1c_16g", 6, 16384, 1, 2, 0, 0, 7, 1, 0)};
    case Family::k910B:
      if (hbm_mb <= 32768) {
        return {tmpl("vir10_3c_16g", 10, 16384, 3, 4, 0, 1, 12, 2, 0),
                tmpl("vir10_4c_16g_m", 10, 16384, 4, 9, 0, 2, 24, 4, 0),
                tmpl("vir10_3c_16g_nm", 10, 16384, 3, 0, 0, 0, 0, 0, 0),
                tmpl("vir05_1c_8g", 5, 8192, 1, 2, 0, 0, 6, 1, 0)};
      }
      return {tmpl("vir10_3c_32g", 10, 32768, 3, 4, 0, 1, 12, 2, 0),
              tmpl("vir05_1c_16g", 5, 16384, 1, 2, 0, 0, 6, 1, 0)};
  }
  return {};
}

VnpuCapacity vnpu_capacity_for(Family family, int aicore, int hbm_mb) {
  switch (family) {
    case Family::k310P:
      return {aicore, hbm_mb > 24576 ? 48 : 24, 7, 12, 3, 12, 16, 8, -1};
    case Family::k910:
      // 14 AICPU ("2 CtrlCPU 14 AICPU"); the media units are twice those of vir16, the 1/2 template (no
      // capture shows an A1's totals), so that two vir16 fill a chip as its spec says.
      return {aicore, hbm_mb / 1024, 14, 16, 0, 16, 16, 8, -1};
    case Family::k910_93:
      return {aicore, hbm_mb / 1024, 6, 10, 0, 2, 28, 4, -1};
    case Family::k910B:
      return {aicore, hbm_mb / 1024, 6, 9, 0, 2, 24, 4, -1};
  }
  return {};
}

std::vector<std::string> builtin_profile_names() {
  std::vector<std::string> out;
  for (const ProfileText& p : builtin_profile_texts()) out.emplace_back(p.name);
  return out;
}

void assign_device_ips(HostState& s, int node_index) {
  for (auto& c : s.chips) c.device_ip = device_ip(node_index, c.phy_id);
}

Result<HostState> builtin_profile(std::string_view name) {
  const ProfileText* text = nullptr;
  for (const ProfileText& p : builtin_profile_texts()) {
    if (p.name == name) text = &p;
  }
  if (text == nullptr) {
    std::string names;
    for (const auto& n : builtin_profile_names()) names += (names.empty() ? "" : ", ") + n;
    return Error::not_found("unknown profile '" + std::string(name) + "' (built-in: " + names +
                            "; or give a YAML file)");
  }
  // The data carries the chips as the captures show them; what the chip family implies is derived.
  ASCEND_ASSIGN(
      HostState s, parse_state(text->json),
      "built-in profile " + std::string(name) + " (npu-smi-sim/profiles/" + std::string(name) + ".json)");
  s.resource_name = resource_name_for(s.family);
  const Chip& c0 = s.chips.front();
  const int mem = vnpu_memory_basis_mb(c0);
  s.templates = templates_for(s.family, mem);
  s.vnpu_capacity = vnpu_capacity_for(s.family, c0.aicore_count, mem);
  assign_device_ips(s, 0);
  return s;
}

}  // namespace ascend::npu
