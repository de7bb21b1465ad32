// The DCMI backend's vNPU owner file: who holds each dynamic vNPU, which DCMI does not keep. A JSON array of
// records (id, phy_id, template, owner) at BackendOptions::owner_file (by default
// /run/ascend/dcmi-vnpu-owners.json under the host root). A vNPU that no record names counts as static.
// A writer holds lock() from reading the records until it has written them back: that lock, a file, is what
// keeps writers in several threads and processes apart; an OwnerFile itself holds nothing but the path.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/common/fs.h"
#include "ascend/npu/seam.h"

namespace ascend::npu::dcmi_backend {

// One vNPU owner record of the owner file.
struct OwnerRecord {
  int id = 0;
  int phy_id = 0;
  std::string template_name;
  VnpuOwner owner;
};

class OwnerFile {
 public:
  explicit OwnerFile(std::string path) : path_(std::move(path)) {}

  // The records; none when the file does not exist. A file that is not an array of well-formed records is
  // an error naming it (never an exception).
  Result<std::vector<OwnerRecord>> read() const;
  // Replaces the file with `records` (atomically; its folder made when missing).
  Status write(const std::vector<OwnerRecord>& records) const;
  // The writers' lock, a file beside it.
  Result<FileLock> lock() const;

 private:
  Status make_folder() const;

  std::string path_;
};

}  // namespace ascend::npu::dcmi_backend
