// The driver's libdcmi.so as the DCMI backend (dcmi_query.cc) uses it: the library, loaded with dlopen, and
// every function the backend calls, resolved once when it is opened, so that a driver without one is refused
// at open with the function's name rather than failing at some later call. The types are the reference's
// (dcmi_interface_api.h).
#pragma once

#include <cstddef>
#include <cstring>
#include <string>

#include "ascend/common/error.h"
#include "dcmi_interface_api.h"

namespace ascend::npu::dcmi_backend {

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

// Loads `lib` (RTLD_NOW | RTLD_LOCAL) and resolves every function of Api: ENOENT when it cannot be loaded,
// ENOSYS naming the first function it lacks. The library is never closed: a process loads it once.
Result<Api> load_api(const std::string& lib);

// A fixed-size character field of a DCMI structure, up to its first NUL.
inline std::string c_string(const unsigned char* p, std::size_t n) {
  const auto* c = reinterpret_cast<const char*>(p);
  return {c, ::strnlen(c, n)};
}

}  // namespace ascend::npu::dcmi_backend
