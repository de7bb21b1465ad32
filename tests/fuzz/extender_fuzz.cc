// The scheduler extender's request handling without HTTP: the bodies kube-scheduler and the device plugins
// send, parsed by wire.cc and run through one Scheduler (a 4-node cluster: three Atlas 800T A2, one Atlas 800
// 9000) in sequence, as the server does. The input is a list of requests separated by "---" lines; each
// request's first line is its verb and argument, the rest its JSON body:
//   filter | prioritize | bind                       (extender verbs; body ExtenderArgs /
//   ExtenderBindingArgs) inventory NODE | allocations NODE | return NODE  (device plugin calls; body as in
//   wire.h) reservations NODE | release NS/NAME | view NS/JOB | tick SECONDS
//   claim (body: a ResourceClaim, read as the claim informer reads it, its allocation given to put_claimed)
// A filter or prioritize body may carry "Claims" (ResourceClaims, in the pod's claim order: the job pod's
// chips come from them, dra_claims.h); a bind body may carry "Chips" (the chips its claims were allocated).
// Oracle: every answer serialises; filter only passes candidate nodes and scores only candidates; the chip
// counts add up to the cluster; at the end, the saved state loads into a fresh Scheduler and saves back the
// same.
#include <algorithm>
#include <charconv>
#include <optional>

#include "ascend/scheduler/dra_claims.h"
#include "ascend/scheduler/extender.h"
#include "ascend/scheduler/wire.h"
#include "ascend/topology/cluster.h"
#include "fuzz_util.h"

using namespace ascend;
using nlohmann::json;

namespace {

// The server refuses bodies nested deeper than this before parsing (server.cc).
bool too_deep(std::string_view s) {
  int depth = 0;
  for (char c : s) {
    if (c == '[' || c == '{') {
      if (++depth > 128) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

topology::Cluster fuzz_cluster() {
  std::vector<topology::NodeSpec> specs;
  for (int i = 0; i < 3; ++i) {
    topology::NodeSpec n;
    n.name = "node-" + std::to_string(i);
    n.profile = "atlas800t-a2";
    n.leaf = "leaf-0";
    specs.push_back(n);
  }
  topology::NodeSpec old;
  old.name = "node-3";
  old.profile = "atlas800-9000";
  old.leaf = "leaf-1";
  old.busy = {1};
  specs.push_back(old);
  auto c = topology::make_cluster("fuzz", {}, specs, topology::builtin_profiles());
  fuzz::check(c.ok(), "the fuzz cluster");
  return std::move(c).value();
}

std::pair<std::string, std::string> halves(const std::string& s) {
  auto slash = s.find('/');
  if (slash == std::string::npos) return {s, ""};
  return {s.substr(0, slash), s.substr(slash + 1)};
}

void check_counts(const scheduler::Scheduler& s, int total_chips) {
  auto c = s.counts();
  fuzz::check(c.free >= 0 && c.used >= 0 && c.unhealthy >= 0, "a negative chip count");
  fuzz::check(c.free + c.used + c.unhealthy <= total_chips, "more chips counted than the cluster has");
}

// After the last request (a round trip after every one made the target ten times slower).
void check_saved(const scheduler::Scheduler& s, const topology::Cluster& cluster) {
  json saved = s.save();
  (void)saved.dump();
  scheduler::Scheduler fresh(cluster);
  auto st = fresh.load(saved);
  fuzz::check(st.ok(), "the saved state does not load: " + (st.ok() ? "" : st.error().message()));
  fuzz::check(fresh.save() == saved, "the saved state does not save back the same");
  (void)s.cluster_view().dump();
}

void run(scheduler::Scheduler& s, const std::string& verb, const std::string& arg, std::string_view body_text,
         scheduler::Clock::time_point& now) {
  json body;
  bool needs_body = verb == "filter" || verb == "prioritize" || verb == "bind" || verb == "inventory" ||
                    verb == "allocations" || verb == "return";
  std::optional<scheduler::ExtenderArgs> fast;
  if (needs_body) {
    if (too_deep(body_text)) return;
    if (verb == "filter" || verb == "prioritize")
      fast = scheduler::read_extender_args_fast(body_text, s.cluster().nodes.size());
    body = json::parse(body_text, nullptr, false);
    fuzz::check(!fast || !body.is_discarded(), "the fast reader took a body that is not JSON");
    if (body.is_discarded()) return;
  }
  if (verb == "filter" || verb == "prioritize") {
    auto args = scheduler::parse_extender_args(body, s.cluster().nodes.size());
    fuzz::check(!fast || args.ok(), "the fast reader took a body the long way refuses");
    if (!args.ok()) return;
    if (fast) {
      // The server takes the fast reader's answer when it has one: it must be the long way's.
      const auto &a = args->pod, &b = fast->pod;
      fuzz::check(fast->node_names == args->node_names && !fast->full_nodes && a.ns == b.ns &&
                      a.name == b.name && a.uid == b.uid && a.resource == b.resource && a.chips == b.chips &&
                      a.vnpu_resource == b.vnpu_resource && a.index == b.index &&
                      a.job_error == b.job_error && a.claims == b.claims &&
                      a.job.has_value() == b.job.has_value() &&
                      (!a.job ||
                       (a.job->name == b.job->name && a.job->pods == b.job->pods && a.job->tp == b.job->tp &&
                        a.job->pp == b.job->pp && a.job->dp == b.job->dp && a.job->order == b.job->order &&
                        a.job->recovery == b.job->recovery && a.job->max_restarts == b.job->max_restarts)),
                  "the fast reader and the long way read different ExtenderArgs");
    }
    fuzz::check(args->pod.claims.size() <= scheduler::kClaimsMax, "more claims than a pod may name");
    if (const json* claims = body.is_object() && body.contains("Claims") ? &body["Claims"] : nullptr;
        claims != nullptr && claims->is_array() && claims->size() <= 8) {
      std::vector<std::optional<scheduler::ClaimInfo>> read;
      for (const json& c : *claims) {
        auto r = scheduler::read_claim(c);
        read.push_back(r.ok() ? std::optional(std::move(*r)) : std::nullopt);
      }
      std::vector<const scheduler::ClaimInfo*> ptrs;
      for (const auto& r : read) ptrs.push_back(r ? &*r : nullptr);
      const bool from_claims = scheduler::chips_from_claims(args->pod);
      const std::string resource = args->pod.resource;
      scheduler::apply_claims(args->pod, ptrs);
      const bool took = args->pod.resource != resource;
      fuzz::check(!took || (from_claims && args->pod.chips > 0 && args->pod.chips <= 4096 &&
                            args->pod.resource == scheduler::kResource910),
                  "chips from claims for a pod that is not a job pod without a resource");
    }
    const auto& names = args->node_names;
    // What parsing promises (issue 31): no list longer than the cluster, no name outside Kubernetes' limits.
    fuzz::check(names.size() <= s.cluster().nodes.size(), "a node list longer than the cluster was accepted");
    fuzz::check(args->pod.name.size() <= scheduler::kDns1123SubdomainMax &&
                    args->pod.ns.size() <= scheduler::kDns1123LabelMax,
                "a pod name or namespace over Kubernetes' limits was accepted");
    for (const auto& n : names) {
      fuzz::check(n.size() <= scheduler::kDns1123SubdomainMax && n.find('/') == std::string::npos,
                  "a node name over Kubernetes' limits was accepted");
    }
    auto candidate = [&](const std::string& n) {
      return std::find(names.begin(), names.end(), n) != names.end();
    };
    if (verb == "filter") {
      auto r = s.filter(args->pod, names, now);
      fuzz::check(s.seen_count() <= s.seen_cap(), "more pods remembered than the cap");
      for (const auto& p : r.passed)
        fuzz::check(candidate(p), "filter passed a node it was not offered: " + p);
      const std::string tree = scheduler::filter_result_json(*args, r).dump();
      fuzz::check(scheduler::filter_result_text(*args, r) == tree,
                  "the filter answer's text is not the tree's dump");
      fuzz::check(scheduler::filter_result_text(*args, r, scheduler::NamesOfArgs{}) == tree,
                  "the server's filter answer (names of the request) is not the tree's dump");
    } else {
      auto scores = s.prioritize(args->pod, names);
      for (const auto& sc : scores)
        fuzz::check(candidate(sc.host), "a score for a node not offered: " + sc.host);
      fuzz::check(scheduler::priorities_text(scores) == scheduler::priorities_json(scores).dump(),
                  "the prioritize answer's text is not the tree's dump");
      // The server's way: the scores alone, written with the request's names.
      auto alone = s.scores(args->pod, names);
      fuzz::check(scheduler::priorities_text(names, alone) == scheduler::priorities_text(scores),
                  "the answer from the scores alone is not prioritize's");
    }
  } else if (verb == "bind") {
    auto b = scheduler::parse_binding_args(body);
    if (!b.ok()) return;
    fuzz::check(b->pod_namespace.find('/') == std::string::npos && b->pod_name.find('/') == std::string::npos,
                "a '/' in a name that becomes an API server path segment was accepted");
    std::optional<std::vector<int>> claimed;
    if (const json* chips = body.contains("Chips") ? &body["Chips"] : nullptr;
        chips != nullptr && chips->is_array() && chips->size() <= 64) {
      claimed.emplace();
      for (const json& c : *chips) {
        if (c.is_number_integer()) claimed->push_back(std::clamp(c.get<int>(), -1, 2048));
      }
    }
    auto st = s.bind(b->pod_namespace, b->pod_name, b->pod_uid, b->node, now, claimed ? &*claimed : nullptr);
    (void)scheduler::binding_result_json(st.ok() ? "" : st.error().message()).dump();
    (void)scheduler::binding_object(*b).dump();
  } else if (verb == "claim") {
    auto c = scheduler::read_claim(body);
    if (!c.ok()) return;
    // What reading promises: a claim within Kubernetes' limits, its chips sorted, distinct and real ids.
    fuzz::check(c->name.size() <= scheduler::kDns1123SubdomainMax &&
                    c->ns.size() <= scheduler::kDns1123LabelMax &&
                    c->node.size() <= scheduler::kDns1123SubdomainMax && c->chips >= 0,
                "a claim over Kubernetes' limits was accepted");
    fuzz::check(std::is_sorted(c->phys.begin(), c->phys.end()) &&
                    std::adjacent_find(c->phys.begin(), c->phys.end()) == c->phys.end() &&
                    (c->phys.empty() || (c->phys.front() >= 0 && c->phys.back() <= 1023)) &&
                    c->phys.size() <= scheduler::kAllocationResultsMax,
                "a claim's chips are not distinct sorted chip ids");
    fuzz::check(!c->phys.empty() == !c->node.empty(), "chips without a node, or a node without chips");
    if (c->allocated && !c->node.empty()) (void)s.put_claimed(c->node, c->phys);
    (void)scheduler::slim_claim(body).dump();
  } else if (verb == "inventory") {
    auto inv = scheduler::parse_inventory(body);
    if (inv.ok()) (void)s.put_inventory(arg, *inv, now);
  } else if (verb == "allocations" || verb == "return") {
    auto chips = scheduler::parse_allocation(body);
    if (!chips.ok()) return;
    if (verb == "allocations") {
      auto g = s.take_allocation(arg, *chips, now);
      if (g.ok()) (void)scheduler::grant_json(*g).dump();
    } else {
      (void)s.return_allocation(arg, *chips, now);
    }
  } else if (verb == "reservations") {
    auto r = s.reservations(arg);
    if (r.ok()) (void)scheduler::reservations_json(arg, *r).dump();
  } else if (verb == "release") {
    auto [ns, name] = halves(arg);
    (void)s.release(ns, name, now);
  } else if (verb == "view") {
    auto [ns, job] = halves(arg);
    if (auto p = s.placement_of(ns, job); p.ok()) (void)p->dump();
    if (auto r = s.ranktable_of(ns, job); r.ok()) (void)r->dump();
    for (int i = 0; i < 3; ++i) (void)s.env_of(ns, job, i);
  } else if (verb == "tick") {
    int seconds = 0;
    std::from_chars(arg.data(), arg.data() + arg.size(), seconds);
    now += std::chrono::seconds(std::clamp(seconds, 0, 3600));
    (void)s.expire(now);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const topology::Cluster cluster = fuzz_cluster();
  static const int total_chips = [] {
    scheduler::Scheduler s(cluster);
    auto c = s.counts();
    return c.free + c.used + c.unhealthy;
  }();
  scheduler::Scheduler s(cluster, std::chrono::seconds(60));
  scheduler::Clock::time_point now{std::chrono::hours(24 * 365 * 50)};
  int n = 0;
  for (std::string_view req : fuzz::split_sections(fuzz::as_text(data, size), "---")) {
    if (++n > 16) break;
    auto eol = req.find('\n');
    std::string head(req.substr(0, eol));
    std::string_view body = eol == std::string_view::npos ? std::string_view() : req.substr(eol + 1);
    auto sp = head.find(' ');
    std::string verb = head.substr(0, sp);
    std::string arg = sp == std::string::npos ? "" : head.substr(sp + 1);
    run(s, verb, arg, body, now);
    now += std::chrono::seconds(1);
    check_counts(s, total_chips);
  }
  check_saved(s, cluster);
  return 0;
}
