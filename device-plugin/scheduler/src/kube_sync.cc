#include "ascend/scheduler/kube_sync.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "ascend/common/guarded.h"
#include "ascend/deviceinfo/deviceinfo.h"
#include "ascend/scheduler/kube_records.h"

namespace ascend::scheduler {

using nlohmann::json;

namespace {

std::string meta_str(const json& obj, const char* key) {
  auto m = obj.find("metadata");
  if (m == obj.end() || !m->is_object()) return {};
  auto v = m->find(key);
  return v != m->end() && v->is_string() ? v->get<std::string>() : std::string();
}

// What the node and device informers keep: names only, and the data of MindCluster's device ConfigMaps.
json slim_named(json obj) {
  json out = {{"metadata",
               {{"name", meta_str(obj, "name")},
                {"namespace", meta_str(obj, "namespace")},
                {"resourceVersion", meta_str(obj, "resourceVersion")}}}};
  if (meta_str(obj, "name").starts_with(deviceinfo::kNamePrefix) && obj.contains("data")) {
    out["data"] = std::move(obj["data"]);
  }
  return out;
}

}  // namespace

struct KubeSync::Impl {
  std::shared_ptr<kube::Client> client;
  SchedulerAccess& access;
  KubeSyncOptions opts;
  std::unique_ptr<kube::Informer> pods, nodes, jobs, devices;
  std::unique_ptr<kube::Informer> claims;  // null when the API server serves no resource.k8s.io/v1

  // The claims informer's view (dra_claims.h): every ResourceClaim, and the ones that hold our chips by node.
  mutable std::mutex claims_mu;
  std::map<std::string, ClaimInfo> claim_cache;            // by "ns/name"
  std::map<std::string, std::set<std::string>> claims_on;  // node -> claims allocated chips there

  mutable std::mutex mu;                                // guards followed, by_job, stats
  std::map<std::string, ApiPod> followed;               // the pods the scheduler follows, by "ns/name"
  std::map<std::string, std::set<std::string>> by_job;  // "ns/job" -> its followed pods
  Stats stats;

  std::atomic<bool> ready{false};
  std::atomic<bool> stopping{false};
  std::thread syncer;

  std::mutex ev_mu;
  std::condition_variable ev_cv;
  std::deque<kube::Client::EventArgs> events;
  std::thread sender;

  Impl(std::shared_ptr<kube::Client> c, SchedulerAccess& a, KubeSyncOptions o)
      : client(std::move(c)), access(a), opts(std::move(o)) {}

  static Clock::time_point now() { return Clock::now(); }

  void count(std::uint64_t Stats::*field) {
    std::lock_guard l(mu);
    ++(stats.*field);
  }

  void remember(const ApiPod& p, bool gone) {
    std::lock_guard l(mu);
    const std::string key = p.info.key();
    auto old = followed.find(key);
    if (old != followed.end() && old->second.info.job) {
      by_job[p.info.ns + "/" + old->second.info.job->name].erase(key);
    }
    if (gone || !followed_pod(p)) {
      followed.erase(key);
      return;
    }
    followed[key] = p;
    if (p.info.job) by_job[p.info.ns + "/" + p.info.job->name].insert(key);
  }
  static bool followed_pod(const ApiPod& p) { return scheduler::followed(p); }

  void on_pod(kube::EventType type, const json& obj) {
    auto p = read_api_pod(obj);
    if (!p.ok()) {
      spdlog::debug("pod {}: {}", kube::key_of(obj), p.error().message());
      return;
    }
    bool gone = type == kube::EventType::kDeleted;
    if (!followed_pod(*p)) {
      remember(*p, gone);
      return;
    }
    count(&Stats::pods_observed);
    std::string job_key;
    std::string why;
    Observed o = Observed::kNothing;
    std::vector<Scheduler::Recovered> recovered;
    access.with([&](Scheduler& s) {
      // What the cache follows changes under the scheduler's lock, with the scheduler: a job's reconcile (on
      // another thread, also under it) never sees the pod gone from one and still held in the other.
      remember(*p, gone);
      job_key = s.job_of(p->info.ns, p->info.name);
      o = s.observe_pod(*p, gone, now(), &why);
      // A Binding (ours, or another replica's) comes back through this watch: jobs it made whole again.
      recovered = s.take_recovered();
    });
    after_observe(*p, o, job_key, why);
    for (const auto& r : recovered) tell_recovered(r);
  }

  // A job Running again after a chip fault (issue 23): the new placement's cost against the one it left.
  void tell_recovered(const Scheduler::Recovered& r) {
    const std::string note = fmt::format(
        "job {} is running again after restart {} ({} recovery, {:.3f} s after the fault): communication "
        "cost "
        "{:.4g} s, {:.4g} s before the fault",
        r.job, r.restarts, r.mode, r.seconds, r.cost_after, r.cost_before_fault);
    spdlog::info("{}/{}: {}", r.ns, r.job, note);
    pod_event(r.ns, r.pod, "", "Normal", "AscendRecovered", note);
  }

  void after_observe(const ApiPod& p, Observed o, const std::string& job_key, const std::string& why) {
    switch (o) {
      case Observed::kReleased:
        count(&Stats::released);
        spdlog::info("released {} ({})", p.info.key(), p.finished() ? "pod " + p.phase : "pod deleted");
        if (!job_key.empty()) sync_job(p.info.ns, job_key.substr(job_key.find('/') + 1));
        pod_event(p.info.ns, p.info.name, p.info.uid, "Normal", "AscendReleased",
                  "chips " + format_chips(p.chips) + " on " + p.node + " are free again (pod " +
                      (p.finished() ? p.phase : std::string("deleted")) + ")");
        break;
      case Observed::kAdopted:
        count(&Stats::adopted);
        spdlog::info("adopted {}: chips {} on {} (bound by another replica or before a restart)",
                     p.info.key(), format_chips(p.chips), p.node);
        break;
      case Observed::kConflict:
        count(&Stats::conflicts);
        spdlog::warn("{}", why);
        break;
      case Observed::kNothing:
        break;
    }
  }

  void on_job_configmap(kube::EventType type, const json& cm) {
    const std::string ns = meta_str(cm, "namespace");
    const std::string name = meta_str(cm, "name");
    if (!name.starts_with(kJobConfigMapPrefix)) return;
    const std::string job = name.substr(std::string(kJobConfigMapPrefix).size());
    if (type == kube::EventType::kDeleted) {
      bool held = false;
      access.with([&](Scheduler& s) { held = s.job_record(ns, job).has_value(); });
      if (held) {
        spdlog::warn("the ConfigMap of job {}/{} was deleted while the job holds chips: writing it again", ns,
                     job);
        sync_job(ns, job);
      }
      return;
    }
    auto rec = record_of(cm);
    if (!rec.ok()) {
      spdlog::warn("{}: ignored", rec.error().message());
      return;
    }
    Status st = ok_status();
    access.with([&](Scheduler& s) { st = s.observe_job(*rec, now()); });
    if (!st.ok()) {
      spdlog::warn("ConfigMap {}/{}: {}", ns, name, st.error().message());
      return;
    }
    reconcile_job(ns, job);
  }

  // The job's pods as the API server has them: bound ones adopted, gone ones released.
  void reconcile_job(const std::string& ns, const std::string& job) {
    const std::string job_key = ns + "/" + job;
    std::vector<ApiPod> mine;
    std::set<std::string> present;
    bool pods_synced = pods && pods->synced();
    std::vector<std::pair<ApiPod, Observed>> done;
    std::vector<ApiPod> absent;  // held, and not in the cache
    access.with([&](Scheduler& s) {
      {  // read under the scheduler's lock: on_pod changes both together
        std::lock_guard l(mu);
        for (const auto& key : by_job[job_key]) {
          mine.push_back(followed.at(key));
          present.insert(key);
        }
      }
      for (const ApiPod& p : mine) done.emplace_back(p, s.observe_pod(p, false, now()));
      if (!pods_synced) return;
      for (const auto& holder : s.holders(job_key)) {
        if (present.count(holder) != 0) continue;
        ApiPod gone;
        gone.info.ns = ns;
        gone.info.name = holder.substr(holder.find('/') + 1);
        if (auto h = s.held_by(ns, gone.info.name)) gone.info.uid = h->uid;
        absent.push_back(std::move(gone));
      }
    });
    // Not in the cache is not gone: the watch may not have brought a pod made and bound a moment ago. The API
    // server says; a pod it has (the same uid) stays, an answer other than "not found" leaves it to the next
    // reconcile.
    std::erase_if(absent, [&](const ApiPod& p) { return !confirmed_gone(p); });
    if (!absent.empty()) {
      access.with([&](Scheduler& s) {
        std::lock_guard l(mu);
        for (const ApiPod& p : absent) {
          if (followed.count(p.info.key()) != 0) continue;  // arrived meanwhile: on_pod has it
          // With the uid: a pod of this name made since keeps what it holds.
          done.emplace_back(p, s.observe_pod(p, true, now()));
        }
      });
    }
    bool changed = false;
    for (const auto& [p, o] : done) {
      if (o == Observed::kReleased || o == Observed::kAdopted) changed = true;
      if (o == Observed::kReleased) {
        count(&Stats::released);
        spdlog::info("released {}: the API server no longer has it", p.info.key());
      } else if (o == Observed::kAdopted) {
        count(&Stats::adopted);
      }
    }
    if (changed) sync_job(ns, job);
  }

  // Whether the API server no longer has the pod `p` names (or has another pod of that name).
  bool confirmed_gone(const ApiPod& p) {
    auto r = client->get(kube::path_of("v1", "pods", p.info.ns, p.info.name));
    if (!r.ok()) return r.error().code() == ENOENT;
    if (!r->is_object()) return false;  // not the shape of a Pod: no answer
    return !p.info.uid.empty() && meta_str(*r, "uid") != p.info.uid;
  }

  // A ResourceClaim came, changed or went: the chips our driver's claims hold on the nodes it touches.
  void on_claim(kube::EventType type, const json& obj) {
    auto c = read_claim(obj);
    if (!c.ok()) {
      spdlog::debug("ResourceClaim {}: {}", kube::key_of(obj), c.error().message());
      return;
    }
    const std::string key = c->key();
    std::map<std::string, std::vector<int>> held;  // node -> chips, for the nodes this claim touches
    {
      std::lock_guard l(claims_mu);
      auto it = claim_cache.find(key);
      if (it != claim_cache.end() && !it->second.node.empty()) {
        claims_on[it->second.node].erase(key);
        held[it->second.node];
      }
      if (type == kube::EventType::kDeleted) {
        claim_cache.erase(key);
      } else {
        if (c->allocated && !c->node.empty()) {
          claims_on[c->node].insert(key);
          held[c->node];
        }
        claim_cache[key] = std::move(*c);
      }
      for (auto& [node, chips] : held) {
        for (const auto& k : claims_on[node]) {
          const auto& phys = claim_cache.at(k).phys;
          chips.insert(chips.end(), phys.begin(), phys.end());
        }
        std::sort(chips.begin(), chips.end());
        chips.erase(std::unique(chips.begin(), chips.end()), chips.end());
        if (claims_on[node].empty()) claims_on.erase(node);
      }
    }
    if (held.empty()) return;
    access.with([&](Scheduler& s) {
      for (const auto& [node, chips] : held) {
        // A node outside the cluster file is not ours to place on (ENOENT).
        if (auto st = s.put_claimed(node, chips); !st.ok() && st.error().code() != ENOENT)
          spdlog::warn("ResourceClaims on node {}: {}", node, st.error().message());
      }
    });
  }

  // A claim of `ns` by name: the cache, else the API server.
  std::optional<ClaimInfo> claim(const std::string& ns, const std::string& name, bool fresh) {
    if (!fresh) {
      std::lock_guard l(claims_mu);
      auto it = claim_cache.find(ns + "/" + name);
      if (it != claim_cache.end()) return it->second;
    }
    auto r = client->get(kube::path_of("resource.k8s.io/v1", "resourceclaims", ns, name));
    if (!r.ok()) return std::nullopt;
    auto c = read_claim(*r);  // the API server's answer is read as any other: not trusted to be a claim
    if (!c.ok()) return std::nullopt;
    return std::move(*c);
  }

  void on_node(kube::EventType type, const json& node) {
    const std::string name = meta_str(node, "name");
    bool present = type != kube::EventType::kDeleted;
    access.with([&](Scheduler& s) { s.set_node_present(name, present); });
    if (!present) spdlog::warn("node {} was deleted from the API server: its chips are not offered", name);
  }

  // The fault codes each node's device ConfigMap named last: node -> (chip, code) -> level. Only the device
  // informer's thread reaches it.
  std::map<std::string, std::map<std::pair<int, std::string>, std::string>> known_faults;

  void on_device_configmap(kube::EventType type, const json& cm) {
    if (type == kube::EventType::kDeleted) return;
    if (!meta_str(cm, "name").starts_with(deviceinfo::kNamePrefix)) return;
    auto d = deviceinfo::from_configmap(cm);
    if (!d.ok()) {
      spdlog::warn("device ConfigMap {}: {}", meta_str(cm, "name"), d.error().message());
      return;
    }
    std::vector<int> sick = d->unhealthy;
    sick.insert(sick.end(), d->network_unhealthy.begin(), d->network_unhealthy.end());
    // A fault at RestartNPU or above stops the work on its chip even while the plugin still calls the chip
    // healthy (it is reset): the chip takes no new work while the fault lasts, and its job recovers.
    std::map<int, std::string> why_of;  // chip -> "SeparateNPU 80E18402"
    for (const auto& f : d->faults) {
      if (f.network) continue;
      why_of[f.phy_id] = fmt::format("{} {}", f.level, fmt::join(f.codes, ","));
      if (deviceinfo::stops_work(f.level)) sick.push_back(f.phy_id);
    }
    sick.insert(sick.end(), d->manually_separated.begin(), d->manually_separated.end());
    std::sort(sick.begin(), sick.end());
    sick.erase(std::unique(sick.begin(), sick.end()), sick.end());
    auto fresh = new_faults(*d);
    Status st = ok_status();
    std::vector<Scheduler::Recovery> todo;
    std::vector<std::pair<deviceinfo::ChipFault, std::optional<Scheduler::Holder>>> mild;
    access.with([&](Scheduler& s) {
      auto turned = s.put_health(d->node, d->healthy, sick, now(), d->manually_separated);
      if (!turned.ok()) {
        st = turned.error();
        return;
      }
      // A network-unhealthy chip takes no new work but does not stop a running job.
      std::erase_if(*turned, [&](int c) {
        return std::find(d->network_unhealthy.begin(), d->network_unhealthy.end(), c) !=
               d->network_unhealthy.end();
      });
      // Before the cache is synced a job's record may not be here yet: initial_sync recovers then.
      if (ready && !turned->empty()) {
        std::vector<std::string> whys;
        for (int c : *turned) whys.push_back(why_of.count(c) != 0 ? why_of[c] : "Unhealthy");
        std::sort(whys.begin(), whys.end());
        whys.erase(std::unique(whys.begin(), whys.end()), whys.end());
        todo = s.recover(d->node, *turned, now(), fmt::format("{}", fmt::join(whys, "; ")));
      }
      for (const auto& f : fresh) {
        if (!deviceinfo::stops_work(f.level) && std::find(sick.begin(), sick.end(), f.phy_id) == sick.end())
          mild.emplace_back(f, s.holder_of(d->node, f.phy_id));
      }
    });
    if (!st.ok()) spdlog::warn("device ConfigMap of {}: {}", d->node, st.error().message());
    for (const auto& r : todo) carry_out(d->node, r);
    // A milder fault under a job's pod: the job is told (its controller may restart its step), nobody is
    // evicted.
    for (const auto& [f, h] : mild) {
      const std::string what =
          fmt::format("fault {} ({}) on chip {} of {}", fmt::join(f.codes, ","), f.level, f.phy_id, d->node);
      spdlog::info("{}{}: the chip stays in service; nothing is evicted", what,
                   h ? " under pod " + h->ns + "/" + h->pod : "");
      if (h) {
        pod_event(h->ns, h->pod, "", "Normal", "AscendFault",
                  fmt::format("{} under this pod{}: the chip stays in service; nothing is evicted", what,
                              h->job.empty() ? "" : " of job " + h->job));
      }
    }
  }

  // The fault codes of `d` that its node's last ConfigMap did not name (each counted by level once).
  std::vector<deviceinfo::ChipFault> new_faults(const deviceinfo::NodeDevices& d) {
    std::map<std::pair<int, std::string>, std::string> now_known;
    std::vector<deviceinfo::ChipFault> fresh;
    auto& before = known_faults[d.node];
    for (const auto& f : d.faults) {
      deviceinfo::ChipFault n = f;
      n.codes.clear();
      for (const auto& code : f.codes) {
        now_known[{f.phy_id, code}] = f.level;
        if (before.count({f.phy_id, code}) == 0) n.codes.push_back(code);
      }
      if (!n.codes.empty()) fresh.push_back(std::move(n));
    }
    before = std::move(now_known);
    std::lock_guard l(mu);
    for (const auto& f : fresh) stats.faults_by_level[f.level] += f.codes.size();
    return fresh;
  }

  // A job's recovery from a chip fault (issue 23): Events, the evictions (the job's owner makes the pods
  // again; each comes back with its index, so its ranks, onto healthy chips), and the restart on its record.
  void carry_out(const std::string& node, const Scheduler::Recovery& r) {
    const std::string chips = format_chips(r.chips);
    std::string what = r.exhausted        ? "max-restarts spent: nothing is evicted, the job is Failed"
                       : r.mode == "none" ? "recovery none: nothing is evicted"
                                          : fmt::format("recovery {} (restart {}): evicting {} pod(s)",
                                                        r.mode, r.restarts, r.pods.size());
    spdlog::warn("chips {} of {} failed under pod {}/{} of job {}: {}", chips, node, r.ns, r.faulted_pod,
                 r.job, what);
    pod_event(r.ns, r.faulted_pod, "", "Warning", "AscendFault",
              fmt::format("chips {} of {} failed under this pod of job {}: {}", chips, node, r.job, what));
    if (r.failed_now) {
      count(&Stats::jobs_failed);
      pod_event(
          r.ns, r.faulted_pod, "", "Warning", "AscendJobFailed",
          fmt::format("job {} failed: chips {} of {} failed and its max-restarts are spent; its pods are "
                      "not evicted and not placed again",
                      r.job, chips, node));
    }
    if (!r.exhausted && r.mode != "none") count(&Stats::restarts);
    for (const auto& pod : r.pods) {
      auto st = client->evict(r.ns, pod);
      if (!st.ok() && st.error().code() != ENOENT) {
        spdlog::warn("evicting {}/{}: {}", r.ns, pod, st.error().message());
        continue;
      }
      count(&Stats::evictions);
      pod_event(r.ns, pod, "", "Normal", "AscendRescheduling",
                fmt::format("evicted: job {} comes back on healthy chips (chips {} of {} failed)", r.job,
                            chips, node));
    }
    sync_job(r.ns, r.job);
  }

  // Once every informer has listed: Nodes the API server does not have are marked, chips of pods it no
  // longer has are freed. Then the cache is ready.
  void initial_sync() {
    for (auto* inf : {pods.get(), nodes.get(), jobs.get(), devices.get(), claims.get()}) {
      while (inf != nullptr && !stopping && !inf->wait_synced(std::chrono::milliseconds(200))) {
      }
    }
    if (stopping) return;
    std::set<std::string> api_nodes;
    for (const auto& [key, n] : nodes->snapshot()) api_nodes.insert(key);
    std::set<std::string> present;
    std::vector<ApiPod> absent;
    access.with([&](Scheduler& s) {
      {  // under the scheduler's lock, as on_pod changes it
        std::lock_guard l(mu);
        for (const auto& [key, p] : followed) present.insert(key);
      }
      for (const auto& n : s.cluster().nodes) s.set_node_present(n.name, api_nodes.count(n.name) != 0);
      for (const auto& holder : s.holders()) {
        if (present.count(holder) != 0) continue;
        ApiPod gone;
        gone.info.ns = holder.substr(0, holder.find('/'));
        gone.info.name = holder.substr(holder.find('/') + 1);
        if (auto h = s.held_by(gone.info.ns, gone.info.name)) gone.info.uid = h->uid;
        absent.push_back(std::move(gone));
      }
    });
    std::erase_if(absent, [&](const ApiPod& p) { return !confirmed_gone(p); });  // as in reconcile_job
    std::set<std::string> touched_jobs;
    access.with([&](Scheduler& s) {
      std::lock_guard l(mu);
      for (const ApiPod& gone : absent) {
        if (followed.count(gone.info.key()) != 0) continue;
        std::string job = s.job_of(gone.info.ns, gone.info.name);
        if (s.observe_pod(gone, true, now()) == Observed::kReleased && !job.empty()) touched_jobs.insert(job);
      }
    });
    for (const auto& j : touched_jobs) sync_job(j.substr(0, j.find('/')), j.substr(j.find('/') + 1));
    // Chips that failed before or while this scheduler started, under pods that still hold them.
    std::vector<std::pair<std::string, Scheduler::Recovery>> owed;
    access.with([&](Scheduler& s) {
      for (const auto& [node, chips] : s.failed_chips()) {
        for (auto& r : s.recover(node, chips, now(), "failed while the scheduler was away"))
          owed.emplace_back(node, std::move(r));
      }
      ready = true;  // under the lock: a device ConfigMap after this recovers by itself
    });
    for (const auto& [node, r] : owed) carry_out(node, r);
    spdlog::info("the scheduler's cache is synced with the API server ({} pods followed, {} nodes)",
                 present.size(), api_nodes.size());
  }

  void sync_job(const std::string& ns, const std::string& job);
  void pod_event(const std::string& ns, const std::string& pod, const std::string& uid,
                 const std::string& type, const std::string& reason, const std::string& note);
  void send_events();
};

void KubeSync::Impl::sync_job(const std::string& ns, const std::string& job) {
  std::optional<json> rec;
  nlohmann::ordered_json rt;
  access.with([&](Scheduler& s) {
    rec = s.job_record(ns, job);
    if (rec) {
      if (auto r = s.ranktable_of(ns, job); r.ok()) rt = std::move(*r);
    }
  });
  const std::string path = kube::path_of("v1", "configmaps", ns, job_configmap_name(job));
  if (!rec) {
    auto st = client->del(path);
    if (!st.ok() && st.error().code() != ENOENT) {
      count(&Stats::write_errors);
      spdlog::warn("deleting the ConfigMap of job {}/{}: {}", ns, job, st.error().message());
    }
    return;
  }
  json cm = job_configmap(*rec, rt);
  const std::uint64_t version = (*rec)["version"].get<std::uint64_t>();
  auto change = [&](const json& current) -> std::optional<json> {
    if (record_version(current) >= version) return std::nullopt;  // as new or newer there: leave it
    return json{{"metadata", {{"labels", cm["metadata"]["labels"]}}}, {"data", cm["data"]}};
  };
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto r = client->update(path, change);
    if (r.ok()) {
      count(&Stats::jobs_written);
      return;
    }
    if (r.error().code() != ENOENT) {
      count(&Stats::write_errors);
      spdlog::warn("writing the ConfigMap of job {}/{}: {}", ns, job, r.error().message());
      return;
    }
    auto c = client->create(kube::path_of("v1", "configmaps", ns), cm);
    if (c.ok()) {
      count(&Stats::jobs_written);
      return;
    }
    if (c.error().code() != EEXIST) {
      count(&Stats::write_errors);
      spdlog::warn("creating the ConfigMap of job {}/{}: {}", ns, job, c.error().message());
      return;
    }
  }
}

void KubeSync::Impl::pod_event(const std::string& ns, const std::string& pod, const std::string& uid,
                               const std::string& type, const std::string& reason, const std::string& note) {
  kube::Client::EventArgs e;
  e.type = type;
  e.reason = reason;
  e.action = "Scheduling";
  e.note = note;
  e.ns = ns;
  e.name = pod;
  e.uid = uid;
  e.controller = kController;
  e.instance = opts.instance;
  {
    std::lock_guard l(ev_mu);
    if (events.size() >= opts.event_queue) {
      count(&Stats::events_dropped);
      return;
    }
    events.push_back(std::move(e));
  }
  ev_cv.notify_one();
}

void KubeSync::Impl::send_events() {
  std::string failed;  // the last exception's text (guarded.h)
  std::unique_lock l(ev_mu);
  while (true) {
    ev_cv.wait(l, [&] { return stopping || !events.empty(); });
    if (stopping) return;
    kube::Client::EventArgs e = std::move(events.front());
    events.pop_front();
    l.unlock();
    // An Event that throws is dropped (logged); the next one is sent.
    run_guarded(
        "event sender",
        [&] {
          auto st = client->event(e);
          if (st.ok()) {
            count(&Stats::events_sent);
          } else {
            spdlog::debug("event {} on {}/{}: {}", e.reason, e.ns, e.name, st.error().message());
          }
        },
        "dropping the Event", &failed);
    l.lock();
  }
}

KubeSync::KubeSync(std::shared_ptr<kube::Client> client, SchedulerAccess& access, KubeSyncOptions o)
    : impl_(std::make_unique<Impl>(std::move(client), access, std::move(o))) {
  Impl& m = *impl_;
  auto guarded = [](const char* what, auto fn) {
    return [what, fn](kube::EventType t, const json& obj) {
      try {
        fn(t, obj);
      } catch (const std::exception& e) {
        spdlog::error("{} {}: {}", what, kube::key_of(obj), e.what());
      }
    };
  };
  kube::InformerOptions po;
  po.path = "/api/v1/pods";
  po.name = "pods";
  po.transform = [](json p) { return slim_pod(std::move(p)); };
  m.pods = std::make_unique<kube::Informer>(
      m.client, po, guarded("pod", [&m](kube::EventType t, const json& o) { m.on_pod(t, o); }));
  kube::InformerOptions no;
  no.path = "/api/v1/nodes";
  no.name = "nodes";
  no.transform = [](json n) { return slim_named(std::move(n)); };
  m.nodes = std::make_unique<kube::Informer>(
      m.client, no, guarded("node", [&m](kube::EventType t, const json& o) { m.on_node(t, o); }));
  kube::InformerOptions jo;
  jo.path = "/api/v1/configmaps";
  jo.label_selector = kJobLabel;
  jo.name = "job configmaps";
  m.jobs = std::make_unique<kube::Informer>(
      m.client, jo,
      guarded("job ConfigMap", [&m](kube::EventType t, const json& o) { m.on_job_configmap(t, o); }));
  kube::InformerOptions dopt;
  dopt.path = std::string("/api/v1/namespaces/") + deviceinfo::kNamespace + "/configmaps";
  dopt.name = "device configmaps";
  dopt.transform = [](json c) { return slim_named(std::move(c)); };
  m.devices = std::make_unique<kube::Informer>(
      m.client, dopt,
      guarded("device ConfigMap", [&m](kube::EventType t, const json& o) { m.on_device_configmap(t, o); }));
  kube::InformerOptions copt;
  copt.path = "/apis/resource.k8s.io/v1/resourceclaims";
  copt.name = "resourceclaims";
  copt.transform = [](json c) { return slim_claim(std::move(c)); };
  m.claims = std::make_unique<kube::Informer>(
      m.client, copt, guarded("ResourceClaim", [&m](kube::EventType t, const json& o) { m.on_claim(t, o); }));
}

KubeSync::~KubeSync() {
  stop();
}

void KubeSync::start() {
  Impl& m = *impl_;
  // Jobs first: a pod of a job is adopted once its job's record is there (and again when it comes).
  m.jobs->start();
  m.nodes->start();
  m.devices->start();
  m.pods->start();
  // ResourceClaims only where the API server has them (DRA is GA in 1.34; an older or a DRA-less server
  // answers 404, and waiting for that informer would keep the cache from ever being ready).
  if (auto d = m.client->get("/apis/resource.k8s.io/v1"); !d.ok() && d.error().code() == ENOENT) {
    spdlog::info("the API server serves no resource.k8s.io/v1: job pods with ResourceClaims are not placed");
    m.claims.reset();
  } else {
    m.claims->start();
  }
  m.syncer = std::thread([&m] {
    // A sync that throws (a bug, out of memory) is logged and tried again: the cache is not ready until one
    // has run.
    std::string failed;
    while (!m.stopping &&
           !run_guarded(
               "initial sync with the API server", [&m] { m.initial_sync(); }, "trying again", &failed)) {
      std::unique_lock l(m.ev_mu);
      m.ev_cv.wait_for(l, std::chrono::seconds(1), [&m] { return m.stopping.load(); });
    }
  });
  m.sender = std::thread([&m] { m.send_events(); });
}

void KubeSync::stop() {
  Impl& m = *impl_;
  {
    std::lock_guard l(m.ev_mu);
    m.stopping = true;
  }
  m.ev_cv.notify_all();
  for (auto* inf : {m.pods.get(), m.nodes.get(), m.jobs.get(), m.devices.get(), m.claims.get()}) {
    if (inf != nullptr) inf->stop();
  }
  if (m.syncer.joinable()) m.syncer.join();
  if (m.sender.joinable()) m.sender.join();
}

bool KubeSync::synced() const {
  const Impl& m = *impl_;
  return m.ready && m.pods->synced() && m.nodes->synced() && m.jobs->synced() && m.devices->synced() &&
         (!m.claims || m.claims->synced());
}

void KubeSync::apply_claims(PodInfo& pod) {
  if (!chips_from_claims(pod) || !pod.job_error.empty()) return;
  if (!impl_->claims) {
    pod.job_error = "the API server serves no resource.k8s.io/v1, so the pod's ResourceClaims cannot be read";
    return;
  }
  {  // A claim is one set of chips: two pods of a job naming the same one cannot both hold it.
    std::lock_guard l(impl_->mu);
    const std::string key = pod.key();
    for (const auto& other : impl_->by_job[pod.ns + "/" + pod.job->name]) {
      if (other == key) continue;
      const auto& theirs = impl_->followed.at(other).info.claims;
      for (const auto& name : pod.claims) {
        if (std::find(theirs.begin(), theirs.end(), name) == theirs.end()) continue;
        pod.job_error = fmt::format(
            "ResourceClaim {}/{} is used by pod {} of the job too; each pod of a job needs claims of its own "
            "(a ResourceClaimTemplate)",
            pod.ns, name, other);
        return;
      }
    }
  }
  std::vector<std::optional<ClaimInfo>> got;
  for (const auto& name : pod.claims) got.push_back(impl_->claim(pod.ns, name, false));
  std::vector<const ClaimInfo*> claims;
  claims.reserve(got.size());
  for (const auto& c : got) claims.push_back(c ? &*c : nullptr);
  scheduler::apply_claims(pod, claims);
}

Result<KubeSync::BindPod> KubeSync::bind_pod(const std::string& ns, const std::string& pod,
                                             const std::string& uid, const std::string& node) {
  std::optional<PodInfo> info;
  {
    std::lock_guard l(impl_->mu);
    auto it = impl_->followed.find(ns + "/" + pod);
    if (it != impl_->followed.end() && (uid.empty() || it->second.info.uid == uid)) info = it->second.info;
  }
  BindPod out;
  if (!info) {  // not followed: not ours, or made a moment ago and not in the cache yet
    auto r = impl_->client->get(kube::path_of("v1", "pods", ns, pod));
    // As pod_exists: an API error, an answer without the shape of a Pod or another UID is "no such pod".
    if (!r.ok() || !r->is_object() || (!uid.empty() && meta_str(*r, "uid") != uid)) {
      out.found = false;
      return out;
    }
    auto p = read_pod(*r);
    if (!p.ok()) return p.error().context("reading pod " + ns + "/" + pod);
    info = std::move(*p);
  }
  out.ours = !info->resource.empty() || info->job.has_value();
  if (!chips_from_claims(*info)) return out;
  std::vector<int> chips;
  bool asks = false;
  for (const auto& name : info->claims) {
    auto c = impl_->claim(ns, name, true);
    if (!c)
      return Error::not_found(fmt::format("ResourceClaim {}/{} of pod {} cannot be read", ns, name, pod));
    if (c->chips == 0) continue;  // asks nothing of our chips
    asks = true;
    if (!c->allocated || c->node != node)
      return Error(EBUSY, fmt::format("ResourceClaim {}/{} of pod {} is not allocated on {} yet", ns, name,
                                      pod, node));
    chips.insert(chips.end(), c->phys.begin(), c->phys.end());
  }
  if (!asks) return out;
  std::sort(chips.begin(), chips.end());
  out.claimed = std::move(chips);
  return out;
}

bool KubeSync::wait_synced(std::chrono::milliseconds timeout) const {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (!synced()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

Status KubeSync::bind(const std::string& ns, const std::string& pod, const std::string& uid,
                      const std::string& node, const std::vector<int>& chips, int rank_start) {
  if (chips.empty()) {  // not ours: nothing to record
    auto b = impl_->client->bind(ns, pod, uid, node);
    if (!b.ok()) return b.error().context("creating the Binding of pod " + ns + "/" + pod);
    return ok_status();
  }
  auto r = impl_->client->merge_patch(kube::path_of("v1", "pods", ns, pod),
                                      bind_annotations(chips, rank_start, uid));
  if (!r.ok()) return r.error().context("writing the chips annotation of pod " + ns + "/" + pod);
  auto b = impl_->client->bind(ns, pod, uid, node);
  if (!b.ok()) return b.error().context("creating the Binding of pod " + ns + "/" + pod);
  return ok_status();
}

bool KubeSync::pod_exists(const std::string& ns, const std::string& pod, const std::string& uid) {
  {
    std::lock_guard l(impl_->mu);
    auto it = impl_->followed.find(ns + "/" + pod);
    if (it != impl_->followed.end() && (uid.empty() || it->second.info.uid == uid)) return true;
  }
  auto r = impl_->client->get(kube::path_of("v1", "pods", ns, pod));
  if (!r.ok()) return false;
  // The API server's answer is not trusted to have the shape of a Pod: a wrong type is "no such pod".
  return uid.empty() ? r->is_object() : meta_str(*r, "uid") == uid;
}

void KubeSync::sync_job(const std::string& ns, const std::string& job) {
  impl_->sync_job(ns, job);
}

void KubeSync::pod_event(const std::string& ns, const std::string& pod, const std::string& uid,
                         const std::string& type, const std::string& reason, const std::string& note) {
  impl_->pod_event(ns, pod, uid, type, reason, note);
}

KubeSync::Stats KubeSync::stats() const {
  std::lock_guard l(impl_->mu);
  return impl_->stats;
}

}  // namespace ascend::scheduler
