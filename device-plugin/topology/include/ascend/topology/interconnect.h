// The interconnect of a chip's servers as data, level by level, for the collective model (collective.h):
// die to die (A3's SIO), chip to chip inside a domain (HCCS, NVLink), domain to domain inside a server
// (PCIe, 910 A1 and 300I Duo), the server NIC, the leaf and the spine. Each level: links per chip, GB/s per
// link (one direction), latency per hop and the fabric's shape. A chip file carries it under `interconnect`
// (docs/scheduler.md, "The step model"); a level the file leaves out falls back to the cost model's single
// bandwidth of that level with no latency. A level's `efficiency` is the fraction of its line rate the
// collective library's protocol reaches (NCCL's ~20% overhead on NVLink, docs/planner-collectives.md). Pure
// values and functions; thread-safe.
#pragma once

#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "ascend/common/error.h"
#include "ascend/topology/cluster.h"

namespace ascend::topology {

// full_mesh: a link to every peer (HCCS on an Atlas 800T A2), switch: every link to a switch (NVSwitch, a
// RoCE leaf), ring: a link to each neighbour (HCCS on a 910 A1 ring of four).
enum class Fabric { kFullMesh, kSwitch, kRing };
std::string_view to_string(Fabric f);

// The collective library whose algorithms price the groups: HCCL (Ascend) or NCCL (NVIDIA).
enum class Library { kHccl, kNccl };
std::string_view to_string(Library l);

struct LinkLevel {
  bool present = false;
  int links = 1;          // per chip at this level
  double link_gbps = 0;   // GB/s per link and direction (1 GB = 1e9 bytes)
  double latency_us = 0;  // per hop; 0 where not published
  Fabric fabric = Fabric::kSwitch;
  double efficiency = 1;  // the fraction of link_gbps the library's transfers reach, (0, 1]
};

struct Interconnect {
  Library library = Library::kHccl;
  LinkLevel die;     // sio
  LinkLevel domain;  // hccs
  LinkLevel server;  // pcie
  LinkLevel nic;     // a chip's share of the server's NICs; caps every level above
  LinkLevel leaf;
  LinkLevel spine;  // and core
  bool present() const { return domain.present || nic.present; }
};

// What one chip sees at one level: its effective bandwidth (all its links, times the level's efficiency), the
// effective per-link bandwidth and the number of links (for a full mesh: one per peer), the latency of a hop
// and the shape.
struct Link {
  double bytes_per_s = 0;
  double link_bytes_per_s = 0;
  int links = 1;
  double alpha_s = 0;
  Fabric fabric = Fabric::kSwitch;
};

// The link of `level`: its interconnect entry (leaf, spine and core capped by the NIC, their latency the
// NIC's plus each switch tier's), or `fallback`'s bandwidth for that level.
Link link_at(const Interconnect& ic, Level level, const Bandwidth& fallback);

// The `interconnect` object of a chip file. Throws detail::FieldError (the chip reader turns it into Error).
Interconnect interconnect_from_json(const nlohmann::json& j, const FieldPath& path);

}  // namespace ascend::topology
