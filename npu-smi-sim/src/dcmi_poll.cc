// The DCMI backend's change detection (dcmi_device_query.h): DCMI has no notification, so a subscription
// polls the snapshot at a fixed rate and reports when it differs from the last one returned.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "ascend/common/guarded.h"
#include "dcmi_device_query.h"

namespace ascend::npu::dcmi_backend {
namespace {

// The snapshot without what work moves at every poll on a real host (utilization, memory in use,
// temperature, power): a subscriber hears of health, vNPU, mode and device changes, not of a degree more
// (telemetry() is there for those values).
DeviceSnapshot without_telemetry(DeviceSnapshot s) {
  for (Chip& c : s.chips) {
    c.aicore_usage_pct = c.aicpu_usage_pct = 0;
    c.hbm_used_mb = c.mem_used_mb = c.hugepages_used = 0;
    c.temp_c = 0;
    c.power_w = 0;
  }
  return s;
}

// Polls the snapshot every interval and reports when it changed.
class PollSubscription final : public Subscription {
 public:
  PollSubscription(const DcmiDeviceQuery& dq, DeviceQuery::ChangeCallback cb, std::chrono::milliseconds every)
      : thread_([this, &dq, cb = std::move(cb), every]() {
          // Fixed rate, not fixed delay: a poll starts every `every` however long the last one took, so a
          // change is seen within one interval plus one poll (two polls when it lands mid-poll).
          std::unique_lock<std::mutex> lock(mu_);
          auto next = std::chrono::steady_clock::now() + every;
          while (!cv_.wait_until(lock, next, [this] { return stop_; })) {
            const auto now = std::chrono::steady_clock::now();
            next = next + every > now ? next + every : now + every;  // an overrun skips, never piles up
            lock.unlock();
            // A poll that throws (the subscriber's callback, a bug, out of memory) is logged; the next one
            // runs on time.
            run_guarded(
                "DCMI poll",
                [&] {
                  auto p = dq.poll();
                  if (p && p->second) cb(p->first);
                },
                "the next poll runs on time", &failed_);
            lock.lock();
          }
        }) {}
  ~PollSubscription() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string failed_;  // the last exception's text (guarded.h); the thread's own
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace

Result<std::pair<DeviceSnapshot, bool>> DcmiDeviceQuery::poll() const {
  const std::uint64_t seq = ++reads_;
  ASCEND_ASSIGN(DeviceSnapshot s, read(), "");
  const bool changed = record(s, seq);
  return std::pair(std::move(s), changed);
}

bool DcmiDeviceQuery::record(const DeviceSnapshot& s, std::uint64_t seq) const {
  std::lock_guard<std::mutex> lock(last_mu_);
  const bool changed = !last_ || !(without_telemetry(*last_) == without_telemetry(s));
  if (seq > last_seq_) {
    last_ = s;
    last_seq_ = seq;
  }
  return changed;
}

Result<std::unique_ptr<Subscription>> DcmiDeviceQuery::subscribe(ChangeCallback on_change) const {
  (void)snapshot();  // the state the first poll is compared with
  return std::unique_ptr<Subscription>(
      std::make_unique<PollSubscription>(*this, std::move(on_change), opts_.poll_interval));
}

}  // namespace ascend::npu::dcmi_backend
