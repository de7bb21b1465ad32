// A picture of a placement: nodes as boxes grouped in rows by leaf switch, chips inside laid out as the
// hardware is (HCCS rings as rows on Ascend 910, cards as columns on A3 and 310P), each chip of the job
// coloured by its pipeline stage with its rank written on it, each TP group outlined (dashed red when it
// leaves its HCCS domain), busy and unhealthy chips greyed and crossed. Large clusters show only the leaves
// the job uses. Pure; thread-safe.
#pragma once

#include <string>

#include "ascend/topology/cluster.h"
#include "ascend/topology/job.h"
#include "ascend/topology/place.h"

namespace ascend::topology {

// `before` is the cluster state the job was placed into (free chips before placement).
std::string render_svg(const Cluster& c, const ClusterState& before, const Job& job, const Placement& p);

}  // namespace ascend::topology
