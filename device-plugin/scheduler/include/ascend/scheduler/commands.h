// The ascend-scheduler subcommands as functions from options to an exit code, writing to the given streams
// (so that tests can call them without a process). Exit codes: 0 ok, 1 an output file could not be written,
// 2 bad input (the message names the file, line and field), 3 infeasible ({"error": ...} on stdout).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "ascend/scheduler/server.h"
#include "ascend/topology/plan.h"

namespace ascend::scheduler {

inline constexpr int kExitOk = 0;
inline constexpr int kExitIo = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitInfeasible = 3;

struct PlaceOptions {
  std::string cluster;
  std::string job;
  std::string policy = "topo";
  std::string ranktable;  // output path, optional
  std::string svg;        // output path, optional
};
int run_place(const PlaceOptions& o, std::ostream& out, std::ostream& err);

struct SimulateOptions {
  std::string cluster;
  std::string trace;
  std::string policy = "topo";
  bool backfill = false;
  // --faults MTBF_HOURS[,SEED]: also replay with chip faults, pod and job recovery side by side.
  std::string faults;
  double checkpoint_minutes = 60;  // a job's checkpoint interval (its run time between checkpoints)
  double repair_hours = 4;         // a faulty chip's time out of service
  double restart_minutes = 5;      // from the new placement to training again
};
int run_simulate(const SimulateOptions& o, std::ostream& out, std::ostream& err);

struct PlanOptions {
  topology::PlanRequest request;
  std::string chip;  // a built-in chip name, or a chip file (contains '/' or ends in .yaml/.yml)
  std::string recompute = "none";
  std::string place;    // write the best layout's job file here (with cluster)
  std::string cluster;  // the cluster file to place it on
  bool json = false;
  bool explain = false;  // say which step-time term decided between the first two layouts
  std::string measured;  // CSV of measured step times: fit the model's factors to them, rank calibrated
};
int run_plan(const PlanOptions& o, std::ostream& out, std::ostream& err);

struct ServeCommand {
  ServeOptions server;
  std::string log_level = "info";
  std::string log_file;
};
// Serves until SIGINT/SIGTERM. Exit codes: 0 stopped cleanly, 1 cannot listen or persist, 2 bad input
// (cluster file, state file, token or TLS files, options).
int run_serve(const ServeCommand& o, std::ostream& err);

// `isolate`: takes chips out of service (or, with `clear`, back in) through the ManuallySeparateNPU key of
// their nodes' device ConfigMaps, which the device plugins follow (issue 23). Targets are "NODE/CHIP" (the
// physical chip id npu-smi shows).
struct IsolateOptions {
  std::vector<std::string> targets;
  bool clear = false;
  std::string kubeconfig, kube_api, kube_token_file, kube_ca_file;
};
int run_isolate(const IsolateOptions& o, std::ostream& out, std::ostream& err);

}  // namespace ascend::scheduler
