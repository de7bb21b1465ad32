#include "ascend/npu/profiles.h"

#include <array>
#include <cstdio>

namespace ascend::npu {
namespace {

// Telemetry of one chip as the captures in tests/fixtures show it.
struct ChipSeed {
  const char* bus;
  double power;
  int temp;
  int hbm_used;
  int mem_used;
  int mem_total;
};

HostState a2() {
  // Atlas 800T A2, 8 x 910B3: values of a real host (tests/fixtures/npu-smi/a2-info.txt).
  HostState s;
  s.profile = "atlas800t-a2";
  s.description = "Atlas 800T A2 training server: 8 x Ascend 910B3, 64 GB HBM, full HCCS mesh";
  s.family = Family::k910B;
  s.smi_version = s.driver_version = "24.1.rc1.b030";
  s.firmware_version = "7.5.0.1.129";
  s.resource_name = resource_name_for(s.family);
  const std::array<ChipSeed, 8> seeds = {{{"0000:C1:00.0", 101.8, 43, 3318, 0, 0},
                                          {"0000:C2:00.0", 92.0, 39, 3314, 0, 0},
                                          {"0000:81:00.0", 102.0, 40, 3314, 0, 0},
                                          {"0000:82:00.0", 99.8, 40, 3314, 0, 0},
                                          {"0000:01:00.0", 98.6, 45, 3314, 0, 0},
                                          {"0000:02:00.0", 99.7, 44, 3314, 0, 0},
                                          {"0000:41:00.0", 103.8, 45, 3314, 0, 0},
                                          {"0000:42:00.0", 98.2, 44, 3315, 0, 0}}};
  const std::array<const char*, 4> affinity = {"144-167", "96-119", "0-23", "48-71"};
  const std::array<int, 4> numa = {6, 4, 0, 2};
  for (int i = 0; i < 8; ++i) {
    Chip c;
    c.phy_id = c.logic_id = c.card_id = i;
    c.name = "910B3";
    c.bus_id = seeds[i].bus;
    c.numa_node = numa[i / 2];
    c.cpu_affinity = affinity[i / 2];
    c.hccs_domain = 0;
    c.aicore_count = 20;
    c.hbm_total_mb = 65536;
    c.hbm_used_mb = seeds[i].hbm_used;
    c.power_w = seeds[i].power;
    c.temp_c = seeds[i].temp;
    s.chips.push_back(c);
  }
  return s;
}

HostState a1() {
  // Atlas 800 training server (model 9000), 8 x Ascend 910 (A1), two HCCS rings of four.
  HostState s;
  s.profile = "atlas800-9000";
  s.description = "Atlas 800 training server (9000): 8 x Ascend 910 (A1), 32 GB HBM, HCCS rings {0-3} {4-7}";
  s.family = Family::k910;
  s.smi_version = s.driver_version = "24.1.0";
  s.firmware_version = "7.1.0.7.220";
  s.resource_name = resource_name_for(s.family);
  const std::array<ChipSeed, 8> seeds = {{{"0000:C1:00.0", 78.0, 38, 18, 2387, 13553},
                                          {"0000:81:00.0", 75.8, 38, 8, 1840, 15665},
                                          {"0000:41:00.0", 78.2, 39, 5, 2512, 15665},
                                          {"0000:01:00.0", 76.5, 39, 4, 1645, 15567},
                                          {"0000:C2:00.0", 78.8, 38, 10, 1520, 13553},
                                          {"0000:82:00.0", 77.0, 38, 14, 2639, 15665},
                                          {"0000:42:00.0", 83.0, 40, 3, 2143, 15665},
                                          {"0000:02:00.0", 77.3, 38, 2, 2088, 15567}}};
  const std::array<const char*, 4> affinity = {"72-95", "48-71", "24-47", "0-23"};
  for (int i = 0; i < 8; ++i) {
    Chip c;
    c.phy_id = c.logic_id = c.card_id = i;
    c.name = "910ProA";
    c.bus_id = seeds[i].bus;
    c.numa_node = 3 - (i % 4);
    c.cpu_affinity = affinity[i % 4];
    c.hccs_domain = i / 4;
    c.aicore_count = 32;
    c.hbm_total_mb = 32768;
    c.hbm_used_mb = seeds[i].hbm_used;
    c.mem_used_mb = seeds[i].mem_used;
    c.mem_total_mb = seeds[i].mem_total;
    c.power_w = seeds[i].power;
    c.temp_c = seeds[i].temp;
    s.chips.push_back(c);
  }
  return s;
}

HostState a3() {
  // Atlas 800T A3: 8 cards x 2 dies (Ascend910, 910C); SIO inside a card, HCCS switch between cards.
  HostState s;
  s.profile = "atlas800t-a3";
  s.description = "Atlas 800T A3 training server: 8 cards x 2 dies of Ascend 910C, SIO + HCCS switch";
  s.family = Family::k910_93;
  s.smi_version = s.driver_version = "25.2.0";
  s.firmware_version = "7.7.0.6.236";
  s.resource_name = resource_name_for(s.family);
  const std::array<const char*, 16> bus = {"0000:9D:00.0", "0000:9F:00.0", "0000:99:00.0", "0000:9B:00.0",
                                           "0000:95:00.0", "0000:97:00.0", "0000:91:00.0", "0000:93:00.0",
                                           "0000:8D:00.0", "0000:8F:00.0", "0000:89:00.0", "0000:8B:00.0",
                                           "0000:85:00.0", "0000:87:00.0", "0000:81:00.0", "0000:83:00.0"};
  const std::array<double, 8> power = {211.3, 210.6, 205.7, 209.9, 219.9, 214.0, 201.9, 205.5};
  const std::array<int, 16> temp = {43, 44, 45, 45, 44, 44, 43, 44, 43, 45, 47, 45, 43, 43, 44, 43};
  const std::array<int, 16> hbm = {61609, 61625, 61616, 61619, 61633, 61623, 61625, 61628,
                                   61602, 61618, 61578, 61603, 61614, 61623, 61627, 61631};
  const std::array<int, 16> usage = {7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 7, 7, 6, 7, 7, 7};
  for (int i = 0; i < 16; ++i) {
    Chip c;
    c.phy_id = c.logic_id = i;
    c.card_id = i / 2;
    c.chip_index = i % 2;
    c.name = "Ascend910";
    c.bus_id = bus[i];
    c.numa_node = i / 4;
    c.hccs_domain = 0;
    c.aicore_count = 24;
    c.hbm_total_mb = 65536;
    c.hbm_used_mb = hbm[i];
    c.aicore_usage_pct = usage[i];
    c.power_w = (i % 2 == 0) ? power[i / 2] : -1;
    c.temp_c = temp[i];
    s.chips.push_back(c);
  }
  return s;
}

HostState duo() {
  // Atlas 300I Duo inference cards: 4 cards x 2 Ascend 310P3 chips, 24 GB each, PCIe only.
  HostState s;
  s.profile = "atlas300i-duo";
  s.description = "4 x Atlas 300I Duo inference cards: 8 x Ascend 310P3, 24 GB, PCIe";
  s.family = Family::k310P;
  s.smi_version = s.driver_version = "25.2.0";
  s.firmware_version = "7.7.0.6.236";
  s.resource_name = resource_name_for(s.family);
  const std::array<const char*, 4> bus = {"0000:01:00.0", "0000:41:00.0", "0000:81:00.0", "0000:C1:00.0"};
  const std::array<int, 8> used = {1529, 1412, 1530, 1415, 1528, 1411, 1529, 1414};
  const std::array<int, 8> temp = {45, 43, 44, 42, 46, 44, 45, 43};
  for (int i = 0; i < 8; ++i) {
    Chip c;
    c.phy_id = c.logic_id = i;
    c.card_id = i / 2;
    c.chip_index = i % 2;
    c.name = "310P3";
    c.bus_id = bus[i / 2];
    c.numa_node = i / 4;
    c.cpu_affinity = (i < 4) ? "0-47" : "48-95";
    c.aicore_count = 8;
    c.hbm_total_mb = 0;
    c.mem_total_mb = 21527;
    c.mem_used_mb = used[i];
    c.power_na = true;
    c.temp_c = temp[i];
    s.chips.push_back(c);
  }
  return s;
}

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
  return {"atlas800-9000", "atlas800t-a2", "atlas800t-a3", "atlas300i-duo"};
}

std::string device_ip(int node_index, int phy_id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "10.%d.%d.%d", 100 + phy_id, node_index / 254, node_index % 254 + 1);
  return buf;
}

void assign_device_ips(HostState& s, int node_index) {
  for (auto& c : s.chips) c.device_ip = device_ip(node_index, c.phy_id);
}

Result<HostState> builtin_profile(std::string_view name) {
  HostState s;
  if (name == "atlas800t-a2") {
    s = a2();
  } else if (name == "atlas800-9000") {
    s = a1();
  } else if (name == "atlas800t-a3") {
    s = a3();
  } else if (name == "atlas300i-duo") {
    s = duo();
  } else {
    std::string names;
    for (const auto& n : builtin_profile_names()) names += (names.empty() ? "" : ", ") + n;
    return Error::not_found("unknown profile '" + std::string(name) + "' (built-in: " + names +
                            "; or give a YAML file)");
  }
  const Chip& c0 = s.chips.front();
  const int mem = vnpu_memory_basis_mb(c0);
  s.templates = templates_for(s.family, mem);
  s.vnpu_capacity = vnpu_capacity_for(s.family, c0.aicore_count, mem);
  assign_device_ips(s, 0);
  return s;
}

}  // namespace ascend::npu
