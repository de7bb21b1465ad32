// Loading the driver's libdcmi.so and resolving the functions the DCMI backend calls (dcmi_library.h).
#include "dcmi_library.h"

#include <dlfcn.h>

#include <cerrno>

namespace ascend::npu::dcmi_backend {
namespace {

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

}  // namespace

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

}  // namespace ascend::npu::dcmi_backend
