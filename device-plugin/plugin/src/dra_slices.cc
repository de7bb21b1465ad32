#include "ascend/plugin/dra_slices.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>

#include "ascend/npu/vnpu_load.h"

namespace ascend::plugin::dra {

using nlohmann::json;

namespace {

std::string label_of(const json& node, const char* key) {
  const json* labels = nullptr;
  if (node.is_object() && node.contains("metadata") && node["metadata"].is_object() &&
      node["metadata"].contains("labels") && node["metadata"]["labels"].is_object())
    labels = &node["metadata"]["labels"];
  if (labels == nullptr) return "";
  auto it = labels->find(key);
  return it != labels->end() && it->is_string() ? it->get<std::string>() : "";
}

std::string meta_string(const json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains("metadata") || !obj["metadata"].is_object()) return "";
  auto it = obj["metadata"].find(key);
  return it != obj["metadata"].end() && it->is_string() ? it->get<std::string>() : "";
}

// A quantity in the API server's canonical form (it answers "64Gi" for "65536Mi"): the slices compare
// equal to what the server lists.
std::string mebibytes(long long mb) {
  if (mb > 0 && mb % (1024LL * 1024) == 0) return std::to_string(mb / (1024LL * 1024)) + "Ti";
  if (mb > 0 && mb % 1024 == 0) return std::to_string(mb / 1024) + "Gi";
  return std::to_string(mb) + "Mi";
}

// A decimal quantity in the API server's canonical form: whole numbers plain, fractions in milli-units
// (an A1's PNGD of 1.5 is "1500m").
std::string decimal(double v) {
  const auto milli = std::llround(v * 1000);
  if (milli % 1000 == 0) return std::to_string(milli / 1000);
  return std::to_string(milli) + "m";
}

json str(const std::string& v) {
  return {{"string", v}};
}
json num(long long v) {
  return {{"int", v}};
}

// What one device says, for comparison with the API server's copy (which may add fields of its own).
json device_key(const json& d) {
  json k = json::object();
  for (const char* f : {"name", "attributes", "capacity", "consumesCounters"}) {
    if (d.is_object() && d.contains(f)) k[f] = d[f];
  }
  return k;
}

// One resource the vNPU capacity rule counts: the counter's name, the template's and the chip's amounts
// (negative: the chip does not limit it).
struct Resource {
  const char* name;
  double (*of_template)(const npu::VnpuTemplate&);
  double (*of_chip)(const npu::VnpuCapacity&);
};
constexpr Resource kResources[] = {
    {"aicore", [](const npu::VnpuTemplate& t) -> double { return t.aicore; },
     [](const npu::VnpuCapacity& c) -> double { return c.aicore; }},
    {"memory", [](const npu::VnpuTemplate& t) -> double { return t.memory_mb; },
     [](const npu::VnpuCapacity& c) -> double { return c.memory_gb < 0 ? -1.0 : c.memory_gb * 1024.0; }},
    {"aicpu", [](const npu::VnpuTemplate& t) { return t.aicpu; },
     [](const npu::VnpuCapacity& c) -> double { return c.aicpu; }},
    {"vpc", [](const npu::VnpuTemplate& t) -> double { return t.vpc; },
     [](const npu::VnpuCapacity& c) -> double { return c.vpc; }},
    {"venc", [](const npu::VnpuTemplate& t) -> double { return t.venc; },
     [](const npu::VnpuCapacity& c) -> double { return c.venc; }},
    {"vdec", [](const npu::VnpuTemplate& t) -> double { return t.vdec; },
     [](const npu::VnpuCapacity& c) -> double { return c.vdec; }},
    {"jpegd", [](const npu::VnpuTemplate& t) -> double { return t.jpegd; },
     [](const npu::VnpuCapacity& c) -> double { return c.jpegd; }},
    {"jpege", [](const npu::VnpuTemplate& t) -> double { return t.jpege; },
     [](const npu::VnpuCapacity& c) -> double { return c.jpege; }},
    {"pngd", [](const npu::VnpuTemplate& t) { return t.pngd; },
     [](const npu::VnpuCapacity& c) -> double { return c.pngd; }},
};
constexpr std::size_t kAicore = 0;
constexpr std::size_t kMemory = 1;

// A counter's value as a quantity: memory (MiB in the seam) as bytes with a binary suffix, the rest as
// plain numbers.
std::string quantity(std::size_t resource, double v) {
  return resource == kMemory ? mebibytes(std::llround(v)) : decimal(v);
}

// The resources (indexes into kResources) that get a counter on `host`'s chips (chip_counters says which).
std::vector<std::size_t> counted(const npu::DeviceSnapshot& host) {
  const auto& cap = host.vnpu_capacity;
  std::vector<std::size_t> out;
  for (std::size_t r : {kAicore, kMemory}) {
    if (kResources[r].of_chip(cap) >= 0) out.push_back(r);
  }
  for (std::size_t r = 2; r < std::size(kResources); ++r) {
    const double total = kResources[r].of_chip(cap);
    if (total < 0) continue;  // NA: not limited
    const auto share = [&](std::size_t i, const npu::VnpuTemplate& t) {
      const double all = kResources[i].of_chip(cap);
      const double need = kResources[i].of_template(t);
      if (need <= 0) return 0.0;
      return all > 0 ? need / all : HUGE_VAL;
    };
    // Never the first to run out when, for every template, its share is at most the AICores' share (or,
    // for every template, at most the memory's): then any set of vNPUs within the AICores (the memory)
    // is within it too.
    bool under_aicore = true;
    bool under_memory = true;
    for (const auto& t : host.templates) {
      if (max_instances(t, cap) == 0) continue;  // never published
      const double s = share(r, t);
      under_aicore = under_aicore && s <= share(kAicore, t) + 1e-9;
      under_memory = under_memory && s <= share(kMemory, t) + 1e-9;
    }
    if (!under_aicore && !under_memory) out.push_back(r);
  }
  return out;
}

json attributes_of(const npu::DeviceSnapshot& host, const npu::Chip& c, bool healthy, const SliceNode& node) {
  json attrs = {
      {"model", str(c.name)},
      {"family", str(std::string(npu::to_string(host.family)))},
      {"phyId", num(c.phy_id)},
      {"logicId", num(c.logic_id)},
      {"cardId", num(c.card_id)},
      {"chipIndex", num(c.chip_index)},
      {"aicoreCount", num(c.aicore_count)},
      {"hbmMiB", num(c.hbm_total_mb)},
      {"numaNode", num(c.numa_node)},
      {"healthy", {{"bool", healthy}}},
  };
  // Optional facts: absent rather than empty, so that a CEL test on them is false, not "".
  if (!host.driver_version.empty()) attrs["driverVersion"] = str(host.driver_version);
  if (c.hccs_domain >= 0) attrs["hccsDomain"] = num(c.hccs_domain);
  if (!c.bus_id.empty()) attrs["pcieBus"] = str(c.bus_id);
  if (!c.device_ip.empty()) attrs["deviceIp"] = str(c.device_ip);
  if (!node.leaf.empty()) attrs["leaf"] = str(node.leaf);
  if (!node.spine.empty()) attrs["spine"] = str(node.spine);
  return attrs;
}

json counter_map(const std::vector<std::pair<std::string, std::string>>& values) {
  json m = json::object();
  for (const auto& [name, value] : values) m[name] = {{"value", value}};
  return m;
}

// A vNPU template's device on chip `c`: the chip's facts, its own size, its share of the chip's counters.
json vnpu_device(const npu::DeviceSnapshot& host, const npu::Chip& c, const npu::VnpuTemplate& t, int k,
                 bool healthy, const SliceNode& node, const std::vector<std::size_t>& counters) {
  json attrs = attributes_of(host, c, healthy, node);
  attrs[kVnpuTemplateAttribute] = str(t.name);
  attrs["aicoreCount"] = num(t.aicore);  // the vNPU's own, not the chip's
  attrs["hbmMiB"] = num(t.memory_mb);
  json capacity = {{"aicore", {{"value", std::to_string(t.aicore)}}}};
  if (t.memory_mb > 0) capacity["memory"] = {{"value", mebibytes(t.memory_mb)}};
  std::vector<std::pair<std::string, std::string>> uses;
  for (std::size_t r : counters) {
    const double need = kResources[r].of_template(t);
    if (need > 0) uses.emplace_back(kResources[r].name, quantity(r, need));
  }
  return {{"name", vnpu_device_name(c.phy_id, t.name, k)},
          {"attributes", std::move(attrs)},
          {"capacity", std::move(capacity)},
          {"consumesCounters",
           json::array({{{"counterSet", device_name(c.phy_id)}, {"counters", counter_map(uses)}}})}};
}

// One chip's part of a slice: its counter set (none without counters) and its devices.
struct ChipPart {
  std::optional<json> counter_set;  // none without counters (so the struct is made and moved without a throw)
  std::vector<json> devices;
  std::size_t counters = 0;         // in the counter set
  std::size_t device_counters = 0;  // consumed, summed over its devices
};

ChipPart chip_part(const npu::DeviceSnapshot& host, const npu::Chip& c, bool healthy, const SliceNode& node,
                   SliceVnpus vnpus, const std::vector<std::size_t>& counters) {
  ChipPart p;
  p.devices.push_back(chip_device(host, c, healthy, node));
  if (vnpus == SliceVnpus::kNone || counters.empty()) return p;
  std::vector<std::pair<std::string, std::string>> all;
  all.reserve(counters.size());
  for (std::size_t r : counters)
    all.emplace_back(kResources[r].name, quantity(r, kResources[r].of_chip(host.vnpu_capacity)));
  p.counter_set = json{{"name", device_name(c.phy_id)}, {"counters", counter_map(all)}};
  p.counters = all.size();
  p.devices[0]["consumesCounters"] =
      json::array({{{"counterSet", device_name(c.phy_id)}, {"counters", counter_map(all)}}});
  p.device_counters = all.size();
  if (vnpus != SliceVnpus::kTemplates) return p;
  for (const auto& t : host.templates) {
    const int n = max_instances(t, host.vnpu_capacity);
    for (int k = 0; k < n && p.devices.size() < kMaxDevicesPerSlice; ++k) {
      p.devices.push_back(vnpu_device(host, c, t, k, healthy, node, counters));
      p.device_counters += p.devices.back()["consumesCounters"][0]["counters"].size();
    }
  }
  return p;
}

json slice_of(const SliceNode& node, std::size_t index, std::int64_t generation) {
  json meta = {{"name", slice_name(node.name, index)}};
  if (!node.uid.empty()) {
    meta["ownerReferences"] = json::array({{{"apiVersion", "v1"},
                                            {"kind", "Node"},
                                            {"name", node.name},
                                            {"uid", node.uid},
                                            {"controller", true}}});
  }
  return {{"apiVersion", kApiVersion},
          {"kind", "ResourceSlice"},
          {"metadata", std::move(meta)},
          {"spec",
           {{"driver", kDriver},
            {"nodeName", node.name},
            {"pool", {{"name", node.name}, {"generation", generation}, {"resourceSliceCount", 0}}},
            {"devices", json::array()}}}};
}

const json* spec_field(const json& slice, const char* key) {
  if (!slice.is_object() || !slice.contains("spec") || !slice["spec"].is_object()) return nullptr;
  auto it = slice["spec"].find(key);
  return it == slice["spec"].end() ? nullptr : &*it;
}

bool non_empty_array(const json* j) {
  return j != nullptr && j->is_array() && !j->empty();
}

}  // namespace

Result<VnpuDeviceRef> vnpu_of_device(const npu::DeviceSnapshot& host, std::string_view device) {
  const auto bad = [&](const std::string& why) {
    return Error::invalid("device \"" + std::string(device.substr(0, 64)) + "\" is not one of driver " +
                          kDriver + "'s vNPUs (npu-<phy id>-<template>-<k>): " + why);
  };
  if (!is_vnpu_device_name(device)) return bad("not of that form");
  const auto dash = device.substr(4).find('-');
  auto phy = deviceinfo::chip_of_device(device);
  if (!phy.ok()) return bad("no chip id");
  const auto last = device.rfind('-');
  const auto index_text = device.substr(last + 1);
  int index = -1;
  auto [end, ec] = std::from_chars(index_text.data(), index_text.data() + index_text.size(), index);
  if (index_text.empty() || ec != std::errc() || end != index_text.data() + index_text.size() ||
      (index_text.size() > 1 && index_text[0] == '0') || last <= 4 + dash)
    return bad("no instance number");
  for (const auto& t : host.templates) {
    if (vnpu_device_name(*phy, t.name, index) != device) continue;
    if (index >= max_instances(t, host.vnpu_capacity))
      return bad("template " + t.name + " has at most " +
                 std::to_string(max_instances(t, host.vnpu_capacity)) + " instances on a chip");
    return VnpuDeviceRef{*phy, t.name, index};
  }
  return bad("no template of this host has that name");
}

int max_instances(const npu::VnpuTemplate& t, const npu::VnpuCapacity& cap) {
  npu::VnpuLoad load;
  // A template of no resource at all would fit forever; the driver's id range is 16 vNPUs a chip.
  constexpr int kMaxVnpusPerChip = 16;
  int n = 0;
  while (n < kMaxVnpusPerChip && npu::vnpu_shortfall(load, t, cap).empty()) {
    load.add(t);
    ++n;
  }
  return n;
}

std::vector<Counter> chip_counters(const npu::DeviceSnapshot& host) {
  std::vector<Counter> out;
  for (std::size_t r : counted(host))
    out.push_back({kResources[r].name, quantity(r, kResources[r].of_chip(host.vnpu_capacity))});
  return out;
}

SliceNode slice_node(const json& node) {
  return {meta_string(node, "name"), meta_string(node, "uid"), label_of(node, kLeafLabel),
          label_of(node, kSpineLabel)};
}

std::string slice_name(const std::string& node, std::size_t index) {
  return node + "-" + kDriver + "-" + std::to_string(index);
}

json chip_device(const npu::DeviceSnapshot& host, const npu::Chip& c, bool healthy, const SliceNode& node) {
  json capacity = json::object();
  if (c.aicore_count > 0) capacity["aicore"] = {{"value", std::to_string(c.aicore_count)}};
  const long long memory = c.hbm_total_mb > 0 ? c.hbm_total_mb : c.mem_total_mb;  // 310P: on-chip DDR
  if (memory > 0) capacity["memory"] = {{"value", mebibytes(memory)}};
  json d = {{"name", device_name(c.phy_id)}, {"attributes", attributes_of(host, c, healthy, node)}};
  if (!capacity.empty()) d["capacity"] = std::move(capacity);
  return d;
}

std::vector<json> resource_slices(const npu::DeviceSnapshot& host, const std::set<int>& unusable,
                                  const SliceNode& node, std::int64_t generation, SliceVnpus vnpus) {
  const std::vector<std::size_t> counters =
      vnpus == SliceVnpus::kNone ? std::vector<std::size_t>{} : counted(host);
  std::vector<json> out;
  std::size_t counters_in = 0;
  std::size_t device_counters_in = 0;
  out.push_back(slice_of(node, 0, generation));
  for (const auto& c : host.chips) {
    ChipPart p = chip_part(host, c, unusable.count(c.phy_id) == 0, node, vnpus, counters);
    json* spec = &out.back()["spec"];
    // A chip whole in one slice (1.34: a device consumes counter sets of its own slice only).
    if ((*spec)["devices"].size() + p.devices.size() > kMaxDevicesPerSlice ||
        counters_in + p.counters > kMaxSharedCountersPerSlice ||
        device_counters_in + p.device_counters > kMaxDeviceCountersPerSlice) {
      out.push_back(slice_of(node, out.size(), generation));
      spec = &out.back()["spec"];
      counters_in = 0;
      device_counters_in = 0;
    }
    if (p.counter_set) (*spec)["sharedCounters"].push_back(std::move(*p.counter_set));
    for (auto& d : p.devices) (*spec)["devices"].push_back(std::move(d));
    counters_in += p.counters;
    device_counters_in += p.device_counters;
  }
  for (auto& s : out) s["spec"]["pool"]["resourceSliceCount"] = static_cast<std::int64_t>(out.size());
  return out;
}

bool has_counters(const json& slice) {
  return non_empty_array(spec_field(slice, "sharedCounters"));
}

bool counters_kept(const json& sent, const json& stored) {
  if (has_counters(sent) && !has_counters(stored)) return false;
  const json* sent_devices = spec_field(sent, "devices");
  const json* stored_devices = spec_field(stored, "devices");
  if (!non_empty_array(sent_devices)) return true;
  const auto consumes = [](const json& d) {
    return d.is_object() && d.contains("consumesCounters") && non_empty_array(&d["consumesCounters"]);
  };
  std::size_t wanted = 0;
  for (const auto& d : *sent_devices) wanted += consumes(d) ? 1 : 0;
  if (wanted == 0) return true;
  if (stored_devices == nullptr || !stored_devices->is_array()) return false;
  std::size_t kept = 0;
  for (const auto& d : *stored_devices) kept += consumes(d) ? 1 : 0;
  return kept == wanted;
}

bool slices_match(const std::vector<json>& have, const std::vector<json>& want) {
  if (have.size() != want.size()) return false;
  const auto key = [](const json& s) {
    json k = {{"name", meta_string(s, "name")}};
    const json spec = s.is_object() && s.contains("spec") ? s["spec"] : json::object();
    for (const char* f : {"driver", "nodeName"}) k[f] = spec.contains(f) ? spec[f] : json();
    k["sharedCounters"] = spec.contains("sharedCounters") ? spec["sharedCounters"] : json::array();
    k["pool"] = spec.contains("pool") && spec["pool"].is_object() && spec["pool"].contains("name")
                    ? spec["pool"]["name"]
                    : json();
    json devices = json::array();
    if (spec.contains("devices") && spec["devices"].is_array()) {
      for (const auto& d : spec["devices"]) devices.push_back(device_key(d));
    }
    k["devices"] = std::move(devices);
    return k;
  };
  std::vector<json> a, b;
  for (const auto& s : have) a.push_back(key(s));
  for (const auto& s : want) b.push_back(key(s));
  const auto by_name = [](const json& x, const json& y) { return x["name"] < y["name"]; };
  std::sort(a.begin(), a.end(), by_name);
  std::sort(b.begin(), b.end(), by_name);
  return a == b;
}

}  // namespace ascend::plugin::dra
