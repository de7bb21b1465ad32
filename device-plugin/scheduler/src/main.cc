// ascend-scheduler: places training jobs on an Ascend cluster (place), replays job traces (simulate), plans
// the parallel layout of a model (plan), serves kube-scheduler as an extender (serve) and isolates chips
// (isolate). Thin CLI over ascend_topology and the extender library.
#include <CLI/CLI.hpp>
#include <iostream>

#include "ascend/common/main_guard.h"
#include "ascend/scheduler/commands.h"

namespace {

constexpr const char* kFooter = R"(
Exit codes: 0 ok; 1 an output file could not be written (serve: cannot listen or persist; isolate: the API
server refused or failed), or an internal error; 2 bad input (the message names the file, line and field; isolate:
no such node, ConfigMap or chip) or bad usage; 3 infeasible: the job does not fit, or no layout fits ({"error": ...} on stdout).
Policies: topo (ours: whole-job, parallelism-aware), first-fit (first free chips in node order), volcano
(Volcano's Ascend node-local affinity rules, one pod at a time). File formats and the cost model:
docs/scheduler.md.)";

}  // namespace

static int run_main(int argc, char** argv) {
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
  si->add_option("--faults", sim.faults,
                 "MTBF_HOURS[,SEED]: also inject chip faults at that mean time between faults per chip "
                 "(seeded, deterministic) and report lost chip-hours and goodput with pod and job recovery");
  si->add_option("--checkpoint-minutes", sim.checkpoint_minutes,
                 "with --faults: a job's checkpoint interval; a fault loses the work since the last")
      ->default_val(60)
      ->check(CLI::PositiveNumber);
  si->add_option("--repair-hours", sim.repair_hours, "with --faults: a faulty chip's time out of service")
      ->default_val(4)
      ->check(CLI::NonNegativeNumber);
  si->add_option("--restart-minutes", sim.restart_minutes,
                 "with --faults: from a recovered job's new placement to training again")
      ->default_val(5)
      ->check(CLI::NonNegativeNumber);
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
  pn->add_flag(
      "--explain", plan.explain,
      "say which step-time term (compute, bubble, tp, pp, dp_exposed) decided between the first two");
  pn->add_option(
      "--measured", plan.measured,
      "CSV of measured step times (columns tp, pp, dp, step_seconds, optional v, micro_batch): fit "
      "the compute efficiency and a communication factor to them, rank every layout calibrated");
  pn->footer(kFooter);

  ServeCommand serve;
  auto& so = serve.server;
  double ttl_s = 300;
  auto* sv =
      app.add_subcommand("serve", "kube-scheduler extender: place whole jobs, hand each pod its chips");
  sv->add_option("--cluster", so.cluster, "cluster file (YAML), as place reads it")->required();
  sv->add_option("--listen", so.listen,
                 "HOST:PORT for the device plugins, the views and /healthz, /readyz, /metrics (port 0: any "
                 "free port)")
      ->default_val(so.listen);
  sv->add_option(
        "--extender-listen", so.extender_listen,
        "HOST:PORT for kube-scheduler's verbs (filter, prioritize, bind): a loopback address, or any "
        "with the three --extender-tls options")
      ->default_val(so.extender_listen);
  sv->add_option("--state", so.state, "keep reservations and bindings in this file (atomic writes)");
  sv->add_option("--tls-cert", so.tls_cert, "serve HTTPS on --listen with this certificate (PEM)");
  sv->add_option("--tls-key", so.tls_key, "the certificate's private key (PEM)");
  sv->add_option("--extender-tls-cert", so.extender_tls_cert,
                 "serve HTTPS on --extender-listen with this certificate (PEM)");
  sv->add_option("--extender-tls-key", so.extender_tls_key, "its private key (PEM)");
  sv->add_option("--extender-client-ca", so.extender_client_ca,
                 "serve --extender-listen only to clients with a certificate from this CA (PEM)");
  sv->add_option("--token-file", so.token_file,
                 "bearer token required on --listen for everything but /healthz, /readyz and /metrics "
                 "(default: loopback peers only)");
  sv->add_option("--kubeconfig", so.kubeconfig,
                 "API server from a kubeconfig file (its current context); the scheduler then watches pods, "
                 "Nodes and ConfigMaps there and keeps its records there (docs/scheduler.md: Records in the "
                 "API server)");
  sv->add_option("--kube-api", so.kube_api, "API server URL (instead of --kubeconfig)");
  sv->add_option("--kube-token-file", so.kube_token_file, "bearer token for --kube-api");
  sv->add_option("--kube-ca-file", so.kube_ca_file, "CA bundle to verify an https --kube-api");
  sv->add_flag("--no-kube", so.no_kube,
               "no API server, even in a cluster (default: in a pod, the in-cluster service account)");
  sv->add_option("--instance", so.instance,
                 "this replica's name in Events (default: $POD_NAME, else the host name)");
  sv->add_option("--reservation-ttl", ttl_s, "seconds a reservation waits for its pod to be bound")
      ->default_val(300)
      ->check(CLI::PositiveNumber);
  sv->add_option("--max-body", so.max_body, "largest request body in bytes")->default_val(so.max_body);
  sv->add_option("--threads", so.threads, "HTTP worker threads (0: the library's default)")->default_val(0);
  sv->add_option("--log-level", serve.log_level, "trace|debug|info|warn|error|off")->default_val("info");
  sv->add_option("--log-file", serve.log_file, "also log to this file");
  sv->footer(kFooter);

  IsolateOptions iso;
  auto* is = app.add_subcommand(
      "isolate",
      "take chips out of service until cleared (ManuallySeparateNPU in their nodes' device ConfigMaps), or "
      "put them back with --clear");
  is->add_option("targets", iso.targets, "NODE/CHIP, the chip's physical id (e.g. node-1/3)")->required();
  is->add_flag("--clear", iso.clear, "put the chips back in service (their device plugin clears them)");
  is->add_option("--kubeconfig", iso.kubeconfig, "API server from a kubeconfig file (its current context)");
  is->add_option("--kube-api", iso.kube_api, "API server URL (instead of --kubeconfig)");
  is->add_option("--kube-token-file", iso.kube_token_file, "bearer token for --kube-api");
  is->add_option("--kube-ca-file", iso.kube_ca_file, "CA bundle to verify an https --kube-api");
  is->footer(kFooter);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kExitBadInput;
  }
  try {
    if (*pl) return run_place(place, std::cout, std::cerr);
    if (*si) return run_simulate(sim, std::cout, std::cerr);
    if (*is) return run_isolate(iso, std::cout, std::cerr);
    if (*sv) {
      so.reservation_ttl = std::chrono::milliseconds(static_cast<long long>(ttl_s * 1000));
      return run_serve(serve, std::cerr);
    }
    return run_plan(plan, std::cout, std::cerr);
  } catch (const std::exception& e) {  // last resort: one line, never an abort
    std::cerr << "ascend-scheduler: internal error: " << e.what() << "\n";
    return kExitIo;
  }
}

int main(int argc, char** argv) {
  return ascend::guarded_main(
      "ascend-scheduler", [&] { return run_main(argc, argv); }, ascend::scheduler::kExitIo);
}
