// The DCMI backend's chips (dcmi_device_query.h): where each one is (its card and device), what a snapshot
// says of it, and the values a telemetry scrape reads of it.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <exception>
#include <string>

#include "dcmi_device_query.h"
#include "dcmi_errors.h"

namespace ascend::npu::dcmi_backend {
namespace {

Health health_of(unsigned int h) {
  switch (h) {
    case DCMI_HEALTH_OK:
      return Health::kOk;
    case DCMI_HEALTH_MINOR:
      return Health::kWarning;
    case DCMI_HEALTH_MAJOR:
      return Health::kAlarm;
    default:
      return Health::kCritical;  // critical, or "does not exist": not usable either way
  }
}

// The readings read_chip and telemetry() share.

// The AI Core use. `call` names the call in an error: a snapshot's and a scrape's messages word it apart.
Result<int> read_aicore(const Api& api, int card, int device, const char* call) {
  unsigned int util = 0;
  ASCEND_CHECK(check(api.utilization_rate(card, device, DCMI_UTILIZATION_RATE_AICORE, &util), call), "");
  return static_cast<int>(util);
}

Result<int> read_aicpu(const Api& api, int card, int device) {
  unsigned int util = 0;
  ASCEND_CHECK(check(api.utilization_rate(card, device, DCMI_UTILIZATION_RATE_AICPU, &util),
                     "dcmi_get_device_utilization_rate(AICPU)"),
               "");
  return static_cast<int>(util);
}

// -1: the chip reports none (NOT_SUPPORT).
Result<double> read_power(const Api& api, int card, int device) {
  int tenths = 0;
  const int rc = api.power_info(card, device, &tenths);
  if (rc == DCMI_ERR_CODE_NOT_SUPPORT) return -1.0;  // die 1 of an A3 card, a 310P: npu-smi prints - or NA
  ASCEND_CHECK(check(rc, "dcmi_get_device_power_info"), "");
  return tenths / 10.0;  // the reference's unit is 0.1 W
}

Result<bool> read_link(const Api& api, int card, int device) {
  dcmi_rdfx_detect_result r = DCMI_RDFX_DETECT_MAX;
  const int rc = api.network_health(card, device, &r);
  if (rc == DCMI_ERR_CODE_NOT_SUPPORT) return true;  // no RoCE port (inference cards): nothing is down
  ASCEND_CHECK(check(rc, "dcmi_get_device_network_health"), "");
  // NPU Exporter counts a detection that is still starting as healthy too.
  return r == DCMI_RDFX_DETECT_OK || r == DCMI_RDFX_DETECT_INIT;
}

Result<Health> read_health(const Api& api, int card, int device) {
  unsigned int health = 0;
  ASCEND_CHECK(check(api.health(card, device, &health), "dcmi_get_device_health"), "");
  return health_of(health);
}

Result<std::vector<std::uint32_t>> read_error_codes(const Api& api, int card, int device) {
  int count = 0;
  unsigned int codes[DCMI_ERROR_CODE_MAX_COUNT] = {};
  ASCEND_CHECK(check(api.errorcode_v2(card, device, &count, codes, DCMI_ERROR_CODE_MAX_COUNT),
                     "dcmi_get_device_errorcode_v2"),
               "");
  std::vector<std::uint32_t> out;
  for (int i = 0; i < count && i < DCMI_ERROR_CODE_MAX_COUNT; ++i) out.push_back(codes[i]);
  return out;
}

// The on-chip DDR in use: what is neither available nor free in huge pages.
unsigned long long ddr_used_mb(const dcmi_get_memory_info_stru& mem) {
  const unsigned long long free_mb =
      mem.memory_available - static_cast<unsigned long long>(mem.hugepages_free) * mem.hugepagesize / 1024;
  return mem.memory_size - std::min(free_mb, mem.memory_size);
}

// The steps of read_chip, in its order.

// Its ids, chip info and VDIE id.
Status read_identity(const Api& api, int card, int device, Chip& c) {
  ASCEND_CHECK(check(api.logic_id(&c.logic_id, card, device), "dcmi_get_device_logic_id"), "");
  unsigned int phy = 0;
  ASCEND_CHECK(check(api.phyid_from_logicid(static_cast<unsigned int>(c.logic_id), &phy),
                     "dcmi_get_device_phyid_from_logicid"),
               "");
  c.phy_id = static_cast<int>(phy);
  dcmi_chip_info info{};
  ASCEND_CHECK(check(api.chip_info(card, device, &info), "dcmi_get_device_chip_info"), "");
  c.name = c_string(info.chip_name, sizeof info.chip_name);
  c.chip_version = c_string(info.chip_ver, sizeof info.chip_ver);
  c.aicore_count = static_cast<int>(info.aicore_cnt);
  dcmi_die_id die{};
  if (int rc = api.die_v2(card, device, VDIE, &die); rc == DCMI_OK) {
    char words[5 * 9 + 1] = {};
    std::snprintf(words, sizeof words, "%08X-%08X-%08X-%08X-%08X", die.soc_die[0], die.soc_die[1],
                  die.soc_die[2], die.soc_die[3], die.soc_die[4]);
    c.vdie_id = words;
  } else if (rc != DCMI_ERR_CODE_NOT_SUPPORT) {
    return check(rc, "dcmi_get_device_die_v2(VDIE)");
  }
  return {};
}

Status read_faults(const Api& api, int card, int device, Chip& c) {
  ASCEND_ASSIGN(const Health chip_health, read_health(api, card, device), "");
  ASCEND_ASSIGN(const std::vector<std::uint32_t> codes, read_error_codes(api, card, device), "");
  // DCMI gives the codes and the chip's health, not each code's severity: the code's own severity, and the
  // chip's health on the worst of them when the driver rates the chip worse.
  for (std::uint32_t code : codes) c.faults.push_back(Fault{code, severity_of_code(code)});
  if (!c.faults.empty() && c.health() < chip_health) {
    auto worst = std::max_element(c.faults.begin(), c.faults.end(),
                                  [](const Fault& a, const Fault& b) { return a.severity < b.severity; });
    worst->severity = chip_health;
  }
  return {};
}

// HBM, and the on-chip DDR with its huge pages; a chip without either reports NOT_SUPPORT.
Status read_memory(const Api& api, int card, int device, Chip& c) {
  dcmi_hbm_info hbm{};
  if (int rc = api.hbm_info(card, device, &hbm); rc == DCMI_OK) {
    c.hbm_total_mb = static_cast<int>(hbm.memory_size);
    c.hbm_used_mb = static_cast<int>(hbm.memory_usage);
  } else if (rc != DCMI_ERR_CODE_NOT_SUPPORT) {
    return check(rc, "dcmi_get_device_hbm_info");
  }
  dcmi_get_memory_info_stru mem{};
  if (int rc = api.memory_info_v3(card, device, &mem); rc == DCMI_OK) {
    c.mem_total_mb = static_cast<int>(mem.memory_size);
    c.mem_used_mb = static_cast<int>(ddr_used_mb(mem));
    c.hugepages_total = static_cast<int>(mem.hugepages_total);
    c.hugepages_used =
        static_cast<int>(mem.hugepages_total - std::min(mem.hugepages_free, mem.hugepages_total));
  } else if (rc != DCMI_ERR_CODE_NOT_SUPPORT) {
    return check(rc, "dcmi_get_device_memory_info_v3");
  }
  return {};
}

// Temperature, AI Core and AICPU use, power and the RoCE link.
Status read_usage(const Api& api, int card, int device, Chip& c) {
  ASCEND_CHECK(check(api.temperature(card, device, &c.temp_c), "dcmi_get_device_temperature"), "");
  ASCEND_ASSIGN(c.aicore_usage_pct, read_aicore(api, card, device, "dcmi_get_device_utilization_rate"), "");
  ASCEND_ASSIGN(c.aicpu_usage_pct, read_aicpu(api, card, device), "");
  ASCEND_ASSIGN(c.power_w, read_power(api, card, device), "");
  ASCEND_ASSIGN(c.link_up, read_link(api, card, device), "");
  return {};
}

Status read_bus_id(const Api& api, int card, int device, Chip& c) {
  dcmi_pcie_info_all pcie{};
  ASCEND_CHECK(check(api.pcie_info_v2(card, device, &pcie), "dcmi_get_device_pcie_info_v2"), "");
  char bdf[32];
  std::snprintf(bdf, sizeof bdf, "%04X:%02X:%02X.%X", static_cast<unsigned>(pcie.domain), pcie.bdf_busid,
                pcie.bdf_deviceid, pcie.bdf_funcid);
  c.bus_id = bdf;
  return {};
}

// The NUMA node of the PCI function, where Linux reports it (-1: none, which counts as node 0).
void read_numa_node(const DeviceQuery& host, Chip& c) {
  std::string lower = c.bus_id;
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (auto numa = read_file(host.host_path("/sys/bus/pci/devices/" + lower + "/numa_node"), 64)) {
    try {
      c.numa_node = std::max(0, std::stoi(*numa));
    } catch (const std::exception&) {
      c.numa_node = 0;
    }
  }
}

// Its CPU affinity and its RoCE port's address (none configured: left empty).
Status read_addresses(const Api& api, int card, int device, Chip& c) {
  char cpus[TOPO_INFO_MAX_LENTH + 1] = {};
  int len = 0;
  ASCEND_CHECK(check(api.affinity_cpu(card, device, cpus, &len), "dcmi_get_affinity_cpu_info_by_device_id"),
               "");
  c.cpu_affinity.assign(cpus, static_cast<std::size_t>(std::clamp(len, 0, TOPO_INFO_MAX_LENTH)));

  dcmi_ip_addr ip{};
  dcmi_ip_addr mask{};
  if (int rc = api.device_ip(card, device, DCMI_ROCE_PORT, 0, &ip, &mask); rc == DCMI_OK) {
    if (ip.ip_type == DCMI_IPADDR_TYPE_V4) {
      const unsigned char* b = ip.u_addr.ip4;
      c.device_ip = std::to_string(b[0]) + "." + std::to_string(b[1]) + "." + std::to_string(b[2]) + "." +
                    std::to_string(b[3]);
    }
  } else if (rc != DCMI_ERR_CODE_NOT_SUPPORT && rc != DCMI_ERR_CODE_CONFIG_INFO_NOT_EXIST) {
    return check(rc, "dcmi_get_device_ip");
  }
  return {};
}

// A scrape's memory: the HBM, or on a chip without HBM the on-chip DDR (310P).
Status read_telemetry_memory(const Api& api, int card, int device, ChipTelemetry& t) {
  dcmi_hbm_info hbm{};
  if (int rc = api.hbm_info(card, device, &hbm); rc == DCMI_OK) {
    t.memory_total_mb = static_cast<long long>(hbm.memory_size);
    t.memory_used_mb = static_cast<long long>(hbm.memory_usage);
  } else if (rc == DCMI_ERR_CODE_NOT_SUPPORT) {  // no HBM: the on-chip DDR (310P)
    dcmi_get_memory_info_stru mem{};
    ASCEND_CHECK(check(api.memory_info_v3(card, device, &mem), "dcmi_get_device_memory_info_v3"), "");
    t.memory_total_mb = static_cast<long long>(mem.memory_size);
    t.memory_used_mb = static_cast<long long>(ddr_used_mb(mem));
  } else {
    return check(rc, "dcmi_get_device_hbm_info");
  }
  return {};
}

Result<ChipTelemetry> read_telemetry(const Api& api, int phy, int card, int device) {
  ChipTelemetry t;
  t.phy_id = phy;
  ASCEND_ASSIGN(t.aicore_pct, read_aicore(api, card, device, "dcmi_get_device_utilization_rate(AICORE)"), "");
  ASCEND_ASSIGN(t.aicpu_pct, read_aicpu(api, card, device), "");
  ASCEND_CHECK(read_telemetry_memory(api, card, device, t), "");
  ASCEND_CHECK(check(api.temperature(card, device, &t.temp_c), "dcmi_get_device_temperature"), "");
  ASCEND_ASSIGN(const double power, read_power(api, card, device), "");
  if (power >= 0) t.power_w = power;
  ASCEND_ASSIGN(t.health, read_health(api, card, device), "");
  ASCEND_ASSIGN(t.error_codes, read_error_codes(api, card, device), "");
  ASCEND_ASSIGN(t.link_up, read_link(api, card, device), "");
  return t;
}

}  // namespace

Result<std::map<int, DcmiDeviceQuery::Place>> DcmiDeviceQuery::places() const {
  int cards[MAX_CARD_NUM] = {};
  int n = 0;
  ASCEND_CHECK(check(api_.card_num_list(&n, cards, MAX_CARD_NUM), "dcmi_get_card_num_list"), "");
  std::map<int, Place> out;
  for (int i = 0; i < n && i < MAX_CARD_NUM; ++i) {
    int devs = 0;
    ASCEND_CHECK(check(api_.device_num_in_card(cards[i], &devs), "dcmi_get_device_num_in_card"), "");
    for (int d = 0; d < devs; ++d) {
      int logic = 0;
      ASCEND_CHECK(check(api_.logic_id(&logic, cards[i], d), "dcmi_get_device_logic_id"), "");
      unsigned int phy = 0;
      ASCEND_CHECK(check(api_.phyid_from_logicid(static_cast<unsigned int>(logic), &phy),
                         "dcmi_get_device_phyid_from_logicid"),
                   "");
      out[static_cast<int>(phy)] = Place{cards[i], d};
    }
  }
  return out;
}

Result<Chip> DcmiDeviceQuery::read_chip(int card, int device) const {
  Chip c;
  c.card_id = card;
  c.chip_index = device;
  ASCEND_CHECK(read_identity(api_, card, device, c), "");
  ASCEND_CHECK(read_faults(api_, card, device, c), "");
  ASCEND_CHECK(read_memory(api_, card, device, c), "");
  ASCEND_CHECK(read_usage(api_, card, device, c), "");
  ASCEND_CHECK(read_bus_id(api_, card, device, c), "");
  read_numa_node(*this, c);
  ASCEND_CHECK(read_addresses(api_, card, device, c), "");
  return c;
}

Result<std::vector<ChipTelemetry>> DcmiDeviceQuery::telemetry() const {
  ASCEND_ASSIGN(auto places, this->places(), "");
  std::vector<ChipTelemetry> out;
  out.reserve(places.size());
  for (const auto& [phy, p] : places) {
    ASCEND_ASSIGN(ChipTelemetry t, read_telemetry(api_, phy, p.card, p.device), "");
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace ascend::npu::dcmi_backend
