#include "ascend/topology/interconnect.h"

#include <algorithm>
#include <limits>

#include "reader.h"

namespace ascend::topology {

using nlohmann::json;

std::string_view to_string(Fabric f) {
  switch (f) {
    case Fabric::kFullMesh:
      return "full_mesh";
    case Fabric::kSwitch:
      return "switch";
    case Fabric::kRing:
      return "ring";
  }
  return "switch";
}

std::string_view to_string(Library l) {
  return l == Library::kNccl ? "nccl" : "hccl";
}

namespace {

Link from_fallback(Level level, const Bandwidth& fallback) {
  Link l;
  l.bytes_per_s = l.link_bytes_per_s = fallback.bytes_per_s(level);
  return l;
}

Link from_level(const LinkLevel& lv) {
  Link l;
  l.link_bytes_per_s = lv.link_gbps * 1e9 * lv.efficiency;
  l.links = lv.links;
  l.bytes_per_s = l.link_bytes_per_s * lv.links;
  l.alpha_s = lv.latency_us * 1e-6;
  l.fabric = lv.fabric;
  return l;
}

// Leaving the server: the NIC's bandwidth, capped by every switch tier crossed that is described; the
// latency of the NIC plus each tier. Without a NIC entry the fallback's figure for the level.
Link across_servers(const Interconnect& ic, Level level, const Bandwidth& fallback) {
  if (!ic.nic.present) return from_fallback(level, fallback);
  Link l = from_level(ic.nic);
  l.fabric = Fabric::kSwitch;
  auto cap = [&l](const LinkLevel& tier) {
    if (!tier.present) return;
    l.bytes_per_s = std::min(l.bytes_per_s, tier.link_gbps * 1e9 * tier.efficiency * tier.links);
    l.alpha_s += tier.latency_us * 1e-6;
  };
  cap(ic.leaf);
  if (level != Level::kLeaf) cap(ic.spine);
  return l;
}

}  // namespace

Link link_at(const Interconnect& ic, Level level, const Bandwidth& fallback) {
  const LinkLevel* inside = nullptr;
  switch (level) {
    case Level::kSio:
      inside = &ic.die;
      break;
    case Level::kHccs:
      inside = &ic.domain;
      break;
    case Level::kPcie:
      inside = &ic.server;
      break;
    case Level::kLeaf:
    case Level::kSpine:
    case Level::kCore:
      return across_servers(ic, level, fallback);
  }
  return inside != nullptr && inside->present ? from_level(*inside) : from_fallback(level, fallback);
}

namespace {

Fabric parse_fabric(const std::string& s, const FieldPath& path) {
  for (Fabric f : {Fabric::kFullMesh, Fabric::kSwitch, Fabric::kRing}) {
    if (s == to_string(f)) return f;
  }
  detail::fail(path, "unknown fabric '" + s + "' (use full_mesh, switch or ring)");
}

LinkLevel level_from_json(detail::ObjectReader& parent, const char* key) {
  LinkLevel lv;
  const json* j = parent.find(key);
  if (j == nullptr) return lv;
  detail::ObjectReader r(*j, parent.path(key));
  lv.present = true;
  lv.links = static_cast<int>(r.integer("links", 1, 1024, 1));
  lv.link_gbps = r.positive("link_gbps");
  lv.latency_us = r.non_negative("latency_us", 0.0);
  lv.fabric = parse_fabric(r.string("fabric", std::string("switch")), r.path("fabric"));
  lv.efficiency = r.positive("efficiency", 1.0);
  if (lv.efficiency > 1)
    detail::fail(r.path("efficiency"), "must be in (0, 1]: the fraction of link_gbps reached");
  r.done();
  return lv;
}

}  // namespace

Interconnect interconnect_from_json(const json& j, const FieldPath& path) {
  detail::ObjectReader r(j, path);
  Interconnect ic;
  std::string library = r.string("library", std::string("hccl"));
  if (library == "nccl") {
    ic.library = Library::kNccl;
  } else if (library != "hccl") {
    detail::fail(r.path("library"), "unknown library '" + library + "' (use hccl or nccl)");
  }
  ic.die = level_from_json(r, "die");
  ic.domain = level_from_json(r, "domain");
  ic.server = level_from_json(r, "server");
  ic.nic = level_from_json(r, "nic");
  ic.leaf = level_from_json(r, "leaf");
  ic.spine = level_from_json(r, "spine");
  r.done();
  if (!ic.present()) detail::fail(path, "describe at least `domain` or `nic`");
  return ic;
}

}  // namespace ascend::topology
