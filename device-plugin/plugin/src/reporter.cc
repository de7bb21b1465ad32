#include "ascend/plugin/reporter.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "ascend/common/guarded.h"
#include "ascend/common/loop_clock.h"
#include "ascend/plugin/plugin.h"

namespace ascend::plugin {

namespace {
constexpr std::chrono::milliseconds kStopCheck{100};
}  // namespace

Reporter::Reporter(const Plugin& plugin, SchedulerApi& api, ReporterOptions opts)
    : plugin_(plugin),
      api_(api),
      opts_(opts),
      clock_(opts.clock != nullptr ? *opts.clock : real_loop_clock()),
      thread_([this] { loop(); }) {}

Reporter::~Reporter() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  plugin_.wake_all();  // the loop may be waiting for a change
  thread_.join();
}

Reporter::Stats Reporter::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

bool Reporter::stopping() const {
  std::lock_guard lock(mu_);
  return stop_;
}

bool Reporter::sleep(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return clock_.wait_for(lock, cv_, d, [this] { return stop_; });
}

void Reporter::loop() {
  std::optional<InventoryReport> accepted;  // what the scheduler last took, and when
  LoopClock::Steady::time_point accepted_at{};
  auto backoff = opts_.backoff_first;
  bool away = false;         // the last attempt found the scheduler away (said once per outage)
  std::string last_refusal;  // said once per distinct message
  std::string failed;        // the last exception's text (guarded.h)
  // One pass: true when stopping.
  auto pass = [&]() -> bool {
    const std::uint64_t seen = plugin_.version();
    InventoryReport now = plugin_.inventory();
    const auto since = clock_.now() - accepted_at;
    if (accepted && *accepted == now && since < opts_.resend_every) {
      // Up to date: wait for a change (the version moves) or the periodic re-send. The short wait bounds how
      // long a stop that raced with this loop (its wake_all came before the wait began) goes unnoticed, and
      // how late the re-send follows a test clock's advance.
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(opts_.resend_every - since);
      plugin_.wait_change(seen, std::clamp(left, std::chrono::milliseconds(1), kStopCheck));
      return false;
    }
    // The re-send period counts from when this report left, read before it goes: the scheduler may act on it
    // (and a test clock move) before the answer is back here.
    const auto sent_at = clock_.now();
    Status st = api_.put_inventory(now);
    {
      std::lock_guard lock(mu_);
      ++stats_.attempts;
      if (st) ++stats_.accepted;
    }
    if (st) {
      if (away || !accepted)
        spdlog::info("the scheduler has this node's inventory ({} chips)", now.chips.size());
      accepted = std::move(now);
      accepted_at = sent_at;
      backoff = opts_.backoff_first;
      away = false;
      last_refusal.clear();
      return false;
    }
    if (scheduler_unavailable(st.error())) {
      if (!away) spdlog::warn("{}; retrying", st.error().message());
      away = true;
      if (sleep(backoff)) return true;
      backoff = std::min(backoff * 2, opts_.backoff_max);
      return false;
    }
    // A refusal from a scheduler that is up (unknown node, bad token): trying again soon would not help.
    if (st.error().message() != last_refusal) {
      spdlog::warn("{}; trying again in {:g} s", st.error().message(),
                   std::chrono::duration<double>(opts_.resend_every).count());
      last_refusal = st.error().message();
    }
    away = false;
    backoff = opts_.backoff_first;
    accepted.reset();
    if (sleep(opts_.resend_every)) return true;
    return false;
  };
  while (!stopping()) {
    bool stop = false;
    // A pass that throws (a bug, out of memory) is logged and retried after the backoff, as an absent
    // scheduler would be.
    if (run_guarded(
            "inventory reporter", [&] { stop = pass(); }, "retrying", &failed)) {
      if (stop) break;
      continue;
    }
    accepted.reset();
    if (sleep(backoff)) break;
    backoff = std::min(backoff * 2, opts_.backoff_max);
  }
}

}  // namespace ascend::plugin
