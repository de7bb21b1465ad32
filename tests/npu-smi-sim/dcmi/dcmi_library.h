// The built libdcmi.so, opened with dlopen as a vendor tool opens it. Each DcmiLibrary may load its own
// copy of the file (a new path is a new instance, with its own dcmi_init state), so that a test can start
// from an uninitialised library or place the library inside an emulated host's tree.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>
#include <string>

#include "dcmi_interface_api.h"

namespace ascend::npu::testing {

inline std::string built_libdcmi() {
  return std::string(ASCEND_LIB_DIR) + "/libdcmi.so";
}

class DcmiLibrary {
 public:
  // Opens `path` (default: the built library). With `copy_to`, the library is first copied there.
  explicit DcmiLibrary(const std::string& path = built_libdcmi(), const std::string& copy_to = "") {
    std::string file = path;
    if (!copy_to.empty()) {
      std::filesystem::create_directories(std::filesystem::path(copy_to).parent_path());
      std::filesystem::copy_file(path, copy_to, std::filesystem::copy_options::overwrite_existing);
      file = copy_to;
    }
    handle_ = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) throw std::runtime_error(std::string("dlopen: ") + ::dlerror());
  }
  ~DcmiLibrary() {
    if (handle_ != nullptr) ::dlclose(handle_);
  }
  DcmiLibrary(const DcmiLibrary&) = delete;
  DcmiLibrary& operator=(const DcmiLibrary&) = delete;

  // The entry point `name`, typed as the public header declares it:
  // lib.fn<decltype(&dcmi_init)>("dcmi_init").
  template <typename Fn>
  Fn fn(const char* name) const {
    void* sym = ::dlsym(handle_, name);
    if (sym == nullptr) throw std::runtime_error(std::string("dlsym ") + name);
    return reinterpret_cast<Fn>(sym);
  }

 private:
  void* handle_ = nullptr;
};

// The entry points by name, so tests read like C: `api.init()`, `api.health(0, 0, &h)`.
struct DcmiApi {
  explicit DcmiApi(const DcmiLibrary& l)
      : init(l.fn<decltype(&dcmi_init)>("dcmi_init")),
        card_num_list(l.fn<decltype(&dcmi_get_card_num_list)>("dcmi_get_card_num_list")),
        card_list(l.fn<decltype(&dcmi_get_card_list)>("dcmi_get_card_list")),
        device_num_in_card(l.fn<decltype(&dcmi_get_device_num_in_card)>("dcmi_get_device_num_in_card")),
        device_id_in_card(l.fn<decltype(&dcmi_get_device_id_in_card)>("dcmi_get_device_id_in_card")),
        logic_id(l.fn<decltype(&dcmi_get_device_logic_id)>("dcmi_get_device_logic_id")),
        logicid_from_phyid(
            l.fn<decltype(&dcmi_get_device_logicid_from_phyid)>("dcmi_get_device_logicid_from_phyid")),
        chip_info(l.fn<decltype(&dcmi_get_device_chip_info)>("dcmi_get_device_chip_info")),
        health(l.fn<decltype(&dcmi_get_device_health)>("dcmi_get_device_health")),
        errorcode_v2(l.fn<decltype(&dcmi_get_device_errorcode_v2)>("dcmi_get_device_errorcode_v2")),
        hbm_info(l.fn<decltype(&dcmi_get_device_hbm_info)>("dcmi_get_device_hbm_info")),
        memory_info_v3(l.fn<decltype(&dcmi_get_device_memory_info_v3)>("dcmi_get_device_memory_info_v3")),
        temperature(l.fn<decltype(&dcmi_get_device_temperature)>("dcmi_get_device_temperature")),
        utilization_rate(
            l.fn<decltype(&dcmi_get_device_utilization_rate)>("dcmi_get_device_utilization_rate")),
        power_info(l.fn<decltype(&dcmi_get_device_power_info)>("dcmi_get_device_power_info")),
        network_health(l.fn<decltype(&dcmi_get_device_network_health)>("dcmi_get_device_network_health")),
        pcie_info_v2(l.fn<decltype(&dcmi_get_device_pcie_info_v2)>("dcmi_get_device_pcie_info_v2")),
        affinity(l.fn<decltype(&dcmi_get_affinity_cpu_info_by_device_id)>(
            "dcmi_get_affinity_cpu_info_by_device_id")),
        topo(l.fn<decltype(&dcmi_get_topo_info_by_device_id)>("dcmi_get_topo_info_by_device_id")),
        ip(l.fn<decltype(&dcmi_get_device_ip)>("dcmi_get_device_ip")),
        create_vdevice(l.fn<decltype(&dcmi_create_vdevice)>("dcmi_create_vdevice")),
        destroy_vdevice(l.fn<decltype(&dcmi_set_destroy_vdevice)>("dcmi_set_destroy_vdevice")),
        device_info(l.fn<decltype(&dcmi_get_device_info)>("dcmi_get_device_info")) {}

  decltype(&dcmi_init) init;
  decltype(&dcmi_get_card_num_list) card_num_list;
  decltype(&dcmi_get_card_list) card_list;
  decltype(&dcmi_get_device_num_in_card) device_num_in_card;
  decltype(&dcmi_get_device_id_in_card) device_id_in_card;
  decltype(&dcmi_get_device_logic_id) logic_id;
  decltype(&dcmi_get_device_logicid_from_phyid) logicid_from_phyid;
  decltype(&dcmi_get_device_chip_info) chip_info;
  decltype(&dcmi_get_device_health) health;
  decltype(&dcmi_get_device_errorcode_v2) errorcode_v2;
  decltype(&dcmi_get_device_hbm_info) hbm_info;
  decltype(&dcmi_get_device_memory_info_v3) memory_info_v3;
  decltype(&dcmi_get_device_temperature) temperature;
  decltype(&dcmi_get_device_utilization_rate) utilization_rate;
  decltype(&dcmi_get_device_power_info) power_info;
  decltype(&dcmi_get_device_network_health) network_health;
  decltype(&dcmi_get_device_pcie_info_v2) pcie_info_v2;
  decltype(&dcmi_get_affinity_cpu_info_by_device_id) affinity;
  decltype(&dcmi_get_topo_info_by_device_id) topo;
  decltype(&dcmi_get_device_ip) ip;
  decltype(&dcmi_create_vdevice) create_vdevice;
  decltype(&dcmi_set_destroy_vdevice) destroy_vdevice;
  decltype(&dcmi_get_device_info) device_info;
};

// A create request as a vendor tool fills it: `id` DCMI_VDEV_ID_AUTO for the lowest free id.
inline dcmi_create_vdev_res_stru vdev_request(const std::string& tmpl, unsigned int id = DCMI_VDEV_ID_AUTO) {
  dcmi_create_vdev_res_stru r{};
  r.vdev_id = id;
  r.vfg_id = DCMI_VDEV_ID_AUTO;
  std::snprintf(r.template_name, sizeof r.template_name, "%s", tmpl.c_str());
  return r;
}

}  // namespace ascend::npu::testing
