// The DCMI answers, computed from the same state and the same derived facts that npu-smi prints, so that a
// vendor tool and npu-smi agree on every number (see REFERENCE.md for the npu-smi field behind each).
#include <arpa/inet.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "ascend/npu/smi/telemetry.h"
#include "ascend/npu/smi/vnpu_resources.h"
#include "host_view.h"

namespace ascend::npu::dcmi {

namespace {

// Linux's default huge page on the hosts the captures come from (2 MB); the state counts pages only.
constexpr unsigned long kHugePageKb = 2048;

template <std::size_t N>
void copy_name(unsigned char (&dst)[N], std::string_view src) {
  std::memset(dst, 0, N);
  std::memcpy(dst, src.data(), std::min(src.size(), N - 1));
}

bool has_hbm(const HostState& s) {
  return s.family != Family::k310P;
}

Result<dcmi_ip_addr> parse_ipv4(const std::string& text, const std::string& what) {
  dcmi_ip_addr a{};
  in_addr addr{};
  if (::inet_pton(AF_INET, text.c_str(), &addr) != 1) {
    return Error(ENODATA, what + " '" + text + "' is not an IPv4 address");
  }
  std::memcpy(a.u_addr.ip4, &addr.s_addr, sizeof a.u_addr.ip4);
  a.ip_type = DCMI_IPADDR_TYPE_V4;
  return a;
}

// NA as the DCMI reports it (and npu-smi's info-vnpu tests it): -1.0 for a float unit count, all bits set
// for memory and for the unsigned short counts.
constexpr float kNaUnits = -1.0F;
constexpr unsigned long long kNaMemory = ~0ULL;
constexpr unsigned short kNaCount = 0xFFFF;

float units(const smi::Resource& r, bool free) {
  return r.na ? kNaUnits : static_cast<float>(free ? r.free : r.total);
}

// The chip-wide resources of `r`: its free or its total column.
void chip_resources(const smi::VnpuResources& r, bool free, dcmi_computing_resource& c,
                    dcmi_media_resource& m) {
  c.aic = units(r.aicore, free);
  c.memory_size = r.memory_gb.na
                      ? kNaMemory
                      : static_cast<unsigned long long>(free ? r.memory_free_mb : r.memory_usable_mb);
  c.device_aicpu = r.aicpu.na ? kNaCount : static_cast<unsigned short>(free ? r.aicpu.free : r.aicpu.total);
  m.vpc = units(r.vpc, free);
  m.venc = units(r.venc, free);
  m.vdec = units(r.vdec, free);
  m.jpegd = units(r.jpegd, free);
  m.jpege = units(r.jpege, free);
  m.pngd = units(r.pngd, free);
}

}  // namespace

dcmi_soc_total_resource vdev_total(const HostState& s, int phy_id) {
  dcmi_soc_total_resource out{};
  for (const Vnpu& v : s.vnpus) {  // sorted by id
    if (v.phy_id != phy_id || out.vdev_num >= DCMI_SOC_SPLIT_MAX) continue;
    out.vdev_id[out.vdev_num++] = static_cast<unsigned int>(v.id);
  }
  chip_resources(smi::vnpu_resources(s, phy_id), false, out.computing, out.media);
  return out;
}

dcmi_soc_free_resource vdev_free(const HostState& s, int phy_id) {
  dcmi_soc_free_resource out{};
  chip_resources(smi::vnpu_resources(s, phy_id), true, out.computing, out.media);
  return out;
}

Result<dcmi_vdev_query_info> vdev_query(const HostState& s, int phy_id, unsigned int vdev_id) {
  const Vnpu* v = nullptr;
  for (const Vnpu& x : s.vnpus) {
    if (x.phy_id == phy_id && static_cast<unsigned int>(x.id) == vdev_id) v = &x;
  }
  if (v == nullptr) {
    return Error(ENOENT, "device " + std::to_string(phy_id) + " has no vNPU " + std::to_string(vdev_id));
  }
  dcmi_vdev_query_info out{};
  std::memcpy(out.name, v->template_name.data(), std::min(v->template_name.size(), sizeof out.name - 1));
  // npu-smi's "Container ID" / "Status" of a held vNPU: ffffffffffff / 1 (the driver does not know the id).
  const bool held = v->dynamic() || v->status != 0;
  out.status = held ? 1U : 0U;
  out.is_container_used = held ? 1U : 0U;
  out.container_id = held ? 0xFFFFFFFFFFFFULL : 0ULL;
  out.vfg_id = static_cast<unsigned int>(v->vgroup);
  out.base.vfg_id = out.vfg_id;  // what npu-smi prints as "Vgroup ID"
  if (const VnpuTemplate* t = s.find_template(v->template_name)) {
    out.computing.aic = static_cast<float>(t->aicore);
    out.computing.memory_size = static_cast<unsigned long long>(t->memory_mb);
    out.computing.device_aicpu = static_cast<unsigned short>(t->aicpu);
    out.media.vpc = static_cast<float>(t->vpc);
    out.media.venc = static_cast<float>(t->venc);
    out.media.vdec = static_cast<float>(t->vdec);
    out.media.jpegd = static_cast<float>(t->jpegd);
    out.media.jpege = static_cast<float>(t->jpege);
    out.media.pngd = static_cast<float>(t->pngd);
  }
  return out;
}

unsigned int health_code(Health h) {
  switch (h) {
    case Health::kOk:
      return DCMI_HEALTH_OK;
    case Health::kWarning:
      return DCMI_HEALTH_MINOR;
    case Health::kAlarm:
      return DCMI_HEALTH_MAJOR;
    case Health::kCritical:
      return DCMI_HEALTH_CRITICAL;
  }
  return DCMI_HEALTH_CRITICAL;
}

int topo_code(Link l) {
  switch (l) {
    case Link::kSelf:
      return DCMI_TOPO_TYPE_SELF;
    case Link::kSys:
      return DCMI_TOPO_TYPE_SYS;
    case Link::kPhb:
      return DCMI_TOPO_TYPE_PHB;
    // The 910B reference's enum has no SIO or HCCS switch; both are HCCS-class links (REFERENCE.md).
    case Link::kHccs:
    case Link::kSio:
    case Link::kHccsSw:
      return DCMI_TOPO_TYPE_HCCS;
    case Link::kPxb:
      return DCMI_TOPO_TYPE_PXB;
    case Link::kPix:
      return DCMI_TOPO_TYPE_PIX;
    case Link::kNa:
      return DCMI_TOPO_TYPE_BUTT;
  }
  return DCMI_TOPO_TYPE_BUTT;
}

dcmi_chip_info chip_info(const HostState& s, const smi::Device& d) {
  dcmi_chip_info out{};
  copy_name(out.chip_type, s.chip_type);
  copy_name(out.chip_name, d.name);
  copy_name(out.chip_ver, smi::kChipVersion);
  out.aicore_cnt = static_cast<unsigned int>(d.aicore_count);
  return out;
}

Result<dcmi_hbm_info> hbm_info(const HostState& s, const smi::Device& d) {
  if (!has_hbm(s)) return Error(EOPNOTSUPP, d.name + " has no HBM");
  dcmi_hbm_info out{};
  out.memory_size = static_cast<unsigned long long>(d.hbm_total_mb);
  out.memory_usage = static_cast<unsigned long long>(d.hbm_used_mb);
  out.freq = static_cast<unsigned int>(smi::hbm_clock_mhz(s.family));
  out.temp = d.chip->temp_c;   // npu-smi -t memory: "HBM Temperature(C)" is the chip's
  out.bandwith_util_rate = 0;  // npu-smi -t usages: "HBM Bandwidth Usage Rate(%)" 0
  return out;
}

dcmi_get_memory_info_stru memory_info(const HostState& s, const smi::Device& d) {
  dcmi_get_memory_info_stru out{};
  const Chip& c = *d.chip;
  const unsigned long huge_free = c.hugepages_total > c.hugepages_used
                                      ? static_cast<unsigned long>(c.hugepages_total - c.hugepages_used)
                                      : 0;
  out.memory_size = static_cast<unsigned long long>(d.mem_total_mb);
  out.memory_available = static_cast<unsigned long long>(d.mem_total_mb - d.mem_used_mb) +
                         static_cast<unsigned long long>(huge_free) * kHugePageKb / 1024;
  out.freq = static_cast<unsigned int>(smi::ddr_clock_mhz(s.family));
  out.hugepagesize = kHugePageKb;
  out.hugepages_total = static_cast<unsigned long>(c.hugepages_total);
  out.hugepages_free = huge_free;
  out.utiliza = static_cast<unsigned int>(smi::usage_pct(d.mem_used_mb, d.mem_total_mb));
  return out;
}

Result<dcmi_pcie_info_all> pcie_info(const HostState& s, const smi::Device& d) {
  dcmi_pcie_info_all out{};
  unsigned domain = 0;
  unsigned bus = 0;
  unsigned dev = 0;
  unsigned fn = 0;
  const std::string& id = d.chip->bus_id;
  if (std::sscanf(id.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4) {
    return Error(EIO, "device " + std::to_string(d.chip->phy_id) + " has a bad bus id '" + id + "'");
  }
  const smi::PciIdentity p = smi::pci_identity(s.family);
  out.venderid = static_cast<unsigned int>(p.vendor);
  out.subvenderid = static_cast<unsigned int>(p.subsys_vendor);
  out.deviceid = static_cast<unsigned int>(p.device);
  out.subdeviceid = static_cast<unsigned int>(p.subsys_device);
  out.domain = static_cast<int>(domain);
  out.bdf_busid = bus;
  out.bdf_deviceid = dev;
  out.bdf_funcid = fn;
  return out;
}

Result<unsigned int> utilization(const HostState& s, const smi::Device& d, int input_type) {
  auto pct = [](long long used, long long total) {
    return static_cast<unsigned int>(smi::usage_pct(used, total));
  };
  switch (input_type) {
    case DCMI_UTILIZATION_RATE_MEMORY:
    case DCMI_UTILIZATION_RATE_DDR:
      return pct(d.mem_used_mb, d.mem_total_mb);  // npu-smi -t usages "DDR Usage Rate(%)"
    case DCMI_UTILIZATION_RATE_AICORE:
    case DCMI_UTILIZATION_RATE_NPU:
      return static_cast<unsigned int>(d.aicore_usage_pct);  // "Aicore Usage Rate(%)"
    case DCMI_UTILIZATION_RATE_HBM:
      if (!has_hbm(s)) return Error(EOPNOTSUPP, d.name + " has no HBM");
      return pct(d.hbm_used_mb, d.hbm_total_mb);  // "HBM Usage Rate(%)"
    case DCMI_UTILIZATION_RATE_AICPU:
      return static_cast<unsigned int>(d.chip->aicpu_usage_pct);  // "Aicpu Usage Rate(%)"
    case DCMI_UTILIZATION_RATE_CTRLCPU:
    case DCMI_UTILIZATION_RATE_MEMORY_BANDWIDTH:
    case DCMI_UTILIZATION_RATE_HBM_BANDWIDTH:
    case DCMI_UTILIZATION_RATE_VECTOR_CORE:
      return 0U;  // npu-smi -t usages prints 0 for each of these on every emulated host
    default:
      return Error(EINVAL, "unknown utilization input_type " + std::to_string(input_type));
  }
}

Result<int> power_tenths(const HostState& s, const smi::Device& d) {
  const Chip& c = *d.chip;
  if (s.family == Family::k310P || c.power_na || c.power_w < 0)
    return Error(EOPNOTSUPP, d.name + " reports no power of its own");
  return static_cast<int>(std::lround(c.power_w * 10.0));
}

Result<IpAndMask> roce_address(std::string_view hccn_conf, int phy_id) {
  const std::string address_key = "address_" + std::to_string(phy_id);
  const std::string netmask_key = "netmask_" + std::to_string(phy_id);
  std::string address;
  std::string netmask;
  std::istringstream in{std::string(hccn_conf)};
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq);
    if (key == address_key) address = line.substr(eq + 1);
    if (key == netmask_key) netmask = line.substr(eq + 1);
  }
  if (address.empty() || netmask.empty()) {
    return Error(ENODATA, "hccn.conf configures no " + address_key + "/" + netmask_key);
  }
  IpAndMask out;
  ASCEND_ASSIGN(out.ip, parse_ipv4(address, "hccn.conf " + address_key), "");
  ASCEND_ASSIGN(out.mask, parse_ipv4(netmask, "hccn.conf " + netmask_key), "");
  return out;
}

}  // namespace ascend::npu::dcmi
