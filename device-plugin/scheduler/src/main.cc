// ascend-scheduler: places training jobs on an Ascend cluster (place), replays job traces (simulate) and
// plans the parallel layout of a model (plan). Thin CLI over ascend_topology.
#include <CLI/CLI.hpp>
#include <iostream>

#include "ascend/scheduler/commands.h"

namespace {

constexpr const char* kFooter = R"(
Exit codes: 0 ok; 1 an output file could not be written; 2 bad input (the message names the file, line and
field) or bad usage; 3 infeasible: the job does not fit, or no layout fits ({"error": ...} on stdout).
Policies: topo (ours: whole-job, parallelism-aware), first-fit (first free chips in node order), volcano
(Volcano's Ascend node-local affinity rules, one pod at a time). File formats and the cost model: README.)";

}  // namespace

int main(int argc, char** argv) {
  using namespace ascend::scheduler;
  CLI::App app{"ascend-scheduler: parallelism-aware placement of training jobs on Ascend NPU clusters"};
  app.footer(kFooter);
  app.require_subcommand(1);

  PlaceOptions place;
  auto* pl = app.add_subcommand("place", "place one job; print the placement JSON");
  pl->add_option("--cluster", place.cluster, "cluster file (YAML)")->required();
  pl->add_option("--job", place.job, "job file (YAML)")->required();
  pl->add_option("--policy", place.policy, "topo | first-fit | volcano")->default_val("topo");
  pl->add_option("--ranktable", place.ranktable, "write the HCCL rank table (JSON) here");
  pl->add_option("--svg", place.svg, "write a picture of the placement (SVG) here");
  pl->footer(kFooter);

  SimulateOptions sim;
  auto* si = app.add_subcommand("simulate", "replay a job trace; print queueing and placement statistics");
  si->add_option("--cluster", sim.cluster, "cluster file (YAML)")->required();
  si->add_option("--trace", sim.trace, "trace file (YAML)")->required();
  si->add_option("--policy", sim.policy, "topo | first-fit | volcano")->default_val("topo");
  si->add_flag("--backfill", sim.backfill,
               "let later jobs start ahead of a blocked head job when they end first");
  si->footer(kFooter);

  PlanOptions plan;
  auto& r = plan.request;
  auto& m = r.model;
  auto* pn = app.add_subcommand(
      "plan", "rank every tp x pp x dp x v layout of N NPUs by memory fit and predicted step time");
  pn->add_option("--npus", r.npus, "number of NPUs (N)")->required()->check(CLI::PositiveNumber);
  pn->add_option("--chip", plan.chip,
                 "chip (910ProA, 910B1-910B4, 910C, 310P3, or a family or profile name), or a chip file "
                 "(YAML: name, hbm_gib, peak_tflops_bf16, chips_per_node, bandwidth_gbps: {intra_node, "
                 "inter_node})")
      ->required();
  pn->add_option("--params", m.params, "model parameters, e.g. 70e9")->required()->check(CLI::PositiveNumber);
  pn->add_option("--layers", m.layers, "transformer layers (L)")->required()->check(CLI::PositiveNumber);
  pn->add_option("--hidden", m.hidden, "hidden size (h)")->required()->check(CLI::PositiveNumber);
  pn->add_option("--heads", m.heads, "attention heads (a); tp must divide them")
      ->required()
      ->check(CLI::PositiveNumber);
  pn->add_option("--seq-len", m.seq_len, "sequence length (s)")->required()->check(CLI::PositiveNumber);
  pn->add_option("--vocab", m.vocab,
                 "vocabulary (V): embedding on the first stage, output layer on the last (default 0: none)")
      ->check(CLI::NonNegativeNumber);
  pn->add_option("--micro-batch", m.micro_batch, "micro-batch size (b)")
      ->default_val(1)
      ->check(CLI::PositiveNumber);
  pn->add_option("--global-batch", m.global_batch, "sequences per step (default: max(1024, N x b))")
      ->check(CLI::PositiveNumber);
  pn->add_flag("--optimizer-parallel", r.train.optimizer_parallel,
               "shard optimizer states over data parallelism (ZeRO-1, MindSpeed's distributed optimizer)");
  pn->add_flag("--sequence-parallel", r.train.sequence_parallel,
               "shard the layers' norm and dropout activations over tp (Megatron sequence parallelism)");
  pn->add_option("--recompute", plan.recompute, "activation recomputation: none | selective | full")
      ->default_val("none");
  pn->add_option("--virtual-stages", r.virtual_stages,
                 "interleaved pipeline: only this v (default: 1 and every v that splits the layers evenly)")
      ->check(CLI::PositiveNumber);
  pn->add_option("--efficiency", r.efficiency, "fraction of the chip's peak the layers reach")
      ->default_val(ascend::topology::kDefaultEfficiency)
      ->check(CLI::Range(0.01, 1.0));
  pn->add_flag("--allow-tp-across-nodes", r.allow_tp_across_nodes,
               "also consider tensor-parallel groups larger than one node");
  auto* cluster_opt = pn->add_option("--cluster", plan.cluster, "cluster file (YAML) for --place");
  pn->add_option("--place", plan.place,
                 "place the best layout that fits --cluster with topo; write its job file (YAML) here")
      ->needs(cluster_opt);
  cluster_opt->needs("--place");
  pn->add_flag("--json", plan.json, "print JSON instead of a table");
  pn->footer(kFooter);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kExitBadInput;
  }
  if (*pl) return run_place(place, std::cout, std::cerr);
  if (*si) return run_simulate(sim, std::cout, std::cerr);
  return run_plan(plan, std::cout, std::cerr);
}
