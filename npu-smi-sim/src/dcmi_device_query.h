// The DCMI backend's DeviceQuery (dcmi_query.cc says what it reads and from which calls), private to
// ascend_npu_backend. Its parts, one file each:
//   dcmi_chips.cc     where each chip is (card, device) and what it is now: a snapshot's chips, telemetry()
//   dcmi_snapshot.cc  the whole snapshot: driver, chips, family tables, links, vNPUs, device nodes
//   dcmi_vnpu.cc      a chip's vNPUs, creating and destroying them (owners in the owner file)
//   dcmi_poll.cc      change detection and the polling subscription
// Thread-safe, as DeviceQuery requires: the mutable caches each have their mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/npu/backend.h"
#include "dcmi_library.h"
#include "dcmi_owner_file.h"

namespace ascend::npu::dcmi_backend {

class DcmiDeviceQuery final : public DeviceQuery {
 public:
  DcmiDeviceQuery(BackendOptions opts, std::string lib, Api api)
      : opts_(std::move(opts)),
        lib_(std::move(lib)),
        api_(api),
        owners_(opts_.owner_file.empty() ? host_path("/run/ascend/dcmi-vnpu-owners.json")
                                         : opts_.owner_file) {}
  ~DcmiDeviceQuery() override = default;  // the library stays loaded: a process loads it once

  Result<DeviceSnapshot> snapshot() const override;
  Result<std::vector<ChipTelemetry>> telemetry() const override;
  std::string host_path(const std::string& abs_path) const override {
    return opts_.root == "/" ? abs_path : opts_.root + abs_path;
  }
  Result<Vnpu> create_vnpu(int phy_id, const std::string& template_name, std::optional<int> id,
                           const VnpuOwner& owner) override;
  Status destroy_vnpu(int vnpu_id, std::optional<int> phy_id,
                      const std::optional<VnpuOwner>& holder) override;
  Result<std::unique_ptr<Subscription>> subscribe(ChangeCallback on_change) const override;

  // A poll: the host now, and whether it differs from the last snapshot this backend returned to anyone.
  // Comparing with the last one returned (not the last poll) matters when a caller also reads on its own
  // and applies what it reads (the plugin's periodic driver check): a fault cleared and raised again
  // between two polls is a change for that caller if it saw the clear, though both polls saw the fault.
  Result<std::pair<DeviceSnapshot, bool>> poll() const;

 private:
  struct Place {
    int card = 0;
    int device = 0;
  };
  // Each chip's (card, device) by physical id, enumerated now.
  Result<std::map<int, Place>> places() const;
  Result<Chip> read_chip(int card, int device) const;
  Result<std::vector<Vnpu>> read_vnpus(const Place& p, int phy_id) const;

  // The link matrix of the chips at `order` (DCMI's topology does not change while the driver is loaded):
  // read once per set of chips, so that a poll costs the chips' calls, not n squared topology calls.
  Result<std::vector<Link>> links(const std::vector<Place>& order, const DeviceSnapshot& s) const;

  // The steps of read(), in its order.
  Status read_driver(DeviceSnapshot& s) const;
  Result<std::vector<Place>> read_chips(DeviceSnapshot& s) const;  // the chips' places, in phy order
  Status read_family(DeviceSnapshot& s, const Place& first) const;
  Status read_all_vnpus(DeviceSnapshot& s, const std::vector<Place>& order) const;

  // The steps of create_vnpu.
  Result<int> create_vdevice(const Place& p, int phy_id, const std::string& template_name,
                             unsigned int vdev_id);
  Result<Vnpu> created(const Place& p, int phy_id, int vid, const VnpuOwner& owner) const;
  Result<Vnpu> create_dynamic(const Place& p, int phy_id, const std::string& template_name,
                              std::optional<int> id, const VnpuOwner& owner);

  BackendOptions opts_;
  std::string lib_;
  Api api_;
  OwnerFile owners_;
  Result<DeviceSnapshot> read() const;
  // Records `s`, read by the call numbered `seq` (in start order): a read that started earlier than the
  // recorded one does not replace it. Returns whether `s` differs from what was recorded before.
  bool record(const DeviceSnapshot& s, std::uint64_t seq) const;

  mutable std::atomic<std::uint64_t> reads_{0};
  mutable std::mutex last_mu_;
  mutable std::optional<DeviceSnapshot> last_;
  mutable std::uint64_t last_seq_ = 0;

  mutable std::mutex links_mu_;
  mutable std::vector<std::pair<int, int>> links_key_;  // (card, device) in phy order, then (phy, family)
  mutable std::vector<Link> links_;
};

}  // namespace ascend::npu::dcmi_backend
