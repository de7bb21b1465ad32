// The emulated libdcmi.so's C++ side: one consistent look at the emulated host per DCMI call, the
// answers to the DCMI queries as pure functions of it, and the single conversion from the project's Error
// to a DCMI return code. Nothing here throws on purpose; api.cc still catches everything at the C boundary.
//
// Numbering is npu-smi's: a card is a View card (the NPU column), a device is its chip index (the Chip
// column), restricted to the devices whose nodes are visible under the root, exactly as npu-smi shows them.
// Thread-safe: a HostView is immutable once read; read() shares the last one under a lock.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "ascend/common/error.h"
#include "ascend/npu/emulator.h"
#include "ascend/npu/smi.h"
#include "ascend/npu/smi/view.h"
#include "ascend/npu/state.h"
#include "dcmi_interface_api.h"

namespace ascend::npu::dcmi {

// Errno-like codes used inside the library, each converted to one DCMI code by to_dcmi_code():
//   EINVAL -> INVALID_PARAMETER, EPERM/EACCES -> OPER_NOT_PERMITTED, ENOMEM -> MEM_OPERATE_FAIL,
//   ENODEV -> INVALID_DEVICE_ID (no such card or chip), ENOENT -> DEVICE_NOT_EXIST (no such vNPU),
//   ENOSPC/EEXIST/EBUSY -> RESOURCE_OCCUPIED, ENODATA -> CONFIG_INFO_NOT_EXIST,
//   EOPNOTSUPP -> NOT_SUPPORT, anything else (EIO: no host) -> INNER_ERR.
int to_dcmi_code(const Error& e);

// The host root: $ASCEND_SIM_ROOT when set, else derived from where this library is installed.
std::string find_root();
// <root>/usr/local/dcmi/libdcmi.so (or the driver tree's lib64/driver/libdcmi.so) -> <root>; "/" when the
// path is neither.
std::string root_of_library(std::string_view library_path);

class HostView {
 public:
  // Reads the state under `root` and the devices visible there. EIO when no host is loaded or no device
  // is visible (what makes dcmi_init fail, as npu-smi's "dcmi module initialize failed"). The view of the
  // previous call is shared while the state file holds the same bytes and the same device nodes are visible.
  static Result<std::shared_ptr<const HostView>> read(const std::string& root);

  HostView(const HostView&) = delete;
  HostView& operator=(const HostView&) = delete;

  const std::string& root() const { return root_; }
  const HostState& state() const { return state_; }
  const smi::View& view() const { return view_; }

  Result<const smi::Card*> card(int card_id) const;                     // ENODEV when unknown
  Result<const smi::Device*> device(int card_id, int device_id) const;  // ENODEV when unknown

 private:
  HostView(std::string root, HostState state);

  std::string root_;
  HostState state_;
  smi::Visible visible_;
  smi::View view_;  // points into state_
};

// ---- queries (pure) -------------------------------------------------------------------------------------

unsigned int health_code(Health h);  // DCMI_HEALTH_OK .. DCMI_HEALTH_CRITICAL
int topo_code(Link l);               // enum dcmi_topo_type

dcmi_chip_info chip_info(const HostState& s, const smi::Device& d);
Result<dcmi_hbm_info> hbm_info(const HostState& s, const smi::Device& d);
dcmi_get_memory_info_stru memory_info(const HostState& s, const smi::Device& d);
Result<dcmi_pcie_info_all> pcie_info(const HostState& s, const smi::Device& d);
Result<unsigned int> utilization(const HostState& s, const smi::Device& d, int input_type);
// dcmi_get_device_power_info: tenths of a watt, as npu-smi -t power prints them; EOPNOTSUPP where npu-smi
// prints no power of the chip's own ("-" on die 1 of an A3 card, "NA" on 310P).
Result<int> power_tenths(const HostState& s, const smi::Device& d);

// dcmi_get_device_info, DCMI_MAIN_CMD_VDEV_MNG, for physical chip `phy_id`: its vNPUs in id order with the
// totals, and the free resources, both exactly as `npu-smi info -t info-vnpu` prints them
// (smi::vnpu_resources); one vNPU from its template (ENOENT when the chip has no vNPU `vdev_id`).
dcmi_soc_total_resource vdev_total(const HostState& s, int phy_id);
dcmi_soc_free_resource vdev_free(const HostState& s, int phy_id);
Result<dcmi_vdev_query_info> vdev_query(const HostState& s, int phy_id, unsigned int vdev_id);

struct IpAndMask {
  dcmi_ip_addr ip{};
  dcmi_ip_addr mask{};
};
// The RoCE address of physical chip `phy_id` in hccn.conf's text (address_<phy>, netmask_<phy>); ENODATA
// when the file does not configure it.
Result<IpAndMask> roce_address(std::string_view hccn_conf, int phy_id);

}  // namespace ascend::npu::dcmi
