// Reading the scheduler's input files: YAML parsed with yaml-cpp, handed to the topology library as JSON,
// with a line locator so that a validation error names the file, the line and the field. Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/topology/chip.h"
#include "ascend/topology/cluster.h"
#include "ascend/topology/job.h"
#include "ascend/topology/simulate.h"

namespace ascend::scheduler {

// A cluster file. Profiles are built-in names, or YAML profile files relative to the cluster file.
Result<topology::Cluster> load_cluster(const std::string& path);
Result<topology::Job> load_job(const std::string& path);
Result<std::vector<topology::TraceJob>> load_trace(const std::string& path);
// A chip file (`plan --chip FILE.yaml`).
Result<topology::ChipSpec> load_chip(const std::string& path);

}  // namespace ascend::scheduler
