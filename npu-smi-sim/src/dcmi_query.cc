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
//
// The backend's parts: dcmi_library.h (the library and its functions), dcmi_errors.h (DCMI's codes),
// dcmi_device_query.h (the DeviceQuery, in parts by concept), dcmi_owner_file.h (the vNPU owners).
#include <memory>
#include <string>

#include "ascend/npu/backend.h"
#include "dcmi_device_query.h"
#include "dcmi_errors.h"
#include "dcmi_library.h"

namespace ascend::npu {

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
  ASCEND_ASSIGN(dcmi_backend::Api api, dcmi_backend::load_api(lib), "backend dcmi");
  ASCEND_CHECK(dcmi_backend::check(api.init(), "dcmi_init"), "backend dcmi (" + lib + ")");
  return std::unique_ptr<DeviceQuery>(std::make_unique<dcmi_backend::DcmiDeviceQuery>(opts, lib, api));
}

}  // namespace ascend::npu
