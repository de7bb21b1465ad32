#include "ascend/scheduler/kube_records.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ascend::scheduler {

using nlohmann::json;

namespace {

constexpr std::size_t kMaxChips = 64;
constexpr int kMaxPhy = 1023;

const json* at(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string str_at(const json& j, const char* key) {
  const json* v = at(j, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

}  // namespace

Result<std::vector<int>> parse_chips(const std::string& s) {
  std::vector<int> out;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    int v = -1;
    auto [p, ec] = std::from_chars(s.data() + pos, s.data() + end, v);
    if (ec != std::errc() || p != s.data() + end || v < 0 || v > kMaxPhy) {
      return Error::invalid("chips \"" + s.substr(0, 64) + "\": give chip ids 0-" + std::to_string(kMaxPhy) +
                            " separated by commas");
    }
    if (!out.empty() && v <= out.back()) {
      return Error::invalid("chips \"" + s.substr(0, 64) + "\": give distinct ids in ascending order");
    }
    out.push_back(v);
    if (out.size() > kMaxChips) return Error::invalid("chips: more than " + std::to_string(kMaxChips));
    pos = end + 1;
  }
  return out;
}

std::string format_chips(const std::vector<int>& chips) {
  return fmt::format("{}", fmt::join(chips, ","));
}

Result<ApiPod> read_api_pod(const json& pod) {
  ApiPod p;
  ASCEND_ASSIGN(p.info, read_pod(pod), "");
  const json* spec = at(pod, "spec");
  p.node = spec != nullptr ? str_at(*spec, "nodeName") : "";
  if (!p.node.empty()) ASCEND_CHECK(check_dns1123_subdomain(p.node, "spec.nodeName"), "");
  const json* status = at(pod, "status");
  p.phase = status != nullptr ? str_at(*status, "phase") : "";
  const json* meta = at(pod, "metadata");
  const json* ann = meta != nullptr ? at(*meta, "annotations") : nullptr;
  if (ann != nullptr) {
    std::string chips = str_at(*ann, kChipsAnnotation);
    if (!chips.empty()) {
      ASCEND_ASSIGN(p.chips, parse_chips(chips), "pod " + p.info.key() + " annotation " + kChipsAnnotation);
    }
  }
  return p;
}

bool followed(const ApiPod& p) {
  return !p.info.resource.empty() || !p.chips.empty() || p.info.job.has_value();
}

json slim_pod(json pod) {
  if (!pod.is_object()) return pod;
  json out = {{"kind", "Pod"}, {"apiVersion", "v1"}};
  if (const json* m = at(pod, "metadata")) {
    json meta = json::object();
    for (const char* k :
         {"name", "namespace", "uid", "resourceVersion", "annotations", "deletionTimestamp"}) {
      if (const json* v = at(*m, k)) meta[k] = *v;
    }
    out["metadata"] = std::move(meta);
  }
  if (const json* s = at(pod, "spec")) {
    json spec = json::object();
    if (const json* v = at(*s, "nodeName")) spec["nodeName"] = *v;
    if (const json* v = at(*s, "resourceClaims")) spec["resourceClaims"] = *v;
    for (const char* list : {"containers", "initContainers"}) {
      const json* cs = at(*s, list);
      if (cs == nullptr || !cs->is_array()) continue;
      json slim = json::array();
      for (const json& c : *cs) {
        json one = json::object();
        for (const char* k : {"name", "resources"}) {
          if (const json* v = at(c, k)) one[k] = *v;
        }
        slim.push_back(std::move(one));
      }
      spec[list] = std::move(slim);
    }
    out["spec"] = std::move(spec);
  }
  if (const json* st = at(pod, "status")) {
    json status = json::object();
    if (const json* ph = at(*st, "phase")) status["phase"] = *ph;
    if (const json* rc = at(*st, "resourceClaimStatuses")) status["resourceClaimStatuses"] = *rc;
    if (!status.empty()) out["status"] = std::move(status);
  }
  return out;
}

json bind_annotations(const std::vector<int>& chips, int rank_start, const std::string& uid) {
  json ann = {{kChipsAnnotation, format_chips(chips)}};
  if (rank_start >= 0) ann[kRankStartAnnotation] = std::to_string(rank_start);
  json meta = {{"annotations", std::move(ann)}};
  if (!uid.empty()) meta["uid"] = uid;
  return {{"metadata", std::move(meta)}};
}

std::string job_configmap_name(const std::string& job) {
  return kJobConfigMapPrefix + job;
}

json job_configmap(const json& record, nlohmann::ordered_json ranktable) {
  // "completed" once every pod has been bound: no slot waits for its pod (a pod that finished since, or was
  // deleted, does not make the table incomplete again; one that comes back to a released slot does).
  bool waiting = false;
  for (const json& s : record.at("slots")) {
    const std::string st = s.at("state").get<std::string>();
    waiting = waiting || st == "reserved" || st == "expired";
  }
  ranktable["status"] = waiting ? "initializing" : "completed";
  const std::string job = record.at("name").get<std::string>();
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata",
           {{"name", job_configmap_name(job)},
            {"namespace", record.at("namespace")},
            {"labels", {{kJobLabel, job}}}}},
          {"data", {{kPlacementKey, record.dump(2) + "\n"}, {kRankTableKey, ranktable.dump(2) + "\n"}}}};
}

Result<json> record_of(const json& cm) {
  const json* meta = at(cm, "metadata");
  std::string name = meta != nullptr ? str_at(*meta, "name") : "";
  if (!name.starts_with(kJobConfigMapPrefix)) {
    return Error::invalid("ConfigMap \"" + name.substr(0, 80) + "\" is not a job's (" + kJobConfigMapPrefix +
                          "<job>)");
  }
  const json* data = at(cm, "data");
  const json* placement = data != nullptr ? at(*data, kPlacementKey) : nullptr;
  if (placement == nullptr || !placement->is_string()) {
    return Error::invalid("ConfigMap " + name + ": no " + kPlacementKey);
  }
  json record = json::parse(placement->get<std::string>(), nullptr, false);
  if (record.is_discarded() || !record.is_object()) {
    return Error::invalid("ConfigMap " + name + ": " + kPlacementKey + " is not a JSON object");
  }
  if (str_at(record, "name") != name.substr(std::string(kJobConfigMapPrefix).size()) ||
      (meta != nullptr && str_at(record, "namespace") != str_at(*meta, "namespace"))) {
    return Error::invalid("ConfigMap " + name + ": its " + kPlacementKey + " is another job's");
  }
  return record;
}

std::uint64_t record_version(const json& cm) {
  auto r = record_of(cm);
  if (!r.ok()) return 0;
  const json* v = at(*r, "version");
  return v != nullptr && v->is_number_unsigned() ? v->get<std::uint64_t>() : 0;
}

}  // namespace ascend::scheduler
