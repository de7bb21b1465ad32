// The DCMI backend's vNPU owner file (dcmi_owner_file.h).
#include "dcmi_owner_file.h"

#include <cerrno>
#include <nlohmann/json.hpp>

namespace ascend::npu::dcmi_backend {

Result<std::vector<OwnerRecord>> OwnerFile::read() const {
  auto text = read_file(path_, 16U << 20);
  if (!text) {
    if (text.error().code() == ENOENT) return std::vector<OwnerRecord>{};
    return text.error().context("read the vNPU owner file");
  }
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_array()) {
    return Error(EIO, path_ + " is not a JSON array; remove it (vNPUs it named count as static)");
  }
  std::vector<OwnerRecord> out;
  for (const auto& e : j) {
    // A record of the wrong shape is an error naming the file, never an exception (nlohmann's value()
    // throws on a wrong type).
    if (!e.is_object() || !e.contains("owner") || !e.value("id", nlohmann::json()).is_number_integer() ||
        !e.value("phy_id", nlohmann::json()).is_number_integer() ||
        !e.value("template", nlohmann::json()).is_string()) {
      return Error(EIO, path_ + " holds a malformed record; remove it (vNPUs it named count as static)");
    }
    auto owner = owner_from_json(e["owner"]);
    if (!owner) return owner.error().context(path_);
    OwnerRecord r;
    r.id = e.value("id", -1);
    r.phy_id = e.value("phy_id", -1);
    r.template_name = e.value("template", "");
    r.owner = std::move(*owner);
    out.push_back(std::move(r));
  }
  return out;
}

Status OwnerFile::write(const std::vector<OwnerRecord>& records) const {
  nlohmann::json j = nlohmann::json::array();
  for (const OwnerRecord& r : records) {
    j.push_back({{"id", r.id},
                 {"phy_id", r.phy_id},
                 {"template", r.template_name},
                 {"owner", owner_to_json(r.owner)}});
  }
  ASCEND_CHECK(make_folder(), "the vNPU owner file's folder");
  return atomic_replace(path_, j.dump(1) + "\n", 0600).context("write the vNPU owner file");
}

Result<FileLock> OwnerFile::lock() const {
  ASCEND_CHECK(make_folder(), "the vNPU owner file's folder");
  return FileLock::acquire(path_ + ".lock");
}

Status OwnerFile::make_folder() const {
  return make_dirs(path_.substr(0, path_.rfind('/')), 0755);
}

}  // namespace ascend::npu::dcmi_backend
