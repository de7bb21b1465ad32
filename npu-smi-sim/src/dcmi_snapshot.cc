// The DCMI backend's snapshot (dcmi_device_query.h): the driver, the chips (dcmi_chips.cc), the chip family's
// tables, the links between the chips, the vNPUs with their owners, and the device nodes, read in that order.
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "ascend/npu/profiles.h"
#include "dcmi_device_query.h"
#include "dcmi_errors.h"

namespace ascend::npu::dcmi_backend {
namespace {

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

// The nodes of the chips, of the vNPUs and the control nodes, by stat under the host root.
void stat_nodes(const std::string& root, DeviceSnapshot& s) {
  for (const Chip& c : s.chips)
    s.chip_nodes.push_back(stat_node(root, "/dev/davinci" + std::to_string(c.phy_id)));
  for (const Vnpu& v : s.vnpus)
    s.vnpu_nodes.push_back(stat_node(root, "/dev/vdavinci" + std::to_string(v.id)));
  for (const char* n : {"/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"}) {
    s.control.push_back(stat_node(root, n));
  }
}

// The owner of each vNPU that a record of the owner file names (a dynamic one, in use).
void apply_owners(std::vector<Vnpu>& vs, const std::vector<OwnerRecord>& owners) {
  for (Vnpu& v : vs) {
    for (const OwnerRecord& r : owners) {
      if (r.id == v.id && r.phy_id == v.phy_id && r.template_name == v.template_name) {
        v.owner = r.owner;
        v.status = 1;
      }
    }
  }
}

}  // namespace

Result<DeviceSnapshot> DcmiDeviceQuery::snapshot() const {
  const std::uint64_t seq = ++reads_;
  ASCEND_ASSIGN(DeviceSnapshot s, read(), "");
  record(s, seq);
  return s;
}

Result<DeviceSnapshot> DcmiDeviceQuery::read() const {
  DeviceSnapshot s;
  s.backend = "dcmi";
  ASCEND_CHECK(read_driver(s), "");
  ASCEND_ASSIGN(const std::vector<Place> order, read_chips(s), "");
  ASCEND_CHECK(read_family(s, order[0]), "");
  ASCEND_ASSIGN(s.links, links(order, s), "");
  const std::vector<int> domains = hccs_domains(s);
  for (std::size_t i = 0; i < s.chips.size(); ++i) s.chips[i].hccs_domain = domains[i];
  ASCEND_CHECK(read_all_vnpus(s, order), "");
  stat_nodes(opts_.root, s);
  return s;
}

Status DcmiDeviceQuery::read_driver(DeviceSnapshot& s) const {
  char version[64] = {};
  ASCEND_CHECK(check(api_.driver_version(version, sizeof version), "dcmi_get_driver_version"), "");
  s.driver_version.assign(version, ::strnlen(version, sizeof version));
  int mode = 0;
  ASCEND_CHECK(check(api_.vdevice_mode(&mode), "dcmi_get_vdevice_mode"), "");
  s.vnpu_mode = mode == 1 ? "vm" : "docker";
  return {};
}

Result<std::vector<DcmiDeviceQuery::Place>> DcmiDeviceQuery::read_chips(DeviceSnapshot& s) const {
  ASCEND_ASSIGN(auto where, places(), "read the chips through DCMI");
  if (where.empty()) return Error(ENODEV, "DCMI (" + lib_ + ") reports no NPU chip");
  std::vector<Place> order;
  for (const auto& [phy, p] : where) {
    ASCEND_ASSIGN(Chip c, read_chip(p.card, p.device), "chip " + std::to_string(phy));
    s.chips.push_back(std::move(c));
    order.push_back(p);
  }
  return order;
}

// The chip type, and what follows from the chip family as the driver has it: the resource name, the vNPU
// templates and capacity.
Status DcmiDeviceQuery::read_family(DeviceSnapshot& s, const Place& first) const {
  dcmi_chip_info info{};
  ASCEND_CHECK(check(api_.chip_info(first.card, first.device, &info), "dcmi_get_device_chip_info"), "");
  s.chip_type = c_string(info.chip_type, sizeof info.chip_type);
  ASCEND_ASSIGN(s.family, family_of_chip_name(s.chips[0].name), "");
  s.resource_name = resource_name_for(s.family);
  const int basis = vnpu_memory_basis_mb(s.chips[0]);
  s.templates = templates_for(s.family, basis);
  s.vnpu_capacity = vnpu_capacity_for(s.family, s.chips[0].aicore_count, basis);
  return {};
}

// Every chip's vNPUs (none read where the family has no templates) with their owners, by id.
Status DcmiDeviceQuery::read_all_vnpus(DeviceSnapshot& s, const std::vector<Place>& order) const {
  ASCEND_ASSIGN(std::vector<OwnerRecord> owners, owners_.read(), "");
  if (!s.templates.empty()) {
    for (std::size_t i = 0; i < s.chips.size(); ++i) {
      ASCEND_ASSIGN(std::vector<Vnpu> vs, read_vnpus(order[i], s.chips[i].phy_id),
                    "vNPUs of chip " + std::to_string(s.chips[i].phy_id));
      apply_owners(vs, owners);
      for (Vnpu& v : vs) s.vnpus.push_back(std::move(v));
    }
  }
  std::sort(s.vnpus.begin(), s.vnpus.end(), [](const Vnpu& a, const Vnpu& b) { return a.id < b.id; });
  return {};
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

}  // namespace ascend::npu::dcmi_backend
