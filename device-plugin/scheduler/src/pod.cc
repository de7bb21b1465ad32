#include "ascend/scheduler/pod.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace ascend::scheduler {

using nlohmann::json;

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// A non-negative decimal integer, whole string.
std::optional<long long> parse_count(std::string_view s) {
  long long v = 0;
  if (s.empty()) return std::nullopt;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

// A Kubernetes quantity of an extended resource: an integer ("4", or 4).
Result<long long> quantity(const json& v, const std::string& where) {
  if (v.is_number_unsigned()) return static_cast<long long>(v.get<std::uint64_t>());
  if (v.is_number_integer() && v.get<long long>() >= 0) return v.get<long long>();
  if (v.is_string()) {
    if (auto n = parse_count(v.get_ref<const std::string&>())) return *n;
  }
  return Error::invalid(where + ": " + v.dump() + " is not a whole number of devices");
}

bool is_vnpu_resource(std::string_view r) {
  return r == "huawei.com/npu-core" || r.starts_with("huawei.com/Ascend910-") ||
         r.starts_with("huawei.com/Ascend310P-");
}

struct Demand {
  std::map<std::string, long long> chips;  // whole-chip resource -> count
  std::string vnpu;
};

Status add_container(const json& c, const std::string& where, Demand& d) {
  if (!c.is_object()) return Error::invalid(where + ": not an object");
  const json* res = find_field(c, "resources");
  if (res == nullptr || res->is_null()) return ok_status();
  if (!res->is_object()) return Error::invalid(where + ".resources: not an object");
  std::map<std::string, long long> mine;
  for (const char* kind : {"requests", "limits"}) {
    const json* m = find_field(*res, kind);
    if (m == nullptr || m->is_null()) continue;
    if (!m->is_object()) return Error::invalid(where + ".resources." + kind + ": not an object");
    for (const auto& [name, v] : m->items()) {
      if (name == kResource910 || name == kResource310P) {
        std::string field = where + ".resources.";
        field += kind;
        field += "." + name;
        auto q = quantity(v, field);
        if (!q.ok()) return q.error();
        mine[name] = std::max(mine[name], *q);
      } else if (is_vnpu_resource(name)) {
        // Kept in the pod's record: bounded as a qualified name (a DNS subdomain prefix, '/', a 63-byte
        // name).
        if (name.size() > kDns1123SubdomainMax + 1 + kDns1123LabelMax) {
          return Error::invalid(where + ".resources." + kind + ": a resource name longer than " +
                                std::to_string(kDns1123SubdomainMax + 1 + kDns1123LabelMax) + " bytes");
        }
        d.vnpu = name;
      }
    }
  }
  for (const auto& [name, n] : mine) d.chips[name] += n;
  return ok_status();
}

Result<Demand> demand_of(const json& spec) {
  Demand total;
  if (const json* cs = find_field(spec, "containers"); cs != nullptr && !cs->is_null()) {
    if (!cs->is_array()) return Error::invalid("spec.containers: not an array");
    for (std::size_t i = 0; i < cs->size(); ++i) {
      ASCEND_CHECK(add_container((*cs)[i], "spec.containers[" + std::to_string(i) + "]", total), "pod");
    }
  }
  // The effective request is the larger of the containers' sum and any one init container.
  if (const json* is = find_field(spec, "initContainers"); is != nullptr && !is->is_null()) {
    if (!is->is_array()) return Error::invalid("spec.initContainers: not an array");
    for (std::size_t i = 0; i < is->size(); ++i) {
      Demand one;
      ASCEND_CHECK(add_container((*is)[i], "spec.initContainers[" + std::to_string(i) + "]", one), "pod");
      for (const auto& [name, n] : one.chips) total.chips[name] = std::max(total.chips[name], n);
      if (!one.vnpu.empty()) total.vnpu = one.vnpu;
    }
  }
  return total;
}

Result<std::string> string_field(const json& obj, std::string_view key, const std::string& where) {
  const json* v = find_field(obj, key);
  if (v == nullptr || v->is_null()) return std::string();
  if (!v->is_string()) return Error::invalid(where + ": not a string");
  return v->get<std::string>();
}

// A "tp=..,pp=..,dp=.." list: calls `take(dimension index 0/1/2, item, value)` for each item; a key other
// than tp, pp and dp, a key given twice or an item without '=' is an error naming it.
Status for_each_dimension(std::string_view s, std::string_view form,
                          const std::function<Status(int, std::string_view, std::string_view)>& take) {
  bool seen[3] = {false, false, false};
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t end = s.find(',', pos);
    if (end == std::string_view::npos) end = s.size();
    std::string_view item = s.substr(pos, end - pos);
    std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) return Error::invalid(fmt::format("'{}' is not {}", item, form));
    std::string_view key = item.substr(0, eq);
    int k = key == "tp" ? 0 : key == "pp" ? 1 : key == "dp" ? 2 : -1;
    if (k < 0) return Error::invalid(fmt::format("unknown dimension '{}' (use tp, pp, dp)", key));
    if (seen[k]) return Error::invalid(fmt::format("'{}' given twice", key));
    seen[k] = true;
    ASCEND_CHECK(take(k, item, item.substr(eq + 1)), "");
    pos = end + 1;
  }
  return ok_status();
}

Result<topology::CommBytes> parse_comm(std::string_view s) {
  topology::CommBytes c = default_comm();
  auto st = for_each_dimension(
      s, "tp=bytes, pp=bytes or dp=bytes", [&](int k, std::string_view, std::string_view text) -> Status {
        std::string value(text);
        char* stop = nullptr;
        double v = std::strtod(value.c_str(), &stop);
        if (value.empty() || stop != value.c_str() + value.size() || !(v >= 0) || !std::isfinite(v)) {
          return Error::invalid("'" + value + "' is not a number of bytes");
        }
        (k == 0 ? c.tp : k == 1 ? c.pp : c.dp) = v;
        return ok_status();
      });
  if (!st.ok()) return st.error();
  return c;
}

// The job annotations; an error here is a property of the pod (it cannot be placed), not of the request.
Result<JobRequest> job_of(const json& annotations, const std::string& name) {
  auto text = [&](const char* key) -> std::optional<std::string> {
    const json* v = annotations.is_object() ? &annotations : nullptr;
    if (v == nullptr || !v->contains(key) || !(*v)[key].is_string()) return std::nullopt;
    return (*v)[key].get<std::string>();
  };
  JobRequest j;
  j.name = name;
  auto pods = text(kJobPodsAnnotation);
  if (!pods) return Error::invalid(std::string("annotation ") + kJobPodsAnnotation + " is missing");
  auto n = parse_count(*pods);
  if (!n || *n < 1 || *n > 100000) {
    return Error::invalid(std::string("annotation ") + kJobPodsAnnotation + ": '" + *pods +
                          "' is not a pod count");
  }
  j.pods = static_cast<int>(*n);
  auto par = text(kParallelAnnotation);
  if (!par) return Error::invalid(std::string("annotation ") + kParallelAnnotation + " is missing");
  auto p = parse_parallel(*par);
  if (!p.ok()) return p.error().context(std::string("annotation ") + kParallelAnnotation);
  j.tp = p->tp;
  j.pp = p->pp;
  j.dp = p->dp;
  if (auto o = text(kOrderAnnotation)) {
    if (*o == "tp-dp-pp") {
      j.order = topology::RankOrder::kTpDpPp;
    } else if (*o == "tp-pp-dp") {
      j.order = topology::RankOrder::kTpPpDp;
    } else {
      return Error::invalid(std::string("annotation ") + kOrderAnnotation + ": '" + *o +
                            "' is not tp-dp-pp or tp-pp-dp");
    }
  }
  j.comm = default_comm();
  if (auto c = text(kCommAnnotation)) {
    auto comm = parse_comm(*c);
    if (!comm.ok()) return comm.error().context(std::string("annotation ") + kCommAnnotation);
    j.comm = *comm;
  }
  if (auto r = text(kRecoveryAnnotation)) {
    if (*r != "pod" && *r != "job" && *r != "none") {
      return Error::invalid(std::string("annotation ") + kRecoveryAnnotation + ": '" + *r +
                            "' is not pod, job or none");
    }
    j.recovery = *r;
  }
  if (auto m = text(kMaxRestartsAnnotation)) {
    auto n = parse_count(*m);
    if (!n || *n > 100) {
      return Error::invalid(std::string("annotation ") + kMaxRestartsAnnotation + ": '" + *m +
                            "' is not a count of 0-100");
    }
    j.max_restarts = static_cast<int>(*n);
  }
  return j;
}

int index_of(const json& annotations, const std::string& pod_name, std::string& error) {
  for (const char* key : {kPodIndexAnnotation, kCompletionIndexAnnotation}) {
    if (!annotations.is_object() || !annotations.contains(key)) continue;
    const json& v = annotations[key];
    auto n = v.is_string() ? parse_count(v.get_ref<const std::string&>()) : std::nullopt;
    if (!n || *n > 1000000) {
      error = std::string("annotation ") + key + ": " + v.dump() + " is not a pod index";
      return -1;
    }
    return static_cast<int>(*n);
  }
  int i = ordinal_of(pod_name);
  if (i < 0) {
    error = "pod name '" + pod_name + "' has no -N suffix and no annotation " + kPodIndexAnnotation +
            " says which pod of the job it is";
  }
  return i;
}

// A value for a message: short enough that an oversized name never makes an oversized answer.
std::string shown(std::string_view v) {
  constexpr std::size_t kShown = 64;
  if (v.size() <= kShown) return std::string(v);
  return std::string(v.substr(0, kShown)) + "...(" + std::to_string(v.size()) + " bytes)";
}

bool label_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

bool alnum_lower(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

// One RFC 1123 label, without the length rule.
bool is_label(std::string_view v) {
  return !v.empty() && alnum_lower(v.front()) && alnum_lower(v.back()) &&
         std::all_of(v.begin(), v.end(), label_char);
}

// Every annotation key and value counted, as the API server counts them.
Status check_annotations(const json& a) {
  std::size_t total = 0;
  for (const auto& [k, v] : a.items()) {
    total += k.size() + (v.is_string() ? v.get_ref<const std::string&>().size() : v.dump().size());
    if (total > kAnnotationsMax) {
      return Error::invalid("Pod.metadata.annotations: more than " + std::to_string(kAnnotationsMax) +
                            " bytes (Kubernetes' limit on an object's annotations)");
    }
  }
  for (const char* key :
       {kJobAnnotation, kJobPodsAnnotation, kParallelAnnotation, kOrderAnnotation, kPodIndexAnnotation,
        kCommAnnotation, kCompletionIndexAnnotation, kRecoveryAnnotation, kMaxRestartsAnnotation}) {
    auto it = a.find(key);
    if (it == a.end() || !it->is_string()) continue;
    if (it->get_ref<const std::string&>().size() > kOurAnnotationMax) {
      return Error::invalid(std::string("Pod.metadata.annotations.") + key + ": longer than " +
                            std::to_string(kOurAnnotationMax) + " bytes");
    }
  }
  auto job = a.find(kJobAnnotation);
  if (job != a.end() && job->is_string() && !job->get_ref<const std::string&>().empty()) {
    return check_dns1123_subdomain(job->get_ref<const std::string&>(),
                                   std::string("Pod.metadata.annotations.") + kJobAnnotation, kJobNameMax);
  }
  return ok_status();
}

}  // namespace

Status check_dns1123_label(std::string_view v, const std::string& field) {
  if (v.size() > kDns1123LabelMax || !is_label(v)) {
    return Error::invalid(field + ": '" + shown(v) + "' is not a DNS-1123 label (at most " +
                          std::to_string(kDns1123LabelMax) +
                          " characters of a-z, 0-9 and '-', starting and ending with a letter or digit)");
  }
  return ok_status();
}

bool is_dns1123_subdomain(std::string_view v, std::size_t max) {
  // Each byte's class: 0 not allowed, 1 a letter or digit, 2 '-', 3 '.'.
  static constexpr auto kClass = [] {
    std::array<unsigned char, 256> t{};
    for (int c = 'a'; c <= 'z'; ++c) t[static_cast<std::size_t>(c)] = 1;
    for (int c = '0'; c <= '9'; ++c) t[static_cast<std::size_t>(c)] = 1;
    t['-'] = 2;
    t['.'] = 3;
    return t;
  }();
  if (v.empty() || v.size() > max) return false;
  unsigned prev = 3;  // the start of a label
  for (char ch : v) {
    unsigned c = kClass[static_cast<unsigned char>(ch)];
    if (c != 1) {
      if (c == 0) return false;
      if (c == 3 && prev != 1) return false;  // a label ends with a letter or digit (an empty one fails here)
      if (c == 2 && prev == 3) return false;  // a label starts with a letter or digit
    }
    prev = c;
  }
  return prev == 1;
}

Status check_dns1123_subdomain(std::string_view v, const std::string& field, std::size_t max) {
  if (!is_dns1123_subdomain(v, max)) {
    return Error::invalid(field + ": '" + shown(v) + "' is not a DNS-1123 subdomain (at most " +
                          std::to_string(max) +
                          " characters of a-z, 0-9, '-' and '.', each dot-separated part starting and "
                          "ending with a letter or digit)");
  }
  return ok_status();
}

Status check_uid(std::string_view v, const std::string& field) {
  bool ok = v.size() <= kUidMax && std::all_of(v.begin(), v.end(), [](char c) {
              return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-';
            });
  if (!ok) {
    return Error::invalid(field + ": '" + shown(v) + "' is not an object UID (at most " +
                          std::to_string(kUidMax) + " characters of letters, digits and '-')");
  }
  return ok_status();
}

const json* find_field(const json& j, std::string_view key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  if (it != j.end()) return &*it;
  for (auto i = j.begin(); i != j.end(); ++i) {
    if (iequals(i.key(), key)) return &*i;
  }
  return nullptr;
}

topology::CommBytes default_comm() {
  return {8e9, 0.25e9, 2e9};
}

int ordinal_of(std::string_view pod_name) {
  std::size_t dash = pod_name.rfind('-');
  if (dash == std::string_view::npos) return -1;
  auto n = parse_count(pod_name.substr(dash + 1));
  if (!n || *n > 1000000) return -1;
  return static_cast<int>(*n);
}

Result<JobRequest> parse_parallel(std::string_view s) {
  JobRequest j;
  auto st = for_each_dimension(
      s, "tp=N, pp=N or dp=N", [&](int k, std::string_view item, std::string_view text) -> Status {
        auto n = parse_count(text);
        if (!n || *n < 1 || *n > (1 << 20)) {
          return Error::invalid(fmt::format("'{}': the size must be a whole number from 1", item));
        }
        (k == 0 ? j.tp : k == 1 ? j.pp : j.dp) = static_cast<int>(*n);
        return ok_status();
      });
  if (!st.ok()) return st.error();
  return j;
}

namespace {

// The names of the ResourceClaims the pod's spec.resourceClaims entries resolve to (PodInfo::claims).
Result<std::vector<std::string>> claims_of(const json& spec, const json* status) {
  std::vector<std::string> out;
  const json* rc = find_field(spec, "resourceClaims");
  if (rc == nullptr || rc->is_null()) return out;
  if (!rc->is_array()) return Error::invalid("spec.resourceClaims: not an array");
  if (rc->size() > kClaimsMax)
    return Error::invalid("spec.resourceClaims: more than " + std::to_string(kClaimsMax) + " entries");
  // status.resourceClaimStatuses: entry name -> the claim made for it from its template.
  const json* made = nullptr;
  if (status != nullptr && status->is_object()) made = find_field(*status, "resourceClaimStatuses");
  if (made != nullptr && !made->is_null() && !made->is_array())
    return Error::invalid("status.resourceClaimStatuses: not an array");
  if (made != nullptr && made->is_array() && made->size() > kClaimsMax)
    return Error::invalid("status.resourceClaimStatuses: more than " + std::to_string(kClaimsMax) +
                          " entries");
  for (std::size_t i = 0; i < rc->size(); ++i) {
    const json& e = (*rc)[i];
    const std::string where = "spec.resourceClaims[" + std::to_string(i) + "]";
    if (!e.is_object()) return Error::invalid(where + ": not an object");
    ASCEND_ASSIGN(std::string entry, string_field(e, "name", where + ".name"), "");
    ASCEND_ASSIGN(std::string claim, string_field(e, "resourceClaimName", where + ".resourceClaimName"), "");
    if (claim.empty() && made != nullptr && made->is_array()) {
      for (std::size_t k = 0; k < made->size(); ++k) {
        const json& m = (*made)[k];
        const std::string at = "status.resourceClaimStatuses[" + std::to_string(k) + "]";
        if (!m.is_object()) return Error::invalid(at + ": not an object");
        ASCEND_ASSIGN(std::string name, string_field(m, "name", at + ".name"), "");
        if (name != entry) continue;
        ASCEND_ASSIGN(claim, string_field(m, "resourceClaimName", at + ".resourceClaimName"), "");
        break;
      }
    }
    if (claim.empty()) continue;
    ASCEND_CHECK(check_dns1123_subdomain(claim, where + " claim"), "");
    out.push_back(std::move(claim));
  }
  return out;
}

}  // namespace

Result<PodInfo> read_pod(const json& pod) {
  if (!pod.is_object()) return Error::invalid("Pod: not an object");
  const json* meta = find_field(pod, "metadata");
  if (meta == nullptr || !meta->is_object()) return Error::invalid("Pod.metadata: missing or not an object");
  PodInfo p;
  ASCEND_ASSIGN(p.name, string_field(*meta, "name", "Pod.metadata.name"), "");
  if (p.name.empty()) return Error::invalid("Pod.metadata.name: missing");
  ASCEND_CHECK(check_dns1123_subdomain(p.name, "Pod.metadata.name"), "");
  ASCEND_ASSIGN(p.ns, string_field(*meta, "namespace", "Pod.metadata.namespace"), "");
  if (p.ns.empty()) p.ns = "default";
  ASCEND_CHECK(check_dns1123_label(p.ns, "Pod.metadata.namespace"), "");
  ASCEND_ASSIGN(p.uid, string_field(*meta, "uid", "Pod.metadata.uid"), "");
  ASCEND_CHECK(check_uid(p.uid, "Pod.metadata.uid"), "");
  json annotations = json::object();
  if (const json* a = find_field(*meta, "annotations"); a != nullptr && !a->is_null()) {
    if (!a->is_object()) return Error::invalid("Pod.metadata.annotations: not an object");
    ASCEND_CHECK(check_annotations(*a), "");
    annotations = *a;
  }
  const json* spec = find_field(pod, "spec");
  if (spec != nullptr && !spec->is_null()) {
    if (!spec->is_object()) return Error::invalid("Pod.spec: not an object");
    auto d = demand_of(*spec);
    if (!d.ok()) return d.error().context("Pod");
    for (const auto& [name, n] : d->chips) {
      if (n == 0) continue;
      if (!p.resource.empty()) {
        return Error::invalid("Pod: asks for both " + p.resource + " and " + name + "; use one chip type");
      }
      if (n > 4096)
        return Error::invalid("Pod: " + std::to_string(n) + " " + name + " is more than any node has");
      p.resource = name;
      p.chips = static_cast<int>(n);
    }
    p.vnpu_resource = d->vnpu;
    ASCEND_ASSIGN(p.claims, claims_of(*spec, find_field(pod, "status")), "Pod");
  }
  if (annotations.contains(kJobAnnotation)) {
    const json& jn = annotations[kJobAnnotation];
    if (!jn.is_string() || jn.get_ref<const std::string&>().empty()) {
      p.job_error = std::string("annotation ") + kJobAnnotation + " must name the job";
      return p;
    }
    auto j = job_of(annotations, jn.get<std::string>());
    if (!j.ok()) {
      p.job_error = j.error().message();
      return p;
    }
    p.job = *j;
    p.index = index_of(annotations, p.name, p.job_error);
  }
  return p;
}

}  // namespace ascend::scheduler
