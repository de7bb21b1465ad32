// The files an emulated host lays out under its root (emulator_tree.h).
#include "emulator_tree.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <filesystem>
#include <utility>

#include "ascend/common/fs.h"
#include "emulator_root.h"

namespace ascend::npu::emulator_detail {
namespace {

std::string version_info(const HostState& s) {
  return "Version=" + s.driver_version +
         "\nascendhal_version=7.35.19\naicpu_version=1.0\ntdt_version=1.0\nlog_version=1.0\nprof_version=2."
         "0\n"
         "dvppkernels_version=1.1\ntsfw_version=1.0\nInnerversion=V100R001C15SPC006B220\n"
         "compatible_version=[V100R001C30],[V100R001C13],[V100R001C15],[V100R001C17]\n"
         "compatible_version_fw=[7.0.0,7.2.99]\n";
}

std::string hccn_conf(const HostState& s) {
  std::string out;
  for (const auto& c : s.chips) {
    std::string id = std::to_string(c.phy_id);
    std::string gw = c.device_ip.substr(0, c.device_ip.rfind('.')) + ".254";
    for (const auto& [key, value] : {std::pair<const char*, std::string>{"address_", c.device_ip},
                                     {"netmask_", "255.255.255.0"},
                                     {"netdetect_", gw},
                                     {"gateway_", gw},
                                     {"send_arp_status_", "1"}}) {
      out += key;
      out += id;
      out += '=';
      out += value;
      out += '\n';
    }
  }
  return out;
}

constexpr const char* kInstallInfo =
    "UserName=HwHiAiUser\nUserGroup=HwHiAiUser\nDriver_Install_Type=full\n"
    "Driver_Install_Path_Param=/usr/local/Ascend\nDriver_Install_For_All=no\nDriver_Install_Mode=normal\n"
    "Driver_Install_Status=complete\nFirmware_Install_Type=full\nFirmware_Install_Path_Param=/usr/local/"
    "Ascend\n";

}  // namespace

Status Layout::dir(const std::string& rel) {
  std::string cur;
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = rel.find('/', pos + 1);
    cur = rel.substr(0, pos);
    std::string full = join(root_, cur);
    if (exists(full)) continue;
    if (::mkdir(full.c_str(), 0755) != 0 && errno != EEXIST) return Error::from_errno(errno, "mkdir " + full);
    created_.push_back(cur + "/");
  }
  return {};
}
Status Layout::file(const std::string& rel, std::string_view content, mode_t mode) {
  std::string full = join(root_, rel);
  ASCEND_CHECK(dir(rel.substr(0, rel.rfind('/'))), "");
  bool existed = exists(full);
  ASCEND_CHECK(atomic_replace(full, content, mode), "");
  if (::chmod(full.c_str(), mode) != 0) return Error::from_errno(errno, "chmod " + full);
  if (!existed) created_.push_back(rel);
  return {};
}
Status Layout::copy(const std::string& rel, const std::string& src, mode_t mode) {
  std::string full = join(root_, rel);
  ASCEND_CHECK(dir(rel.substr(0, rel.rfind('/'))), "");
  bool existed = exists(full);
  std::string tmp = full + ".tmp";
  std::error_code ec;
  std::filesystem::copy_file(src, tmp, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) return Error(ec.value(), "copy " + src + " to " + tmp + ": " + ec.message());
  if (::chmod(tmp.c_str(), mode) != 0 || ::rename(tmp.c_str(), full.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return Error::from_errno(err, "install " + full);
  }
  if (!existed) created_.push_back(rel);
  return {};
}
Status Layout::node(const std::string& rel, int major, int minor) {
  std::string full = join(root_, rel);
  ASCEND_CHECK(dir(rel.substr(0, rel.rfind('/'))), "");
  if (exists(full)) {
    if (::unlink(full.c_str()) != 0) return Error::from_errno(errno, "remove old " + full);
  }
  if (::mknod(full.c_str(), S_IFCHR | 0660, makedev(major, minor)) != 0) {
    return Error::from_errno(errno, "mknod " + full);
  }
  if (::chmod(full.c_str(), 0660) != 0) return Error::from_errno(errno, "chmod " + full);
  created_.push_back(rel);
  return {};
}
std::string Layout::manifest() const {
  std::string out;
  for (const auto& p : created_) out += p + "\n";
  return out;
}
Status make_device_nodes(Layout& l, const std::string& root, const HostState& s) {
  for (const auto& c : s.chips) {
    auto n = s.chip_node(c.phy_id);
    ASCEND_CHECK(l.node(n.path.substr(1), n.major, n.minor), "create device node");
  }
  for (const auto& n : s.control_nodes())
    ASCEND_CHECK(l.node(n.path.substr(1), n.major, n.minor), "create device node");
  for (const auto& v : s.vnpus) {
    auto n = s.vnpu_node(v.id);
    std::string full = join(root, n.path.substr(1));
    ::unlink(full.c_str());
    if (::mknod(full.c_str(), S_IFCHR | 0660, makedev(n.major, n.minor)) != 0)
      return Error::from_errno(errno, "mknod " + full);
  }
  return {};
}

Status write_driver_tree(Layout& l, const HostState& s, const DriverBinaries& bins) {
  const std::string drv = "usr/local/Ascend/driver/";
  ASCEND_CHECK(l.file(drv + "version.info", version_info(s)), "driver tree");
  for (const char* so : {"lib64/driver/libascend_hal.so", "lib64/driver/libdrvdsmi_host.so",
                         "lib64/common/libc_sec.so", "lib64/common/libmmpa.so"}) {
    ASCEND_CHECK(l.copy(drv + so, bins.stub, 0755), "driver tree");
  }
  ASCEND_CHECK(l.copy(drv + "lib64/driver/libdcmi.so", bins.dcmi, 0755), "driver tree");
  ASCEND_CHECK(l.file(drv + "include/dsmi_common_interface.h",
                      "/* emulated Ascend driver: see npu-sim --help */\n#pragma once\n"),
               "driver tree");
  ASCEND_CHECK(l.file(drv + "tools/hccn_tool",
                      "#!/bin/sh\necho 'hccn_tool: emulated host, no NIC' >&2\nexit 1\n", 0755),
               "driver tree");
  ASCEND_CHECK(l.copy("usr/local/dcmi/libdcmi.so", bins.dcmi, 0755), "dcmi");
  ASCEND_CHECK(l.file("usr/local/dcmi/dcmi_interface_api.h", "/* emulated DCMI */\n#pragma once\n"), "dcmi");
  ASCEND_CHECK(l.copy("usr/local/bin/npu-smi", bins.npu_smi, 0755), "npu-smi");
  ASCEND_CHECK(l.file("etc/ascend_install.info", kInstallInfo), "etc");
  ASCEND_CHECK(l.file("etc/hccn.conf", hccn_conf(s)), "etc");
  return {};
}

Status write_sysfs(Layout& l, const HostState& s) {
  for (const auto& c : s.chips) {
    std::string bdf = c.bus_id;
    for (char& ch : bdf) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    ASCEND_CHECK(l.file("sys/bus/pci/devices/" + bdf + "/numa_node", std::to_string(c.numa_node) + "\n"),
                 "sysfs");
  }
  return {};
}

}  // namespace ascend::npu::emulator_detail
