#include "ascend/plugin/plugin.h"

#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <utility>

#include "ascend/common/fs.h"
#include "ascend/common/guarded.h"
#include "ascend/common/loop_clock.h"
#include "ascend/plugin/metrics.h"
#include "ascend/plugin/preferred.h"
#include "ascend/plugin/scheduler_plan.h"

#include <sys/stat.h>
#include <unistd.h>

namespace ascend::plugin {

Result<std::unique_ptr<Plugin>> Plugin::create(npu::DeviceQuery& query, Config cfg, Metrics* metrics,
                                               SchedulerApi* scheduler, LoopClock* clock) {
  ASCEND_CHECK(validate(cfg), "");
  FaultTable table = FaultTable::builtin();
  if (!cfg.fault_codes.empty()) {
    ASCEND_ASSIGN(table, FaultTable::load_over(table, cfg.fault_codes), "--fault-codes");
    spdlog::info("fault-code table {} read over the built-in one ({} codes)", cfg.fault_codes, table.size());
  }
  ASCEND_ASSIGN(npu::DeviceSnapshot host, query.snapshot(), "read the devices");
  ASCEND_ASSIGN(auto resources, plan_resources(host, cfg), "");
  FaultGrades grades(std::move(table));
  log_changes(grades.observe(host, Clock::now()));
  if (metrics != nullptr) metrics->update_chips(grades.view());
  std::unique_ptr<Plugin> plugin(
      new Plugin(query, std::move(cfg), metrics, scheduler, std::move(grades), std::move(resources)));
  plugin->clock_ = clock != nullptr ? clock : &real_loop_clock();
  return plugin;
}

Plugin::Plugin(npu::DeviceQuery& query, Config cfg, Metrics* metrics, SchedulerApi* scheduler,
               FaultGrades grades, std::vector<ResourceSpec> resources)
    : query_(query),
      cfg_(std::move(cfg)),
      metrics_(metrics),
      scheduler_(scheduler),
      resources_(std::move(resources)),
      host_(grades.view()),
      grades_(std::move(grades)) {}

namespace {

bool same_load(const npu::DeviceSnapshot& a, const npu::DeviceSnapshot& b) {
  return a == b;
}

// What the plugin shows while the driver is away: the last host with every chip failed, so that every
// device of every resource, the inventory and the metrics say Unhealthy.
npu::DeviceSnapshot failed_view(npu::DeviceSnapshot host) {
  for (auto& c : host.chips) c.faults = {{0, npu::Health::kCritical}};
  return host;
}

}  // namespace

Plugin::~Plugin() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (health_.joinable()) health_.join();
  if (ranktable_refresh_.joinable()) ranktable_refresh_.join();
  subscription_.reset();
}

Status Plugin::watch() {
  // A change reported by the watcher is applied through check_driver, from a snapshot taken under its lock:
  // the watcher's and the periodic check's snapshots are then applied in the order they were read, so that
  // an older one (read before a fault) never overwrites a newer one.
  ASCEND_ASSIGN(auto sub,
                query_.subscribe([this](const npu::DeviceSnapshot& /*changed*/) { check_driver(); }),
                "watch device health");
  std::lock_guard lock(mu_);
  subscription_ = std::move(sub);
  if (!health_.joinable()) {
    health_ = std::thread([this] {
      std::string failed;  // the last exception's text (guarded.h)
      std::unique_lock lock(mu_);
      while (!stopping_) {
        if (clock_->wait_for(lock, cv_, cfg_.health_interval, [this] { return stopping_; })) break;
        lock.unlock();
        // A check that throws is logged; the next one runs on time.
        run_guarded(
            "driver check", [this] { check_driver(); }, "the next check runs on time", &failed);
        lock.lock();
      }
    });
  }
  if (scheduler_ != nullptr && cfg_.ranktable_refresh.count() > 0 && !ranktable_refresh_.joinable())
    ranktable_refresh_ = std::thread([this] { refresh_loop(); });
  return {};
}

void Plugin::check_driver() {
  std::lock_guard serial(refresh_mu_);
  auto s = query_.snapshot();
  if (!s) {
    mark_lost(s.error().message());
    return;
  }
  bool replace = false;
  {
    std::lock_guard lock(mu_);
    replace = !lost_.empty() || !same_load(*s, grades_.raw());
  }
  if (replace) on_host_change(*s);
}

std::string Plugin::driver_lost() const {
  std::lock_guard lock(mu_);
  return lost_;
}

void Plugin::mark_lost(const std::string& why) {
  std::size_t devices = 0;
  npu::DeviceSnapshot view;
  {
    std::lock_guard lock(mu_);
    if (!lost_.empty()) return;
    lost_ = why;
    host_ = failed_view(std::move(host_));
    view = host_;
    for (const auto& r : resources_) devices += device_table(host_, r, ledger_).size();
    ++version_;
  }
  cv_.notify_all();
  if (metrics_ != nullptr) metrics_->update_chips(view);
  spdlog::error("NPU driver unavailable ({}): all {} devices are Unhealthy until it answers again", why,
                devices);
}

Plugin::Listing Plugin::list(const ResourceSpec& res) const {
  std::lock_guard lock(mu_);
  Listing out;
  out.version = version_;
  for (auto& e : device_table(host_, res, ledger_)) {
    if (e.withheld.empty()) out.devices.push_back(std::move(e));
  }
  return out;
}

std::uint64_t Plugin::version() const {
  std::lock_guard lock(mu_);
  return version_;
}

void Plugin::wait_change(std::uint64_t seen, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  const std::uint64_t wakeups = wakeups_;
  cv_.wait_for(lock, timeout, [&] { return version_ != seen || wakeups_ != wakeups; });
}

void Plugin::wake_all() const {
  {
    std::lock_guard lock(mu_);
    ++wakeups_;
  }
  cv_.notify_all();
}

Result<std::vector<std::vector<std::string>>> Plugin::preferred(
    const ResourceSpec& res, const std::vector<PreferredRequest>& requests) const {
  // Asked before taking the mutex: the scheduler may take up to its timeout to answer.
  std::vector<Reservation> reservations;
  if (scheduler_ != nullptr && res.kind == DeviceKind::kChip) {
    auto r = scheduler_->reservations();
    if (r) {
      reservations = std::move(r).value();
    } else {
      spdlog::warn("{}; preferring the node-level choice", r.error().message());
    }
  }
  std::lock_guard lock(mu_);
  std::vector<std::vector<std::string>> out;
  std::set<std::size_t> taken;  // one reservation answers one container
  for (const auto& r : requests) {
    if (auto i = pick_reservation(reservations, res, r.available, r.must_include, r.size, taken)) {
      taken.insert(*i);
      const Reservation& chosen = reservations[*i];
      spdlog::info("{}: preferring chips {} reserved for pod {}/{}", res.name, fmt::join(chosen.chips, ","),
                   chosen.pod_namespace, chosen.pod);
      out.push_back(chip_ids(res, chosen.chips));
      continue;
    }
    ASCEND_ASSIGN(auto ids, preferred_allocation(host_, res, ledger_, r.available, r.must_include, r.size),
                  "");
    out.push_back(std::move(ids));
  }
  auto& seen = preferred_[res.name];
  for (auto ids : out) {
    std::sort(ids.begin(), ids.end());
    seen.push_back(std::move(ids));
  }
  constexpr std::size_t kRemembered = 64;
  if (seen.size() > kRemembered) seen.erase(seen.begin(), seen.end() - kRemembered);
  return out;
}

void Plugin::note_unpreferred(const ResourceSpec& res,
                              const std::vector<std::vector<std::string>>& requests) const {
  std::lock_guard lock(mu_);
  auto it = preferred_.find(res.name);
  if (it == preferred_.end()) return;
  for (auto ids : requests) {
    std::sort(ids.begin(), ids.end());
    const std::vector<std::string>* same_size = nullptr;
    bool preferred = false;
    for (const auto& p : it->second) {
      if (p.size() != ids.size()) continue;
      same_size = &p;
      preferred = preferred || p == ids;
    }
    // The kubelet may choose other ids (its own choice, or a preferred answer it could not use); the answer
    // follows the ids given. Only a size we were asked about is worth a line.
    if (same_size != nullptr && !preferred) {
      spdlog::info(
          "{}: the kubelet allocates {}, not a set this plugin preferred (last: {}); answering for {}",
          res.name, fmt::join(ids, ","), fmt::join(*same_size, ","), fmt::join(ids, ","));
    }
  }
}

Result<std::vector<ContainerAllocation>> Plugin::allocate(
    const ResourceSpec& res, const std::vector<std::vector<std::string>>& requests) {
  note_unpreferred(res, requests);
  std::unique_lock lock(mu_);
  // No answer from a driver that is away: its device nodes may be gone or belong to another load.
  if (!lost_.empty())
    return Error(EBUSY, "allocate " + res.name + ": the NPU driver is unavailable: " + lost_);
  auto out = plugin::allocate(host_, query_, cfg_, res, ledger_, requests, Clock::now());
  // Tracked claims change what the other resource advertises (dynamic vNPUs) and what the scheduler is told.
  const bool changed = out.ok() && tracks_whole_chips(cfg_);
  std::vector<std::vector<int>> phys;  // per container: the chips the scheduler hears about
  if (out.ok() && scheduler_ != nullptr && res.kind == DeviceKind::kChip) {
    const auto table = device_table(host_, res, ledger_);
    for (const auto& ids : requests) phys.push_back(chip_phys(table, ids));
    // The kubelet hands a chip out again only once the pod that held it is gone: so is that pod's rank table
    // (pod-resources may not have said so yet, or may not be there at all).
    const std::set<int> again = [&] {
      std::set<int> all;
      for (const auto& p : phys) all.insert(p.begin(), p.end());
      return all;
    }();
    remove_ranktables_locked([&](const std::set<int>& chips) {
      return std::any_of(chips.begin(), chips.end(), [&](int p) { return again.count(p) != 0; });
    });
  }
  // With a scheduler to ask, the claim is announced only once the call succeeds: a refused Allocate must not
  // show the scheduler its chips in use for a moment.
  if (changed && phys.empty()) ++version_;
  lock.unlock();
  if (changed && phys.empty()) cv_.notify_all();
  if (!out || phys.empty()) return out;
  if (auto st = take_reservations(phys, *out); !st) {
    release_chips(phys);  // the kubelet frees the devices of a failed Allocate
    spdlog::warn("allocate {}: {}", res.name, st.error().message());
    return st.error().context("allocate " + res.name);
  }
  if (changed) {
    {
      std::lock_guard relock(mu_);
      ++version_;
    }
    cv_.notify_all();
  }
  return out;
}

Status Plugin::take_reservations(const std::vector<std::vector<int>>& phys,
                                 std::vector<ContainerAllocation>& out) {
  std::vector<std::vector<int>> taken;  // reservations this call took: given back if the call fails
  auto st = take_each(phys, out, taken);
  if (!st) {
    for (const auto& chips : taken) {
      if (auto r = scheduler_->allocation_returned(chips); !r) {
        spdlog::warn("chips {}: could not give the reservation back: {}", fmt::join(chips, ","),
                     r.error().message());
      }
    }
  }
  return st;
}

Status Plugin::take_each(const std::vector<std::vector<int>>& phys, std::vector<ContainerAllocation>& out,
                         std::vector<std::vector<int>>& taken) {
  for (std::size_t i = 0; i < phys.size(); ++i) {
    auto grant = scheduler_->allocation_taken(phys[i]);
    if (!grant) {
      const Error& e = grant.error();
      if (e.code() == EBUSY) return e;  // 409: the scheduler reserved other chips of this size here
      if (e.code() == ENOENT) {
        spdlog::info("chips {}: no reservation of this size on this node", fmt::join(phys[i], ","));
      } else {
        spdlog::warn("{}; answering without the scheduler", e.message());
      }
      continue;
    }
    taken.push_back(phys[i]);
    std::optional<RanktableHostPaths> paths;
    if (!grant->ranktable.empty()) {
      ASCEND_ASSIGN(paths, ranktable_host_paths(cfg_.ranktable_dir, *grant), "");
    }
    // Checked before the file is written: a grant the container cannot use leaves nothing behind.
    ASCEND_ASSIGN(GrantedAllocation granted, with_grant(out[i], *grant, paths ? paths->folder : ""), "");
    if (!granted.dropped.empty()) {
      spdlog::warn(
          "chips {}: dropped {} env entr{} of the scheduler's answer for pod {}/{} (not launch env: {}): {}",
          fmt::join(phys[i], ","), granted.dropped.size(), granted.dropped.size() == 1 ? "y" : "ies",
          grant->pod_namespace, grant->pod, fmt::join(kLaunchEnv, ","), fmt::join(granted.dropped, ","));
    }
    if (paths) ASCEND_CHECK(write_ranktable(*paths, *grant, phys[i]), "");
    out[i] = std::move(granted.allocation);
    spdlog::info("chips {} go to pod {}/{}{}{}", fmt::join(phys[i], ","), grant->pod_namespace, grant->pod,
                 grant->job.empty() ? "" : " of job ", grant->job);
  }
  return {};
}

namespace {

// Gives `path` the rank tables' group, when one is configured.
Status give_group(const std::string& path, int group) {
  if (group < 0 || ::chown(path.c_str(), static_cast<uid_t>(-1), static_cast<gid_t>(group)) == 0) return {};
  return Error::from_errno(errno, fmt::format("give {} group {}", path, group));
}

// Removes a pod's rank-table folder and what it holds (the file, a temporary file a crash left). Nothing in
// it is followed: a symbolic link there is removed, not its target.
Status remove_folder(const std::string& folder) {
  std::error_code ec;
  std::filesystem::remove_all(folder, ec);
  if (ec) return Error(ec.value(), fmt::format("remove {}: {}", folder, ec.message()));
  return {};
}

}  // namespace

Status Plugin::write_ranktable(const RanktableHostPaths& paths, const Grant& grant,
                               const std::vector<int>& phys) {
  // Under the mutex: a rank table freed by reconcile() at the same moment must not remove this new folder.
  std::lock_guard lock(mu_);
  ASCEND_CHECK(make_dirs(cfg_.ranktable_dir, 0755), "create the rank-table folder");
  // What an earlier pod of that name left goes first: its folder (atomic_replace would keep an existing
  // file's mode and owner, and this one must be kRanktableMode), and the file earlier versions of the plugin
  // wrote in the folder's place (EISDIR: that name is another pod's folder, "<ns>_<pod>.json" for pod
  // "<pod>.json").
  ASCEND_CHECK(remove_folder(paths.folder), "remove the old rank table");
  if (::unlink(paths.legacy_file.c_str()) != 0 && errno != ENOENT && errno != EISDIR)
    return Error::from_errno(errno, "remove the old rank table " + paths.legacy_file);
  if (::mkdir(paths.folder.c_str(), kRanktableFolderMode) != 0)
    return Error::from_errno(errno, "create the rank-table folder " + paths.folder);
  // Known from here on, so that a failure below still has the folder removed with its chips.
  auto& entry = ranktables_[paths.folder];
  entry.file = paths.file;
  entry.chips.insert(phys.begin(), phys.end());
  entry.ns = grant.pod_namespace;
  entry.job = grant.job;
  entry.content = grant.ranktable;
  entry.written = ++ranktable_writes_;
  entry.failed.clear();
  if (::chmod(paths.folder.c_str(), kRanktableFolderMode) != 0)  // whatever the umask
    return Error::from_errno(errno, "chmod " + paths.folder);
  ASCEND_CHECK(give_group(paths.folder, cfg_.ranktable_group), "the rank-table folder");
  ASCEND_CHECK(atomic_replace(paths.file, grant.ranktable, kRanktableMode), "write the rank table");
  ASCEND_CHECK(give_group(paths.file, cfg_.ranktable_group), "the rank table");
  return {};
}

int Plugin::refresh_ranktables() {
  if (scheduler_ == nullptr) return 0;
  std::lock_guard serial(ranktable_refresh_mu_);
  std::map<std::string, std::pair<std::string, std::string>> jobs;  // "ns/job" -> ns, job
  std::uint64_t seen = 0;
  {
    std::lock_guard lock(mu_);
    // A copy Allocate writes after this point holds a grant at least as new as the answers below.
    seen = ranktable_writes_;
    for (const auto& [folder, t] : ranktables_) {
      if (!t.job.empty()) jobs.try_emplace(fmt::format("{}/{}", t.ns, t.job), t.ns, t.job);
    }
  }
  int rewritten = 0;
  for (const auto& [key, names] : jobs) {
    const auto& [ns, job] = names;
    auto table = scheduler_->job_ranktable(ns, job);  // without mu_: the scheduler may be slow
    if (!table) {
      const std::string& why = table.error().message();
      std::string& last = refresh_errors_[key];
      if (why != last) {
        if (table.error().code() == ENOENT) {
          spdlog::info("job {}: the scheduler no longer has it ({}); its rank tables here stay as they are",
                       key, why);
        } else {
          spdlog::warn("job {}: cannot refresh its rank tables: {}; trying again every {} ms", key, why,
                       cfg_.ranktable_refresh.count());
        }
        last = why;
      }
      continue;
    }
    if (refresh_errors_.erase(key) != 0)
      spdlog::info("job {}: the scheduler answers its rank table again", key);
    rewritten += rewrite_job_ranktables(ns, job, *table, seen);
  }
  std::erase_if(refresh_errors_, [&](const auto& e) { return jobs.count(e.first) == 0; });
  return rewritten;
}

int Plugin::rewrite_job_ranktables(const std::string& ns, const std::string& job, const std::string& content,
                                   std::uint64_t seen) {
  std::vector<std::string> done;
  {
    std::lock_guard lock(mu_);  // a folder being removed at the same moment is not written into
    for (auto& [folder, t] : ranktables_) {
      if (t.ns != ns || t.job != job || t.written > seen || t.content == content) continue;
      // atomic_replace keeps the file's mode and owner (kRanktableMode, --ranktable-group); the group is
      // given again in case the file was gone and is made anew.
      Status st = atomic_replace(t.file, content, kRanktableMode);
      if (st) st = give_group(t.file, cfg_.ranktable_group);
      if (!st) {
        if (st.error().message() != t.failed) {
          spdlog::warn("job {}/{}: cannot rewrite the rank table {}: {}", ns, job, t.file,
                       st.error().message());
          t.failed = st.error().message();
        }
        continue;
      }
      t.content = content;
      t.failed.clear();
      done.push_back(folder);
    }
  }
  if (!done.empty()) {
    spdlog::info("job {}/{}: the scheduler's rank table changed; rewrote {}", ns, job, fmt::join(done, ", "));
  }
  return static_cast<int>(done.size());
}

void Plugin::refresh_loop() {
  std::string failed;  // the last exception's text, logged once
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (clock_->wait_for(lock, cv_, cfg_.ranktable_refresh, [this] { return stopping_; })) break;
    lock.unlock();
    // Nothing may end the refresh for good: a pass that throws (out of memory, a bug) is logged and the next
    // one runs on time.
    run_guarded(
        "rank-table refresh", [this] { refresh_ranktables(); }, "the next pass runs on time", &failed);
    lock.lock();
  }
}

void Plugin::remove_ranktables_locked(const std::function<bool(const std::set<int>&)>& freed) {
  for (auto it = ranktables_.begin(); it != ranktables_.end();) {
    if (!freed(it->second.chips)) {
      ++it;
      continue;
    }
    if (auto st = remove_folder(it->first); st) {
      spdlog::info("removed rank table {}: the chips it was written for are free", it->first);
    } else {
      spdlog::warn("cannot remove rank table {}", st.error().message());
    }
    it = ranktables_.erase(it);
  }
}

void Plugin::remove_unclaimed_ranktables_locked() {
  remove_ranktables_locked([this](const std::set<int>& chips) {
    return std::none_of(chips.begin(), chips.end(), [this](int p) { return ledger_.whole(p); });
  });
}

void Plugin::release_chips(const std::vector<std::vector<int>>& phys) {
  {
    std::lock_guard lock(mu_);
    for (const auto& p : phys) ledger_.release_whole(p);
    remove_unclaimed_ranktables_locked();
    ++version_;
  }
  cv_.notify_all();
}

InventoryReport Plugin::inventory() const {
  std::lock_guard lock(mu_);
  return inventory_report(host_, resources_.front(), ledger_);
}

void Plugin::on_host_change(const npu::DeviceSnapshot& host) {
  std::string was_lost;
  std::vector<LevelChange> changes;
  npu::DeviceSnapshot view;
  {
    std::lock_guard lock(mu_);
    changes = grades_.observe(host, Clock::now());
    was_lost.swap(lost_);
    apply_grades_locked(changes);
    view = host_;
  }
  log_changes(changes);
  if (!was_lost.empty()) {
    spdlog::info("NPU driver answers again ({} devices, /dev/davinci major {}): devices follow its health",
                 host.chips.size(), host.chip_nodes.empty() ? 0 : host.chip_nodes.front().major);
  }
  cv_.notify_all();
  if (metrics_ != nullptr) metrics_->update_chips(view);
  spdlog::debug("device state changed ({} chips, {} vNPUs)", host.chips.size(), host.vnpus.size());
}

int Plugin::reconcile(const std::map<std::string, std::set<std::string>>& in_use,
                      std::chrono::milliseconds grace) {
  int ended = 0;
  {
    std::lock_guard lock(mu_);
    if (!tracks_whole_chips(cfg_)) return 0;
    ended = ledger_.reconcile(in_use, resources_.front().name, kCoreResource, Clock::now(), grace);
    if (ended > 0) {
      remove_unclaimed_ranktables_locked();
      ++version_;
    }
  }
  if (ended > 0) {
    cv_.notify_all();
    spdlog::info("{} allocation(s) ended: the kubelet no longer lists them", ended);
  }
  return ended;
}

void Plugin::apply_grades_locked(std::vector<LevelChange> changes) {
  if (lost_.empty()) host_ = grades_.view();
  ++version_;
  for (auto& c : changes) level_changes_.push_back(std::move(c));
  if (level_changes_.size() > kKeptLevelChanges)
    level_changes_.erase(level_changes_.begin(),
                         level_changes_.end() - static_cast<std::ptrdiff_t>(kKeptLevelChanges));
}

void Plugin::log_changes(const std::vector<LevelChange>& changes) {
  for (const auto& c : changes) {
    const bool bad = makes_unhealthy(c.to) && !makes_unhealthy(c.from);
    spdlog::log(bad ? spdlog::level::warn : spdlog::level::info, "chip {}: fault level {} -> {}{}: {}",
                c.phy_id, to_string(c.from), to_string(c.to),
                makes_unhealthy(c.to) ? " (Unhealthy)" : " (usable)", c.why);
  }
}

void Plugin::isolate(int phy_id, const std::string& why) {
  std::vector<LevelChange> changes;
  {
    std::lock_guard lock(mu_);
    changes = grades_.isolate(phy_id, why);
    if (changes.empty()) return;
    apply_grades_locked(changes);
  }
  cv_.notify_all();
  log_changes(changes);
}

void Plugin::clear_isolation(int phy_id) {
  std::vector<LevelChange> changes;
  {
    std::lock_guard lock(mu_);
    changes = grades_.clear(phy_id);
    if (changes.empty()) return;
    apply_grades_locked(changes);
  }
  cv_.notify_all();
  log_changes(changes);
}

std::vector<ChipFaults> Plugin::chip_faults() const {
  std::lock_guard lock(mu_);
  return grades_.chips();
}

std::set<int> Plugin::isolated() const {
  std::lock_guard lock(mu_);
  return grades_.isolated();
}

std::vector<LevelChange> Plugin::take_level_changes() {
  std::lock_guard lock(mu_);
  return std::exchange(level_changes_, {});
}

npu::DeviceSnapshot Plugin::host() const {
  std::lock_guard lock(mu_);
  return host_;
}

Ledger Plugin::ledger() const {
  std::lock_guard lock(mu_);
  return ledger_;
}

}  // namespace ascend::plugin
