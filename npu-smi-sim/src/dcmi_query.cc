// The DCMI backend of the device seam: DeviceQuery answered by the driver's libdcmi.so, loaded with dlopen
// (backend.h). It fills DeviceSnapshot from DCMI calls and the host's files:
//  - chips: dcmi_get_card_num_list / _device_num_in_card, then per chip its logical and physical ids, chip
//    info (name, version, AI Cores), VDIE id (dcmi_get_device_die_v2), health and fault codes, HBM and DDR,
//    temperature, AI Core and AICPU use, power (dcmi_get_device_power_info, 0.1 W), RoCE network health
//    (dcmi_get_device_network_health: the chip's link_up), PCIe address, CPU affinity and RoCE address; its
//    NUMA node from sysfs (DCMI reports none);
//  - telemetry(): only the calls a scrape needs (utilization, HBM, temperature, power, health, error codes,
//    network health), per chip, without the topology or the vNPUs;
//  - links: dcmi_get_topo_info_by_device_id for every pair. The 910B reference's enum has no SIO or HCCS
//    switch; on a 910_93 host (A3) an HCCS link is SIO between the two dies of one card and the HCCS switch
//    between cards, which is how every A3 is wired;
//  - vNPUs: dcmi_get_device_info(VDEV_MNG): the chip's vNPU ids, then each one's template and group; who
//    holds a dynamic vNPU lives in the owner file (DCMI keeps no owner);
//  - device nodes: stat of /dev/davinci<phy>, /dev/vdavinci<id> and the control nodes under the host root;
//  - templates and capacity: the chip family's tables (profiles.h), as the driver has them.
// Not read (no seam consumer needs them, and DCMI has no cheap call for them): a chip's processes; the
// snapshot leaves them empty. The differential test (tests/npu-smi-sim/backend_test.cc)
// compares every other field with the emulator backend's answer.
#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "ascend/common/fs.h"
#include "ascend/common/guarded.h"
#include "ascend/npu/backend.h"
#include "ascend/npu/profiles.h"
#include "dcmi_interface_api.h"

namespace ascend::npu {
namespace {

// The meaning of a DCMI return code, for messages.
const char* dcmi_meaning(int code) {
  switch (code) {
    case DCMI_ERR_CODE_INVALID_PARAMETER:
      return "invalid parameter";
    case DCMI_ERR_CODE_OPER_NOT_PERMITTED:
      return "operation not permitted";
    case DCMI_ERR_CODE_MEM_OPERATE_FAIL:
      return "memory operation failed";
    case DCMI_ERR_CODE_SECURE_FUN_FAIL:
      return "secure function failed";
    case DCMI_ERR_CODE_INNER_ERR:
      return "internal error";
    case DCMI_ERR_CODE_TIME_OUT:
      return "timed out";
    case DCMI_ERR_CODE_INVALID_DEVICE_ID:
      return "invalid device id";
    case DCMI_ERR_CODE_DEVICE_NOT_EXIST:
      return "device does not exist";
    case DCMI_ERR_CODE_IOCTL_FAIL:
      return "ioctl failed";
    case DCMI_ERR_CODE_NOT_REDAY:
      return "not ready, retry";
    case DCMI_ERR_CODE_NOT_SUPPORT_IN_CONTAINER:
      return "not supported in a container";
    case DCMI_ERR_CODE_IS_UPGRADING:
      return "an upgrade is running";
    case DCMI_ERR_CODE_RESOURCE_OCCUPIED:
      return "resources occupied";
    case DCMI_ERR_CODE_CONFIG_INFO_NOT_EXIST:
      return "configuration does not exist";
    case DCMI_ERR_CODE_NOT_SUPPORT:
      return "not supported";
    default:
      return "unknown DCMI error";
  }
}

// The errno the seam uses for a DCMI code (the emulator's codes for the same failures).
int errno_of(int code) {
  switch (code) {
    case DCMI_ERR_CODE_INVALID_PARAMETER:
      return EINVAL;
    case DCMI_ERR_CODE_OPER_NOT_PERMITTED:
      return EPERM;
    case DCMI_ERR_CODE_INVALID_DEVICE_ID:
      return ENODEV;
    case DCMI_ERR_CODE_DEVICE_NOT_EXIST:
      return ENOENT;
    case DCMI_ERR_CODE_RESOURCE_OCCUPIED:
      return ENOSPC;
    case DCMI_ERR_CODE_NOT_SUPPORT:
      return EOPNOTSUPP;
    default:
      return EIO;
  }
}

Status check(int rc, const char* fn) {
  if (rc == DCMI_OK) return {};
  return Error(errno_of(rc),
               std::string(fn) + " failed: DCMI error " + std::to_string(rc) + " (" + dcmi_meaning(rc) + ")");
}

// The library and the functions used, resolved once.
struct Api {
  void* handle = nullptr;
  int (*init)() = nullptr;
  int (*card_num_list)(int*, int*, int) = nullptr;
  int (*device_num_in_card)(int, int*) = nullptr;
  int (*logic_id)(int*, int, int) = nullptr;
  int (*phyid_from_logicid)(unsigned int, unsigned int*) = nullptr;
  int (*chip_info)(int, int, dcmi_chip_info*) = nullptr;
  int (*health)(int, int, unsigned int*) = nullptr;
  int (*errorcode_v2)(int, int, int*, unsigned int*, unsigned int) = nullptr;
  int (*hbm_info)(int, int, dcmi_hbm_info*) = nullptr;
  int (*memory_info_v3)(int, int, dcmi_get_memory_info_stru*) = nullptr;
  int (*temperature)(int, int, int*) = nullptr;
  int (*utilization_rate)(int, int, int, unsigned int*) = nullptr;
  int (*power_info)(int, int, int*) = nullptr;
  int (*die_v2)(int, int, dcmi_die_type, dcmi_die_id*) = nullptr;
  int (*network_health)(int, int, dcmi_rdfx_detect_result*) = nullptr;
  int (*pcie_info_v2)(int, int, dcmi_pcie_info_all*) = nullptr;
  int (*affinity_cpu)(int, int, char*, int*) = nullptr;
  int (*topo_info)(int, int, int, int, int*) = nullptr;
  int (*device_ip)(int, int, dcmi_port_type, int, dcmi_ip_addr*, dcmi_ip_addr*) = nullptr;
  int (*create_vdevice)(int, int, dcmi_create_vdev_res_stru*, dcmi_create_vdev_out*) = nullptr;
  int (*destroy_vdevice)(int, int, unsigned int) = nullptr;
  int (*device_info)(int, int, dcmi_main_cmd, unsigned int, void*, unsigned int*) = nullptr;
  int (*driver_version)(char*, unsigned int) = nullptr;
  int (*vdevice_mode)(int*) = nullptr;
};

template <typename F>
Status resolve(void* handle, const std::string& lib, const char* name, F& fn) {
  ::dlerror();
  void* sym = ::dlsym(handle, name);
  if (sym == nullptr) {
    return Error(ENOSYS,
                 lib + " has no " + name + " (a driver too old for this backend? use backend: emulator)");
  }
  fn = reinterpret_cast<F>(sym);
  return {};
}

Result<Api> load_api(const std::string& lib) {
  Api a;
  a.handle = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (a.handle == nullptr) {
    const char* why = ::dlerror();
    return Error(ENOENT, "cannot load " + lib + ": " + (why != nullptr ? why : "dlopen failed"));
  }
  ASCEND_CHECK(resolve(a.handle, lib, "dcmi_init", a.init), "");
  ASCEND_CHECK(resolve(a.handle, lib, "dcmi_get_card_num_list", a.card_num_list), "");
  ASCEND_CHECK(resolve(a.handle, lib, "dcmi_get_device_num_in_card", a.device_num_in_card), "");
  ASCEND_CHECK(resolve(a.handle, lib, "dcmi_get_device_logic_id", a.logic_id), "");
  ASCEND_CHECK(resolve(a.handle, lib, "dcmi_get_device_phyid_from_logicid", a.phyid_from_logicid), "");
  ASCEND_CHECK(resolve(a.handle, lib, "dcmi_get_device_chip_info", a.chip_info), "");
  ASCEND_CHECK(resolve(a.handle, lib, "dcmi_get_device_health", a.health), "");
  ASCEND_CHECK(resolve(a.handle, lib, "dcmi_get_device_errorcode_v2", a.errorcode_v2), "");
  ASCEND_CHECK(resolve(a.handle, lib, "dcmi_get_device_hbm_info", a.hbm_info), "");
  ASCEND_CHECK(resolve(a.handle, lib, "dcmi_get_device_memory_info_v3", a.memory_info_v3), "");
  ASCEND_CHECK(resolve(a.handle, lib, "dcmi_get_device_temperature", a.temperature), "");
  ASCEND_CHECK(resolve(a.handle, lib, "dcmi_get_device_utilization_rate", a.utilization_rate), "");
  ASCEND_CHECK(resolve(a.handle, lib, "dcmi_get_device_power_info", a.power_info), "");
  ASCEND_CHECK(resolve(a.handle, lib, "dcmi_get_device_die_v2", a.die_v2), "");
  ASCEND_CHECK(resolve(a.handle, lib, "dcmi_get_device_network_health", a.network_health), "");
  ASCEND_CHECK(resolve(a.handle, lib, "dcmi_get_device_pcie_info_v2", a.pcie_info_v2), "");
  ASCEND_CHECK(resolve(a.handle, lib, "dcmi_get_affinity_cpu_info_by_device_id", a.affinity_cpu), "");
  ASCEND_CHECK(resolve(a.handle, lib, "dcmi_get_topo_info_by_device_id", a.topo_info), "");
  ASCEND_CHECK(resolve(a.handle, lib, "dcmi_get_device_ip", a.device_ip), "");
  ASCEND_CHECK(resolve(a.handle, lib, "dcmi_create_vdevice", a.create_vdevice), "");
  ASCEND_CHECK(resolve(a.handle, lib, "dcmi_set_destroy_vdevice", a.destroy_vdevice), "");
  ASCEND_CHECK(resolve(a.handle, lib, "dcmi_get_device_info", a.device_info), "");
  ASCEND_CHECK(resolve(a.handle, lib, "dcmi_get_driver_version", a.driver_version), "");
  ASCEND_CHECK(resolve(a.handle, lib, "dcmi_get_vdevice_mode", a.vdevice_mode), "");
  return a;
}

std::string c_string(const unsigned char* p, std::size_t n) {
  const auto* c = reinterpret_cast<const char*>(p);
  return {c, ::strnlen(c, n)};
}

Link link_of(int topo) {
  switch (topo) {
    case DCMI_TOPO_TYPE_SELF:
      return Link::kSelf;
    case DCMI_TOPO_TYPE_SYS:
      return Link::kSys;
    case DCMI_TOPO_TYPE_PHB:
      return Link::kPhb;
    case DCMI_TOPO_TYPE_HCCS:
      return Link::kHccs;
    case DCMI_TOPO_TYPE_PXB:
      return Link::kPxb;
    case DCMI_TOPO_TYPE_PIX:
      return Link::kPix;
    default:
      return Link::kNa;
  }
}

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

DeviceNode stat_node(const std::string& root, const std::string& path) {
  DeviceNode n{path, 0, 0, 0660};
  struct stat st {};
  const std::string full = root == "/" ? path : root + path;
  if (::stat(full.c_str(), &st) == 0 && S_ISCHR(st.st_mode)) {
    n.major = static_cast<int>(::major(st.st_rdev));
    n.minor = static_cast<int>(::minor(st.st_rdev));
    n.mode = st.st_mode & 07777;
  }
  return n;
}

// One vNPU owner record of the owner file.
struct OwnerRecord {
  int id = 0;
  int phy_id = 0;
  std::string template_name;
  VnpuOwner owner;
};

class DcmiDeviceQuery final : public DeviceQuery {
 public:
  DcmiDeviceQuery(BackendOptions opts, std::string lib, Api api)
      : opts_(std::move(opts)), lib_(std::move(lib)), api_(api) {
    if (opts_.owner_file.empty()) opts_.owner_file = host_path("/run/ascend/dcmi-vnpu-owners.json");
  }
  ~DcmiDeviceQuery() override = default;  // the library stays loaded: a process loads it once

  Result<DeviceSnapshot> snapshot() const override;
  Result<std::vector<ChipTelemetry>> telemetry() const override;
  std::string host_path(const std::string& abs_path) const override {
    return opts_.root == "/" ? abs_path : opts_.root + abs_path;
  }
  Result<Vnpu> create_vnpu(int phy_id, const std::string& template_name, std::optional<int> id,
                           const VnpuOwner& owner) override;
  Status destroy_vnpu(int vnpu_id, std::optional<int> phy_id,
                      const std::optional<VnpuOwner>& holder) override;
  Result<std::unique_ptr<Subscription>> subscribe(ChangeCallback on_change) const override;

  // A poll: the host now, and whether it differs from the last snapshot this backend returned to anyone.
  // Comparing with the last one returned (not the last poll) matters when a caller also reads on its own
  // and applies what it reads (the plugin's periodic driver check): a fault cleared and raised again
  // between two polls is a change for that caller if it saw the clear, though both polls saw the fault.
  Result<std::pair<DeviceSnapshot, bool>> poll() const;

 private:
  struct Place {
    int card = 0;
    int device = 0;
  };
  // Each chip's (card, device) by physical id, enumerated now.
  Result<std::map<int, Place>> places() const;
  Result<Chip> read_chip(int card, int device) const;
  // What a chip's telemetry needs beyond the snapshot's calls, shared by read_chip and telemetry().
  Result<int> read_aicpu(int card, int device) const;
  Result<double> read_power(int card, int device) const;  // -1: the chip reports none (NOT_SUPPORT)
  Result<bool> read_link(int card, int device) const;
  Result<std::vector<Vnpu>> read_vnpus(const Place& p, int phy_id) const;
  Result<std::vector<OwnerRecord>> read_owners() const;
  Status write_owners(const std::vector<OwnerRecord>& records) const;
  Result<FileLock> lock_owners() const;

  // The link matrix of the chips at `order` (DCMI's topology does not change while the driver is loaded):
  // read once per set of chips, so that a poll costs the chips' calls, not n squared topology calls.
  Result<std::vector<Link>> links(const std::vector<Place>& order, const DeviceSnapshot& s) const;

  BackendOptions opts_;
  std::string lib_;
  Api api_;
  Result<DeviceSnapshot> read() const;
  // Records `s`, read by the call numbered `seq` (in start order): a read that started earlier than the
  // recorded one does not replace it. Returns whether `s` differs from what was recorded before.
  bool record(const DeviceSnapshot& s, std::uint64_t seq) const;

  mutable std::atomic<std::uint64_t> reads_{0};
  mutable std::mutex last_mu_;
  mutable std::optional<DeviceSnapshot> last_;
  mutable std::uint64_t last_seq_ = 0;

  mutable std::mutex links_mu_;
  mutable std::vector<std::pair<int, int>> links_key_;  // (card, device) in phy order, then (phy, family)
  mutable std::vector<Link> links_;
};

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

Result<int> DcmiDeviceQuery::read_aicpu(int card, int device) const {
  unsigned int util = 0;
  ASCEND_CHECK(check(api_.utilization_rate(card, device, DCMI_UTILIZATION_RATE_AICPU, &util),
                     "dcmi_get_device_utilization_rate(AICPU)"),
               "");
  return static_cast<int>(util);
}

Result<double> DcmiDeviceQuery::read_power(int card, int device) const {
  int tenths = 0;
  const int rc = api_.power_info(card, device, &tenths);
  if (rc == DCMI_ERR_CODE_NOT_SUPPORT) return -1.0;  // die 1 of an A3 card, a 310P: npu-smi prints - or NA
  ASCEND_CHECK(check(rc, "dcmi_get_device_power_info"), "");
  return tenths / 10.0;  // the reference's unit is 0.1 W
}

Result<bool> DcmiDeviceQuery::read_link(int card, int device) const {
  dcmi_rdfx_detect_result r = DCMI_RDFX_DETECT_MAX;
  const int rc = api_.network_health(card, device, &r);
  if (rc == DCMI_ERR_CODE_NOT_SUPPORT) return true;  // no RoCE port (inference cards): nothing is down
  ASCEND_CHECK(check(rc, "dcmi_get_device_network_health"), "");
  // NPU Exporter counts a detection that is still starting as healthy too.
  return r == DCMI_RDFX_DETECT_OK || r == DCMI_RDFX_DETECT_INIT;
}

Result<std::vector<ChipTelemetry>> DcmiDeviceQuery::telemetry() const {
  ASCEND_ASSIGN(auto places, this->places(), "");
  std::vector<ChipTelemetry> out;
  out.reserve(places.size());
  for (const auto& [phy, p] : places) {
    ChipTelemetry t;
    t.phy_id = phy;
    unsigned int util = 0;
    ASCEND_CHECK(check(api_.utilization_rate(p.card, p.device, DCMI_UTILIZATION_RATE_AICORE, &util),
                       "dcmi_get_device_utilization_rate(AICORE)"),
                 "");
    t.aicore_pct = static_cast<int>(util);
    ASCEND_ASSIGN(t.aicpu_pct, read_aicpu(p.card, p.device), "");
    dcmi_hbm_info hbm{};
    if (int rc = api_.hbm_info(p.card, p.device, &hbm); rc == DCMI_OK) {
      t.memory_total_mb = static_cast<long long>(hbm.memory_size);
      t.memory_used_mb = static_cast<long long>(hbm.memory_usage);
    } else if (rc == DCMI_ERR_CODE_NOT_SUPPORT) {  // no HBM: the on-chip DDR (310P)
      dcmi_get_memory_info_stru mem{};
      ASCEND_CHECK(check(api_.memory_info_v3(p.card, p.device, &mem), "dcmi_get_device_memory_info_v3"), "");
      const unsigned long long free_mb =
          mem.memory_available -
          static_cast<unsigned long long>(mem.hugepages_free) * mem.hugepagesize / 1024;
      t.memory_total_mb = static_cast<long long>(mem.memory_size);
      t.memory_used_mb = static_cast<long long>(mem.memory_size - std::min(free_mb, mem.memory_size));
    } else {
      return check(rc, "dcmi_get_device_hbm_info").error();
    }
    ASCEND_CHECK(check(api_.temperature(p.card, p.device, &t.temp_c), "dcmi_get_device_temperature"), "");
    ASCEND_ASSIGN(const double power, read_power(p.card, p.device), "");
    if (power >= 0) t.power_w = power;
    unsigned int health = 0;
    ASCEND_CHECK(check(api_.health(p.card, p.device, &health), "dcmi_get_device_health"), "");
    t.health = health_of(health);
    int count = 0;
    unsigned int codes[DCMI_ERROR_CODE_MAX_COUNT] = {};
    ASCEND_CHECK(check(api_.errorcode_v2(p.card, p.device, &count, codes, DCMI_ERROR_CODE_MAX_COUNT),
                       "dcmi_get_device_errorcode_v2"),
                 "");
    for (int i = 0; i < count && i < DCMI_ERROR_CODE_MAX_COUNT; ++i) t.error_codes.push_back(codes[i]);
    ASCEND_ASSIGN(t.link_up, read_link(p.card, p.device), "");
    out.push_back(std::move(t));
  }
  return out;
}

Result<Chip> DcmiDeviceQuery::read_chip(int card, int device) const {
  Chip c;
  c.card_id = card;
  c.chip_index = device;
  ASCEND_CHECK(check(api_.logic_id(&c.logic_id, card, device), "dcmi_get_device_logic_id"), "");
  unsigned int phy = 0;
  ASCEND_CHECK(check(api_.phyid_from_logicid(static_cast<unsigned int>(c.logic_id), &phy),
                     "dcmi_get_device_phyid_from_logicid"),
               "");
  c.phy_id = static_cast<int>(phy);
  dcmi_chip_info info{};
  ASCEND_CHECK(check(api_.chip_info(card, device, &info), "dcmi_get_device_chip_info"), "");
  c.name = c_string(info.chip_name, sizeof info.chip_name);
  c.chip_version = c_string(info.chip_ver, sizeof info.chip_ver);
  c.aicore_count = static_cast<int>(info.aicore_cnt);
  dcmi_die_id die{};
  if (int rc = api_.die_v2(card, device, VDIE, &die); rc == DCMI_OK) {
    char words[5 * 9 + 1] = {};
    std::snprintf(words, sizeof words, "%08X-%08X-%08X-%08X-%08X", die.soc_die[0], die.soc_die[1],
                  die.soc_die[2], die.soc_die[3], die.soc_die[4]);
    c.vdie_id = words;
  } else if (rc != DCMI_ERR_CODE_NOT_SUPPORT) {
    return check(rc, "dcmi_get_device_die_v2(VDIE)").error();
  }

  unsigned int health = 0;
  ASCEND_CHECK(check(api_.health(card, device, &health), "dcmi_get_device_health"), "");
  int count = 0;
  unsigned int codes[DCMI_ERROR_CODE_MAX_COUNT] = {};
  ASCEND_CHECK(check(api_.errorcode_v2(card, device, &count, codes, DCMI_ERROR_CODE_MAX_COUNT),
                     "dcmi_get_device_errorcode_v2"),
               "");
  // DCMI gives the codes and the chip's health, not each code's severity: the code's own severity, and the
  // chip's health on the worst of them when the driver rates the chip worse.
  const Health chip_health = health_of(health);
  for (int i = 0; i < count && i < DCMI_ERROR_CODE_MAX_COUNT; ++i) {
    c.faults.push_back(Fault{codes[i], severity_of_code(codes[i])});
  }
  if (!c.faults.empty() && c.health() < chip_health) {
    auto worst = std::max_element(c.faults.begin(), c.faults.end(),
                                  [](const Fault& a, const Fault& b) { return a.severity < b.severity; });
    worst->severity = chip_health;
  }

  dcmi_hbm_info hbm{};
  if (int rc = api_.hbm_info(card, device, &hbm); rc == DCMI_OK) {
    c.hbm_total_mb = static_cast<int>(hbm.memory_size);
    c.hbm_used_mb = static_cast<int>(hbm.memory_usage);
  } else if (rc != DCMI_ERR_CODE_NOT_SUPPORT) {
    return check(rc, "dcmi_get_device_hbm_info").error();
  }
  dcmi_get_memory_info_stru mem{};
  if (int rc = api_.memory_info_v3(card, device, &mem); rc == DCMI_OK) {
    c.mem_total_mb = static_cast<int>(mem.memory_size);
    const unsigned long long free_mb =
        mem.memory_available - static_cast<unsigned long long>(mem.hugepages_free) * mem.hugepagesize / 1024;
    c.mem_used_mb = static_cast<int>(mem.memory_size - std::min(free_mb, mem.memory_size));
    c.hugepages_total = static_cast<int>(mem.hugepages_total);
    c.hugepages_used =
        static_cast<int>(mem.hugepages_total - std::min(mem.hugepages_free, mem.hugepages_total));
  } else if (rc != DCMI_ERR_CODE_NOT_SUPPORT) {
    return check(rc, "dcmi_get_device_memory_info_v3").error();
  }
  ASCEND_CHECK(check(api_.temperature(card, device, &c.temp_c), "dcmi_get_device_temperature"), "");
  unsigned int util = 0;
  ASCEND_CHECK(check(api_.utilization_rate(card, device, DCMI_UTILIZATION_RATE_AICORE, &util),
                     "dcmi_get_device_utilization_rate"),
               "");
  c.aicore_usage_pct = static_cast<int>(util);
  ASCEND_ASSIGN(c.aicpu_usage_pct, read_aicpu(card, device), "");
  ASCEND_ASSIGN(c.power_w, read_power(card, device), "");
  ASCEND_ASSIGN(c.link_up, read_link(card, device), "");

  dcmi_pcie_info_all pcie{};
  ASCEND_CHECK(check(api_.pcie_info_v2(card, device, &pcie), "dcmi_get_device_pcie_info_v2"), "");
  char bdf[32];
  std::snprintf(bdf, sizeof bdf, "%04X:%02X:%02X.%X", static_cast<unsigned>(pcie.domain), pcie.bdf_busid,
                pcie.bdf_deviceid, pcie.bdf_funcid);
  c.bus_id = bdf;
  // The NUMA node of the PCI function, where Linux reports it (-1: none, which counts as node 0).
  std::string lower = c.bus_id;
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (auto numa = read_file(host_path("/sys/bus/pci/devices/" + lower + "/numa_node"), 64)) {
    try {
      c.numa_node = std::max(0, std::stoi(*numa));
    } catch (const std::exception&) {
      c.numa_node = 0;
    }
  }
  char cpus[TOPO_INFO_MAX_LENTH + 1] = {};
  int len = 0;
  ASCEND_CHECK(check(api_.affinity_cpu(card, device, cpus, &len), "dcmi_get_affinity_cpu_info_by_device_id"),
               "");
  c.cpu_affinity.assign(cpus, static_cast<std::size_t>(std::clamp(len, 0, TOPO_INFO_MAX_LENTH)));

  dcmi_ip_addr ip{};
  dcmi_ip_addr mask{};
  if (int rc = api_.device_ip(card, device, DCMI_ROCE_PORT, 0, &ip, &mask); rc == DCMI_OK) {
    if (ip.ip_type == DCMI_IPADDR_TYPE_V4) {
      const unsigned char* b = ip.u_addr.ip4;
      c.device_ip = std::to_string(b[0]) + "." + std::to_string(b[1]) + "." + std::to_string(b[2]) + "." +
                    std::to_string(b[3]);
    }
  } else if (rc != DCMI_ERR_CODE_NOT_SUPPORT && rc != DCMI_ERR_CODE_CONFIG_INFO_NOT_EXIST) {
    return check(rc, "dcmi_get_device_ip").error();
  }
  return c;
}

Result<std::vector<Vnpu>> DcmiDeviceQuery::read_vnpus(const Place& p, int phy_id) const {
  dcmi_soc_total_resource total{};
  unsigned int size = sizeof total;
  const int rc = api_.device_info(p.card, p.device, DCMI_MAIN_CMD_VDEV_MNG,
                                  DCMI_VMNG_SUB_CMD_GET_TOTAL_RESOURCE, &total, &size);
  if (rc == DCMI_ERR_CODE_NOT_SUPPORT) return std::vector<Vnpu>{};  // a chip that cannot hold vNPUs
  ASCEND_CHECK(check(rc, "dcmi_get_device_info(VDEV_MNG, GET_TOTAL_RESOURCE)"), "");
  std::vector<Vnpu> out;
  for (unsigned int i = 0; i < total.vdev_num && i < DCMI_SOC_SPLIT_MAX; ++i) {
    dcmi_vdev_query_stru q{};
    q.vdev_id = total.vdev_id[i];
    unsigned int qsize = sizeof q;
    const int qrc = api_.device_info(p.card, p.device, DCMI_MAIN_CMD_VDEV_MNG,
                                     DCMI_VMNG_SUB_CMD_GET_VDEV_RESOURCE, &q, &qsize);
    if (qrc == DCMI_ERR_CODE_DEVICE_NOT_EXIST) continue;  // destroyed since the list was read
    ASCEND_CHECK(check(qrc, "dcmi_get_device_info(VDEV_MNG, GET_VDEV_RESOURCE)"), "");
    Vnpu v;
    v.id = static_cast<int>(total.vdev_id[i]);
    v.phy_id = phy_id;
    v.template_name.assign(q.query_info.name, ::strnlen(q.query_info.name, sizeof q.query_info.name));
    v.vgroup = static_cast<int>(q.query_info.vfg_id);
    v.status = q.query_info.is_container_used != 0 ? 1 : 0;
    out.push_back(std::move(v));
  }
  return out;
}

Result<DeviceSnapshot> DcmiDeviceQuery::snapshot() const {
  const std::uint64_t seq = ++reads_;
  ASCEND_ASSIGN(DeviceSnapshot s, read(), "");
  record(s, seq);
  return s;
}

Result<std::pair<DeviceSnapshot, bool>> DcmiDeviceQuery::poll() const {
  const std::uint64_t seq = ++reads_;
  ASCEND_ASSIGN(DeviceSnapshot s, read(), "");
  const bool changed = record(s, seq);
  return std::pair(std::move(s), changed);
}

namespace {

// The snapshot without what work moves at every poll on a real host (utilization, memory in use,
// temperature, power): a subscriber hears of health, vNPU, mode and device changes, not of a degree more
// (telemetry() is there for those values).
DeviceSnapshot without_telemetry(DeviceSnapshot s) {
  for (Chip& c : s.chips) {
    c.aicore_usage_pct = c.aicpu_usage_pct = 0;
    c.hbm_used_mb = c.mem_used_mb = c.hugepages_used = 0;
    c.temp_c = 0;
    c.power_w = 0;
  }
  return s;
}

}  // namespace

bool DcmiDeviceQuery::record(const DeviceSnapshot& s, std::uint64_t seq) const {
  std::lock_guard<std::mutex> lock(last_mu_);
  const bool changed = !last_ || !(without_telemetry(*last_) == without_telemetry(s));
  if (seq > last_seq_) {
    last_ = s;
    last_seq_ = seq;
  }
  return changed;
}

Result<DeviceSnapshot> DcmiDeviceQuery::read() const {
  DeviceSnapshot s;
  s.backend = "dcmi";
  char version[64] = {};
  ASCEND_CHECK(check(api_.driver_version(version, sizeof version), "dcmi_get_driver_version"), "");
  s.driver_version.assign(version, ::strnlen(version, sizeof version));
  int mode = 0;
  ASCEND_CHECK(check(api_.vdevice_mode(&mode), "dcmi_get_vdevice_mode"), "");
  s.vnpu_mode = mode == 1 ? "vm" : "docker";

  ASCEND_ASSIGN(auto where, places(), "read the chips through DCMI");
  if (where.empty()) return Error(ENODEV, "DCMI (" + lib_ + ") reports no NPU chip");
  std::vector<Place> order;
  for (const auto& [phy, p] : where) {
    ASCEND_ASSIGN(Chip c, read_chip(p.card, p.device), "chip " + std::to_string(phy));
    s.chips.push_back(std::move(c));
    order.push_back(p);
  }
  dcmi_chip_info info{};
  ASCEND_CHECK(check(api_.chip_info(order[0].card, order[0].device, &info), "dcmi_get_device_chip_info"), "");
  s.chip_type = c_string(info.chip_type, sizeof info.chip_type);
  ASCEND_ASSIGN(s.family, family_of_chip_name(s.chips[0].name), "");
  s.resource_name = resource_name_for(s.family);
  const int basis = vnpu_memory_basis_mb(s.chips[0]);
  s.templates = templates_for(s.family, basis);
  s.vnpu_capacity = vnpu_capacity_for(s.family, s.chips[0].aicore_count, basis);

  ASCEND_ASSIGN(s.links, links(order, s), "");
  const std::vector<int> domains = hccs_domains(s);
  for (std::size_t i = 0; i < s.chips.size(); ++i) s.chips[i].hccs_domain = domains[i];

  ASCEND_ASSIGN(std::vector<OwnerRecord> owners, read_owners(), "");
  if (!s.templates.empty()) {
    for (std::size_t i = 0; i < s.chips.size(); ++i) {
      ASCEND_ASSIGN(std::vector<Vnpu> vs, read_vnpus(order[i], s.chips[i].phy_id),
                    "vNPUs of chip " + std::to_string(s.chips[i].phy_id));
      for (Vnpu& v : vs) {
        for (const OwnerRecord& r : owners) {
          if (r.id == v.id && r.phy_id == v.phy_id && r.template_name == v.template_name) {
            v.owner = r.owner;
            v.status = 1;
          }
        }
        s.vnpus.push_back(std::move(v));
      }
    }
  }
  std::sort(s.vnpus.begin(), s.vnpus.end(), [](const Vnpu& a, const Vnpu& b) { return a.id < b.id; });

  for (const Chip& c : s.chips)
    s.chip_nodes.push_back(stat_node(opts_.root, "/dev/davinci" + std::to_string(c.phy_id)));
  for (const Vnpu& v : s.vnpus)
    s.vnpu_nodes.push_back(stat_node(opts_.root, "/dev/vdavinci" + std::to_string(v.id)));
  for (const char* n : {"/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"}) {
    s.control.push_back(stat_node(opts_.root, n));
  }
  return s;
}

Result<std::vector<Link>> DcmiDeviceQuery::links(const std::vector<Place>& order,
                                                 const DeviceSnapshot& s) const {
  std::vector<std::pair<int, int>> key;
  key.reserve(order.size() + s.chips.size());
  for (const Place& p : order) key.emplace_back(p.card, p.device);
  for (const Chip& c : s.chips) key.emplace_back(c.phy_id, static_cast<int>(s.family));
  {
    std::lock_guard<std::mutex> lock(links_mu_);
    if (key == links_key_) return links_;
  }
  std::vector<Link> out;
  for (std::size_t i = 0; i < order.size(); ++i) {
    for (std::size_t j = 0; j < order.size(); ++j) {
      int topo = DCMI_TOPO_TYPE_BUTT;
      ASCEND_CHECK(
          check(api_.topo_info(order[i].card, order[i].device, order[j].card, order[j].device, &topo),
                "dcmi_get_topo_info_by_device_id"),
          "");
      Link l = link_of(topo);
      if (l == Link::kHccs && s.family == Family::k910_93) {
        l = s.chips[i].card_id == s.chips[j].card_id ? Link::kSio : Link::kHccsSw;
      }
      out.push_back(l);
    }
  }
  std::lock_guard<std::mutex> lock(links_mu_);
  links_key_ = std::move(key);
  links_ = out;
  return out;
}

Result<std::vector<OwnerRecord>> DcmiDeviceQuery::read_owners() const {
  auto text = read_file(opts_.owner_file, 16U << 20);
  if (!text) {
    if (text.error().code() == ENOENT) return std::vector<OwnerRecord>{};
    return text.error().context("read the vNPU owner file");
  }
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_array()) {
    return Error(EIO, opts_.owner_file + " is not a JSON array; remove it (vNPUs it named count as static)");
  }
  std::vector<OwnerRecord> out;
  for (const auto& e : j) {
    // A record of the wrong shape is an error naming the file, never an exception (nlohmann's value()
    // throws on a wrong type).
    if (!e.is_object() || !e.contains("owner") || !e.value("id", nlohmann::json()).is_number_integer() ||
        !e.value("phy_id", nlohmann::json()).is_number_integer() ||
        !e.value("template", nlohmann::json()).is_string()) {
      return Error(
          EIO, opts_.owner_file + " holds a malformed record; remove it (vNPUs it named count as static)");
    }
    auto owner = owner_from_json(e["owner"]);
    if (!owner) return owner.error().context(opts_.owner_file);
    OwnerRecord r;
    r.id = e.value("id", -1);
    r.phy_id = e.value("phy_id", -1);
    r.template_name = e.value("template", "");
    r.owner = std::move(*owner);
    out.push_back(std::move(r));
  }
  return out;
}

Status DcmiDeviceQuery::write_owners(const std::vector<OwnerRecord>& records) const {
  nlohmann::json j = nlohmann::json::array();
  for (const OwnerRecord& r : records) {
    j.push_back({{"id", r.id},
                 {"phy_id", r.phy_id},
                 {"template", r.template_name},
                 {"owner", owner_to_json(r.owner)}});
  }
  const std::string dir = opts_.owner_file.substr(0, opts_.owner_file.rfind('/'));
  ASCEND_CHECK(make_dirs(dir, 0755), "the vNPU owner file's folder");
  return atomic_replace(opts_.owner_file, j.dump(1) + "\n", 0600).context("write the vNPU owner file");
}

Result<FileLock> DcmiDeviceQuery::lock_owners() const {
  const std::string dir = opts_.owner_file.substr(0, opts_.owner_file.rfind('/'));
  ASCEND_CHECK(make_dirs(dir, 0755), "the vNPU owner file's folder");
  return FileLock::acquire(opts_.owner_file + ".lock");
}

Result<Vnpu> DcmiDeviceQuery::create_vnpu(int phy_id, const std::string& template_name, std::optional<int> id,
                                          const VnpuOwner& owner) {
  ASCEND_ASSIGN(auto where, places(), "create a vNPU");
  auto it = where.find(phy_id);
  if (it == where.end()) return Error(ENODEV, "no NPU with physical id " + std::to_string(phy_id));
  const Place p = it->second;
  if (template_name.empty() || template_name.size() >= sizeof(dcmi_create_vdev_res_stru{}.template_name)) {
    return Error::invalid("vNPU template '" + template_name + "' is not a template name");
  }
  auto create = [&](unsigned int vdev_id) -> Result<int> {
    dcmi_create_vdev_res_stru in{};
    in.vdev_id = vdev_id;
    in.vfg_id = DCMI_VDEV_ID_AUTO;
    std::memcpy(in.template_name, template_name.data(), template_name.size());
    dcmi_create_vdev_out out{};
    ASCEND_CHECK(check(api_.create_vdevice(p.card, p.device, &in, &out), "dcmi_create_vdevice"),
                 "vNPU " + template_name + " on chip " + std::to_string(phy_id));
    return static_cast<int>(out.vdev_id);
  };
  auto made = [&](int vid) -> Result<Vnpu> {
    ASCEND_ASSIGN(std::vector<Vnpu> vs, read_vnpus(p, phy_id), "read the new vNPU");
    for (Vnpu& v : vs) {
      if (v.id == vid) {
        if (!owner.container_id.empty()) {
          v.owner = owner;
          v.status = 1;
        }
        return v;
      }
    }
    return Error(EIO, "vNPU " + std::to_string(vid) + " was created but DCMI does not list it");
  };
  if (owner.container_id.empty()) {
    ASCEND_ASSIGN(int vid, create(id ? static_cast<unsigned int>(*id) : DCMI_VDEV_ID_AUTO), "");
    return made(vid);
  }
  // A dynamic vNPU: its owner is recorded before it exists (under the owner file's lock), so that no crash
  // leaves a dynamic vNPU untagged; a record whose vNPU never came is ignored and pruned later.
  ASCEND_ASSIGN(FileLock lock, lock_owners(), "");
  ASCEND_ASSIGN(std::vector<OwnerRecord> records, read_owners(), "");
  ASCEND_ASSIGN(std::vector<Vnpu> existing, read_vnpus(p, phy_id), "");
  std::vector<int> ids;
  if (id) {
    ids.push_back(*id);
  } else {
    for (int k = 0; k < 16; ++k) {
      const int cand = 100 + 16 * phy_id + k;
      if (std::none_of(existing.begin(), existing.end(), [&](const Vnpu& v) { return v.id == cand; })) {
        ids.push_back(cand);
      }
    }
    if (ids.empty()) return Error(ENOSPC, "chip " + std::to_string(phy_id) + " has no free vNPU id");
  }
  // Prune records of vNPUs that no longer exist on this chip.
  std::erase_if(records, [&](const OwnerRecord& r) {
    return r.phy_id == phy_id &&
           std::none_of(existing.begin(), existing.end(), [&](const Vnpu& v) { return v.id == r.id; });
  });
  Error last(ENOSPC, "");
  for (int cand : ids) {
    records.push_back(OwnerRecord{cand, phy_id, template_name, owner});
    ASCEND_CHECK(write_owners(records), "");
    auto vid = create(static_cast<unsigned int>(cand));
    if (vid) return made(*vid);
    records.pop_back();
    ASCEND_CHECK(write_owners(records), "");
    last = vid.error();
    // Another writer took this id since the list was read: try the next one; anything else is final.
    if (id || last.code() != ENOSPC) break;
    ASCEND_ASSIGN(existing, read_vnpus(p, phy_id), "");
    if (std::none_of(existing.begin(), existing.end(), [&](const Vnpu& v) { return v.id == cand; })) break;
  }
  return last;
}

Status DcmiDeviceQuery::destroy_vnpu(int vnpu_id, std::optional<int> phy_id,
                                     const std::optional<VnpuOwner>& holder) {
  ASCEND_ASSIGN(FileLock lock, lock_owners(), "destroy vNPU " + std::to_string(vnpu_id));
  ASCEND_ASSIGN(DeviceSnapshot s, snapshot(), "destroy vNPU " + std::to_string(vnpu_id));
  const Vnpu* v = s.vnpu(vnpu_id);
  if (v == nullptr) return Error::not_found("no vNPU " + std::to_string(vnpu_id));
  if (phy_id && *phy_id != v->phy_id) {
    return Error::not_found("vNPU " + std::to_string(vnpu_id) + " is not on chip " + std::to_string(*phy_id));
  }
  if (holder && !held_by(*v, *holder)) {
    const std::string now = v->dynamic() ? "container " + v->owner.container_id : "no container";
    return Error(ESTALE, "vNPU " + std::to_string(vnpu_id) + " is now held by " + now + ", not " +
                             (holder->container_id.empty() ? "the expected owner"
                                                           : "container " + holder->container_id));
  }
  ASCEND_ASSIGN(auto where, places(), "");
  auto it = where.find(v->phy_id);
  if (it == where.end()) return Error(ENODEV, "no NPU with physical id " + std::to_string(v->phy_id));
  ASCEND_CHECK(
      check(api_.destroy_vdevice(it->second.card, it->second.device, static_cast<unsigned int>(vnpu_id)),
            "dcmi_set_destroy_vdevice"),
      "vNPU " + std::to_string(vnpu_id));
  ASCEND_ASSIGN(std::vector<OwnerRecord> records, read_owners(), "");
  const std::size_t before = records.size();
  std::erase_if(records, [&](const OwnerRecord& r) { return r.id == vnpu_id; });
  if (records.size() != before) ASCEND_CHECK(write_owners(records), "");
  return {};
}

// Polls the snapshot every interval and reports when it changed.
class PollSubscription final : public Subscription {
 public:
  PollSubscription(const DcmiDeviceQuery& dq, DeviceQuery::ChangeCallback cb, std::chrono::milliseconds every)
      : thread_([this, &dq, cb = std::move(cb), every]() {
          // Fixed rate, not fixed delay: a poll starts every `every` however long the last one took, so a
          // change is seen within one interval plus one poll (two polls when it lands mid-poll).
          std::unique_lock<std::mutex> lock(mu_);
          auto next = std::chrono::steady_clock::now() + every;
          while (!cv_.wait_until(lock, next, [this] { return stop_; })) {
            const auto now = std::chrono::steady_clock::now();
            next = next + every > now ? next + every : now + every;  // an overrun skips, never piles up
            lock.unlock();
            // A poll that throws (the subscriber's callback, a bug, out of memory) is logged; the next one
            // runs on time.
            run_guarded(
                "DCMI poll",
                [&] {
                  auto p = dq.poll();
                  if (p && p->second) cb(p->first);
                },
                "the next poll runs on time", &failed_);
            lock.lock();
          }
        }) {}
  ~PollSubscription() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string failed_;  // the last exception's text (guarded.h); the thread's own
  std::thread thread_;  // last: started once the members above exist
};

Result<std::unique_ptr<Subscription>> DcmiDeviceQuery::subscribe(ChangeCallback on_change) const {
  (void)snapshot();  // the state the first poll is compared with
  return std::unique_ptr<Subscription>(
      std::make_unique<PollSubscription>(*this, std::move(on_change), opts_.poll_interval));
}

}  // namespace

Result<std::unique_ptr<DeviceQuery>> open_device_query(const BackendOptions& opts) {
  return open_device_query(opts, open_dcmi);
}

Result<std::unique_ptr<DeviceQuery>> open_dcmi(const BackendOptions& opts) {
  const std::string lib = opts.dcmi_library.empty() ? find_dcmi_library(opts) : opts.dcmi_library;
  if (lib.empty()) {
    const auto tried = dcmi_library_candidates(opts.root);
    return Error(ENOENT, "backend dcmi: no libdcmi.so under " + opts.root + " (tried " + tried[0] + " and " +
                             tried[1] + "; set the library's path, or use backend emulator)");
  }
  ASCEND_ASSIGN(Api api, load_api(lib), "backend dcmi");
  ASCEND_CHECK(check(api.init(), "dcmi_init"), "backend dcmi (" + lib + ")");
  return std::unique_ptr<DeviceQuery>(std::make_unique<DcmiDeviceQuery>(opts, lib, api));
}

}  // namespace ascend::npu
