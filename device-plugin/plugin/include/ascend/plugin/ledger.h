// Dynamic vNPU accounting: what this plugin has promised in --vnpu=dynamic mode, so that the AICores of a
// chip are never promised twice and a chip is never handed out both whole and as cores. The whole-chip
// claims are also what the scheduler is told is in use (with --scheduler-url, in any vNPU mode).
//
// The kubelet only tells the plugin what it hands out (Allocate), never what it takes back. A promise ends
// when (1) the kubelet hands one of its ids out again (it only does so once the pod that held it is gone),
// or (2) the kubelet's pod-resources API no longer lists any of its ids and the promise is older than a
// grace period (the kubelet records an allocation only after Allocate returns).
//
// A plain value, not thread-safe: the plugin guards it with its own mutex.
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/npu/seam.h"
#include "ascend/npu/vnpu_load.h"

namespace ascend::plugin {

using Clock = std::chrono::steady_clock;

struct CorePromise {
  int phy = 0;                      // the chip the vNPU will be made on
  std::string template_name;        // ASCEND_VNPU_SPECS
  std::vector<std::string> tokens;  // the huawei.com/npu-core ids the kubelet handed out for it
  Clock::time_point made{};
};

class Ledger {
 public:
  // The token ids of the npu-core resource: "npu-core-<phy>-<k>".
  static std::string token_id(int phy, int core);
  // The chip of a token id, or -1 when `token` is not one.
  static int token_phy(const std::string& token);

  const std::vector<CorePromise>& promises() const { return promises_; }
  bool whole(int phy) const { return whole_.count(phy) != 0; }
  bool has_promises(int phy) const;
  // Tokens that some live promise answered (the kubelet holds them).
  bool held(const std::string& token) const;
  int held_on(int phy) const;

  // What `phy` carries: per resource, the larger of what live promises take and what existing vNPUs take
  // (a promise becomes a vNPU when its container starts). A template fits next to it when
  // npu::vnpu_shortfall(load(...), template, host.vnpu_capacity) is empty: the rule the driver applies.
  npu::VnpuLoad load(const npu::DeviceSnapshot& host, int phy) const;
  // AICores of `phy` in use by promises or vNPUs (the same max rule).
  int cores_used(const npu::DeviceSnapshot& host, int phy) const;

  // The kubelet handed these out again: the promises or whole-chip claims holding them are over.
  void release_tokens(const std::vector<std::string>& tokens);
  void release_whole(const std::vector<int>& phys);

  void add_promise(CorePromise p) { promises_.push_back(std::move(p)); }
  // Claims whole chips (phy id, device id). Fails (EBUSY) naming the chips whose cores are promised;
  // nothing is claimed then.
  Status claim_whole(const std::vector<std::pair<int, std::string>>& chips, Clock::time_point now);

  // Ends promises and claims that the kubelet no longer lists (`in_use`: resource name -> device ids) and
  // that are older than `grace`. Returns how many ended.
  int reconcile(const std::map<std::string, std::set<std::string>>& in_use, const std::string& chip_resource,
                const std::string& core_resource, Clock::time_point now, Clock::duration grace);

 private:
  std::vector<CorePromise> promises_;
  struct WholeClaim {
    std::string id;
    Clock::time_point made{};
  };
  std::map<int, WholeClaim> whole_;  // by phy id
};

}  // namespace ascend::plugin
