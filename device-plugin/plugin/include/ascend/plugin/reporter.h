// The inventory reporter: a background thread that keeps the scheduler's view of this node current. It
// sends the plugin's inventory (Plugin::inventory) at start, as soon as it changes (the plugin's version
// wakes it), and every `resend_every` anyway, so that a restarted scheduler learns the node again. While
// the scheduler is away (no connection, no answer, 5xx) it retries with a doubling backoff; a refusal (4xx)
// is logged once per distinct message and retried at the slow rate.
//
// Its waits (the backoff, the slow rate, the periodic re-send) are on ReporterOptions::clock: real time
// unless a test passes a clock it advances (ascend/common/loop_clock.h).
//
// RAII: the constructor starts the thread, the destructor stops and joins it (at most one request's
// timeout later). Thread-safe: stats() may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "ascend/plugin/scheduler_client.h"

namespace ascend {
class LoopClock;
}  // namespace ascend

namespace ascend::plugin {

class Plugin;

struct ReporterOptions {
  std::chrono::milliseconds resend_every{30000};
  std::chrono::milliseconds backoff_first{100};
  std::chrono::milliseconds backoff_max{10000};
  LoopClock* clock = nullptr;  // null: real time; else it must outlive the reporter
};

class Reporter {
 public:
  // `plugin` and `api` must outlive the reporter.
  Reporter(const Plugin& plugin, SchedulerApi& api, ReporterOptions opts);
  ~Reporter();
  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;

  struct Stats {
    int attempts = 0;
    int accepted = 0;
  };
  Stats stats() const;

 private:
  void loop();
  // Sleeps `d` unless stopped first; true when stopping.
  bool sleep(std::chrono::milliseconds d);
  bool stopping() const;

  const Plugin& plugin_;
  SchedulerApi& api_;
  const ReporterOptions opts_;
  LoopClock& clock_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  Stats stats_;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace ascend::plugin
