// The DCMI backend's vNPUs (dcmi_device_query.h): a chip's vNPUs as DCMI lists them (dcmi_get_device_info,
// VDEV_MNG), creating one (dcmi_create_vdevice) and destroying one (dcmi_set_destroy_vdevice). Who holds a
// dynamic vNPU is kept in the owner file (dcmi_owner_file.h), under its lock.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "dcmi_device_query.h"
#include "dcmi_errors.h"

namespace ascend::npu::dcmi_backend {
namespace {

// The ids a dynamic vNPU may take: `id` when given, else every id of the chip's range that no vNPU has.
Result<std::vector<int>> candidate_ids(int phy_id, std::optional<int> id, const std::vector<Vnpu>& existing) {
  std::vector<int> ids;
  if (id) {
    ids.push_back(*id);
    return ids;
  }
  for (int k = 0; k < 16; ++k) {
    const int cand = 100 + 16 * phy_id + k;
    if (std::none_of(existing.begin(), existing.end(), [&](const Vnpu& v) { return v.id == cand; })) {
      ids.push_back(cand);
    }
  }
  if (ids.empty()) return Error(ENOSPC, "chip " + std::to_string(phy_id) + " has no free vNPU id");
  return ids;
}

}  // namespace

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

Result<Vnpu> DcmiDeviceQuery::create_vnpu(int phy_id, const std::string& template_name, std::optional<int> id,
                                          const VnpuOwner& owner) {
  ASCEND_ASSIGN(auto where, places(), "create a vNPU");
  auto it = where.find(phy_id);
  if (it == where.end()) return Error(ENODEV, "no NPU with physical id " + std::to_string(phy_id));
  const Place p = it->second;
  if (template_name.empty() || template_name.size() >= sizeof(dcmi_create_vdev_res_stru{}.template_name)) {
    return Error::invalid("vNPU template '" + template_name + "' is not a template name");
  }
  if (!owner.container_id.empty()) return create_dynamic(p, phy_id, template_name, id, owner);
  ASCEND_ASSIGN(
      int vid,
      create_vdevice(p, phy_id, template_name, id ? static_cast<unsigned int>(*id) : DCMI_VDEV_ID_AUTO), "");
  return created(p, phy_id, vid, owner);
}

// The vNPU's id as DCMI gave it.
Result<int> DcmiDeviceQuery::create_vdevice(const Place& p, int phy_id, const std::string& template_name,
                                            unsigned int vdev_id) {
  dcmi_create_vdev_res_stru in{};
  in.vdev_id = vdev_id;
  in.vfg_id = DCMI_VDEV_ID_AUTO;
  std::memcpy(in.template_name, template_name.data(), template_name.size());
  dcmi_create_vdev_out out{};
  ASCEND_CHECK(check(api_.create_vdevice(p.card, p.device, &in, &out), "dcmi_create_vdevice"),
               "vNPU " + template_name + " on chip " + std::to_string(phy_id));
  return static_cast<int>(out.vdev_id);
}

// The vNPU just created as DCMI lists it, held by `owner` when that names a container.
Result<Vnpu> DcmiDeviceQuery::created(const Place& p, int phy_id, int vid, const VnpuOwner& owner) const {
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
}

// A dynamic vNPU: its owner is recorded before it exists (under the owner file's lock), so that no crash
// leaves a dynamic vNPU untagged; a record whose vNPU never came is ignored and pruned later.
Result<Vnpu> DcmiDeviceQuery::create_dynamic(const Place& p, int phy_id, const std::string& template_name,
                                             std::optional<int> id, const VnpuOwner& owner) {
  ASCEND_ASSIGN(FileLock lock, owners_.lock(), "");
  ASCEND_ASSIGN(std::vector<OwnerRecord> records, owners_.read(), "");
  ASCEND_ASSIGN(std::vector<Vnpu> existing, read_vnpus(p, phy_id), "");
  ASCEND_ASSIGN(const std::vector<int> ids, candidate_ids(phy_id, id, existing), "");
  // Prune records of vNPUs that no longer exist on this chip.
  std::erase_if(records, [&](const OwnerRecord& r) {
    return r.phy_id == phy_id &&
           std::none_of(existing.begin(), existing.end(), [&](const Vnpu& v) { return v.id == r.id; });
  });
  Error last(ENOSPC, "");
  for (int cand : ids) {
    records.push_back(OwnerRecord{cand, phy_id, template_name, owner});
    ASCEND_CHECK(owners_.write(records), "");
    auto vid = create_vdevice(p, phy_id, template_name, static_cast<unsigned int>(cand));
    if (vid) return created(p, phy_id, *vid, owner);
    records.pop_back();
    ASCEND_CHECK(owners_.write(records), "");
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
  ASCEND_ASSIGN(FileLock lock, owners_.lock(), "destroy vNPU " + std::to_string(vnpu_id));
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
  ASCEND_ASSIGN(std::vector<OwnerRecord> records, owners_.read(), "");
  const std::size_t before = records.size();
  std::erase_if(records, [&](const OwnerRecord& r) { return r.id == vnpu_id; });
  if (records.size() != before) ASCEND_CHECK(owners_.write(records), "");
  return {};
}

}  // namespace ascend::npu::dcmi_backend
