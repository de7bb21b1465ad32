#include "ascend/scheduler/dra_claims.h"

#include <algorithm>

#include <fmt/format.h>

namespace ascend::scheduler {

using nlohmann::json;

namespace {

// The chip ids the scheduler keeps (parse_chips: 0..1023).
constexpr int kMaxChipId = 1023;

const json* at(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

Result<std::string> str(const json& obj, const char* key, const std::string& where) {
  const json* v = at(obj, key);
  if (v == nullptr) return std::string();
  if (!v->is_string()) return Error::invalid(where + "." + key + ": not a string");
  return v->get<std::string>();
}

Result<const json*> array(const json& obj, const char* key, const std::string& where, std::size_t max) {
  const json* v = at(obj, key);
  if (v == nullptr) return static_cast<const json*>(nullptr);
  if (!v->is_array()) return Error::invalid(where + "." + key + ": not an array");
  if (v->size() > max)
    return Error::invalid(where + "." + key + ": more than " + std::to_string(max) + " entries");
  return v;
}

// One request (DeviceRequest): what it asks of the chip class; `unplannable` gets why a job cannot be planned
// with it.
Status read_request(const json& r, const std::string& where, ClaimInfo& c) {
  if (!r.is_object()) return Error::invalid(where + ": not an object");
  if (at(r, "firstAvailable") != nullptr) {
    ASCEND_ASSIGN(const json* first, array(r, "firstAvailable", where, kFirstAvailableMax), "");
    for (const json& sub : *first) {
      ASCEND_ASSIGN(std::string cls, str(sub, "deviceClassName", where + ".firstAvailable[]"), "");
      if (cls.ends_with(kDraChipClass) && c.unplannable.empty())
        c.unplannable = "request " + where + " lists alternatives (firstAvailable); ask an exact count";
    }
    return ok_status();
  }
  const json* ex = at(r, "exactly");
  if (ex == nullptr) return ok_status();
  if (!ex->is_object()) return Error::invalid(where + ".exactly: not an object");
  ASCEND_ASSIGN(std::string cls, str(*ex, "deviceClassName", where + ".exactly"), "");
  if (cls == kDraChipClass) {
    ASCEND_ASSIGN(std::string mode, str(*ex, "allocationMode", where + ".exactly"), "");
    if (!mode.empty() && mode != "ExactCount") {
      if (c.unplannable.empty())
        c.unplannable = "request " + where + " asks for allocationMode " + mode + "; ask an exact count";
      return ok_status();
    }
    long long n = 1;
    if (const json* count = at(*ex, "count")) {
      if (!count->is_number_integer()) return Error::invalid(where + ".exactly.count: not an integer");
      n = count->get<long long>();
    }
    if (n < 1 || n > 4096) return Error::invalid(where + ".exactly.count: " + std::to_string(n) + " chips");
    c.chips += static_cast<int>(n);
  } else if (cls.ends_with(std::string(".") + kDraChipClass) && c.unplannable.empty()) {
    // deploy/kubernetes/dra-vnpu-deviceclasses.yaml: <template>.npu.ascend.huawei.com
    c.unplannable = "request " + where + " asks for vNPUs (" + cls + "); a job is placed on whole chips";
  }
  return ok_status();
}

}  // namespace

Result<ClaimInfo> read_claim(const json& claim) {
  if (!claim.is_object()) return Error::invalid("ResourceClaim: not an object");
  const json* meta = at(claim, "metadata");
  if (meta == nullptr || !meta->is_object()) return Error::invalid("ResourceClaim.metadata: missing");
  ClaimInfo c;
  ASCEND_ASSIGN(c.name, str(*meta, "name", "ResourceClaim.metadata"), "");
  if (c.name.empty()) return Error::invalid("ResourceClaim.metadata.name: missing");
  ASCEND_CHECK(check_dns1123_subdomain(c.name, "ResourceClaim.metadata.name"), "");
  ASCEND_ASSIGN(c.ns, str(*meta, "namespace", "ResourceClaim.metadata"), "");
  if (c.ns.empty()) c.ns = "default";
  ASCEND_CHECK(check_dns1123_label(c.ns, "ResourceClaim.metadata.namespace"), "");
  ASCEND_ASSIGN(c.uid, str(*meta, "uid", "ResourceClaim.metadata"), "");
  ASCEND_CHECK(check_uid(c.uid, "ResourceClaim.metadata.uid"), "");
  const std::string where = "ResourceClaim " + c.ns + "/" + c.name;
  if (const json* spec = at(claim, "spec")) {
    const json* devices = at(*spec, "devices");
    if (devices != nullptr) {
      ASCEND_ASSIGN(const json* reqs, array(*devices, "requests", "spec.devices", kClaimRequestsMax), where);
      for (std::size_t i = 0; reqs != nullptr && i < reqs->size(); ++i) {
        ASCEND_CHECK(read_request((*reqs)[i], "spec.devices.requests[" + std::to_string(i) + "]", c), where);
      }
    }
  }
  const json* status = at(claim, "status");
  const json* alloc = status != nullptr ? at(*status, "allocation") : nullptr;
  if (alloc == nullptr) return c;
  c.allocated = true;
  const json* devices = at(*alloc, "devices");
  if (devices == nullptr) return c;
  ASCEND_ASSIGN(const json* results,
                array(*devices, "results", "status.allocation.devices", kAllocationResultsMax), where);
  for (std::size_t i = 0; results != nullptr && i < results->size(); ++i) {
    const std::string w = "status.allocation.devices.results[" + std::to_string(i) + "]";
    const json& r = (*results)[i];
    if (!r.is_object()) return Error::invalid(w + ": not an object").context(where);
    ASCEND_ASSIGN(std::string driver, str(r, "driver", w), where);
    if (driver != kDraDriver) continue;
    ASCEND_ASSIGN(std::string pool, str(r, "pool", w), where);
    ASCEND_ASSIGN(std::string device, str(r, "device", w), where);
    ASCEND_CHECK(check_dns1123_subdomain(pool, w + ".pool"), where);
    auto chip = deviceinfo::chip_of_device(device);
    if (!chip.ok()) return chip.error().context(w + ".device").context(where);
    const int phy = *chip;
    if (phy > kMaxChipId)
      return Error::invalid(fmt::format("{}.device: chip {} (ids are 0..{})", w, phy, kMaxChipId))
          .context(where);
    if (!c.node.empty() && pool != c.node)
      return Error::invalid(fmt::format("{}.pool: our devices on two nodes ({}, {})", w, c.node, pool))
          .context(where);
    c.node = pool;
    c.phys.push_back(phy);
  }
  std::sort(c.phys.begin(), c.phys.end());
  c.phys.erase(std::unique(c.phys.begin(), c.phys.end()), c.phys.end());
  return c;
}

json slim_claim(json claim) {
  if (!claim.is_object()) return claim;
  json out = {{"apiVersion", "resource.k8s.io/v1"}, {"kind", "ResourceClaim"}};
  if (const json* m = at(claim, "metadata")) {
    json meta = json::object();
    for (const char* k : {"name", "namespace", "uid", "resourceVersion"}) {
      if (const json* v = at(*m, k)) meta[k] = *v;
    }
    out["metadata"] = std::move(meta);
  }
  // Of each request only what read_request reads (a request's CEL selectors can be long, and a cluster has
  // many claims).
  auto slim_request = [](const json& r) {
    if (!r.is_object()) return r;
    json one = json::object();
    if (const json* n = at(r, "name")) one["name"] = *n;
    if (const json* e = at(r, "exactly")) {
      json ex = e->is_object() ? json::object() : *e;
      for (const char* k : {"deviceClassName", "allocationMode", "count"}) {
        if (const json* v = at(*e, k)) ex[k] = *v;
      }
      one["exactly"] = std::move(ex);
    }
    if (const json* f = at(r, "firstAvailable")) {
      json subs = f->is_array() ? json::array() : *f;
      for (std::size_t i = 0; f->is_array() && i < f->size(); ++i) {
        const json& sub = (*f)[i];
        json keep = sub.is_object() ? json::object() : sub;
        if (const json* c = at(sub, "deviceClassName")) keep["deviceClassName"] = *c;
        subs.push_back(std::move(keep));
      }
      one["firstAvailable"] = std::move(subs);
    }
    return one;
  };
  if (const json* s = at(claim, "spec")) {
    if (const json* d = at(*s, "devices")) {
      if (const json* r = at(*d, "requests")) {
        json reqs = r->is_array() ? json::array() : *r;
        for (std::size_t i = 0; r->is_array() && i < r->size(); ++i) reqs.push_back(slim_request((*r)[i]));
        out["spec"]["devices"]["requests"] = std::move(reqs);
      }
    }
  }
  if (const json* st = at(claim, "status")) {
    if (const json* a = at(*st, "allocation")) {
      if (const json* d = at(*a, "devices")) {
        if (const json* r = at(*d, "results")) out["status"]["allocation"]["devices"]["results"] = *r;
      }
      if (!out.contains("status")) out["status"]["allocation"] = json::object();
    }
  }
  return out;
}

void apply_claims(PodInfo& pod, const std::vector<const ClaimInfo*>& claims) {
  if (!chips_from_claims(pod) || !pod.job_error.empty()) return;
  int chips = 0;
  for (std::size_t i = 0; i < claims.size() && i < pod.claims.size(); ++i) {
    const ClaimInfo* c = claims[i];
    if (c == nullptr) {
      pod.job_error = "ResourceClaim " + pod.ns + "/" + pod.claims[i] +
                      " is not in the scheduler's cache yet (it is tried again)";
      return;
    }
    if (!c->unplannable.empty()) {
      pod.job_error = "ResourceClaim " + c->key() + ": " + c->unplannable;
      return;
    }
    chips += c->chips;
  }
  if (chips < 1) return;  // no chip asked: filter_job says what a job pod must ask
  if (chips > 4096) {
    pod.job_error =
        "the pod's ResourceClaims ask for " + std::to_string(chips) + " chips, more than any node has";
    return;
  }
  pod.resource = kResource910;
  pod.chips = chips;
}

}  // namespace ascend::scheduler
