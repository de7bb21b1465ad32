// The training-step model behind `plan`: per-NPU memory of a (tp, pp, dp, v) layout and its predicted step
// time (compute, pipeline bubble, tensor-parallel collectives, pipeline sends, exposed data-parallel
// gradient reduction). Every formula, its source and its assumptions are in docs/scheduler.md ("The step
// model"). Pure functions of plain values; thread-safe.
//
// Symbols: P params, L layers, h hidden, a heads, s sequence, V vocabulary, b micro-batch, B global batch
// (sequences per step), t/p/d tensor/pipeline/data parallel sizes, v virtual stages per pipeline rank,
// m = B/(b d) micro-batches per pipeline per step.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "ascend/common/error.h"

namespace ascend::topology {

enum class Recompute { kNone, kSelective, kFull };
std::string_view to_string(Recompute r);  // "none", "selective", "full"
Result<Recompute> parse_recompute(std::string_view s);

struct ModelShape {
  double params = 0;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int seq_len = 0;
  int vocab = 0;  // 0: no embedding or output layer is modelled (all params in the layers)
  int micro_batch = 1;
  int global_batch = 0;
};

struct TrainOptions {
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  bool optimizer_parallel = false;  // ZeRO-1 / distributed optimizer: optimizer states sharded over dp
};

struct Layout {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int v = 1;  // virtual stages (interleaved 1F1B) per pipeline rank
};

// m = B / (b d), rounded down (callers check divisibility).
int micro_batches(const ModelShape& m, const Layout& l);

// Layers on pipeline stage `stage` (0-based): L/p each, the first L mod p stages one more.
int stage_layers(int layers, int pp, int stage);

// Parameters held by one NPU of `stage` (its layers, plus the embedding on the first stage and the output
// layer on the last, each V h), divided by t.
double stage_params(const ModelShape& m, const Layout& l, int stage);

// Activation bytes one layer keeps for one micro-batch (Korthikanti et al. 2022, Table 2).
double activation_bytes_per_layer(const ModelShape& m, const TrainOptions& o, int tp);

// Micro-batches whose activations `stage` holds at its peak, in units of the stage's layers:
// 1F1B min(p - stage, m); interleaved (v > 1) min(2(p - stage - 1) + (v - 1) p + 1, m v) / v.
double in_flight(int pp, int v, int micro_batches, int stage);

struct Memory {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;
  double activations = 0;
  double total = 0;
  int stage = 0;         // the pipeline stage this is (the largest one for peak_memory)
  double in_flight = 0;  // micro-batches held (in units of the stage's layers)
};

Memory stage_memory(const ModelShape& m, const TrainOptions& o, const Layout& l, int stage);
// The largest of the first and last stage (every other stage holds less than the first).
Memory peak_memory(const ModelShape& m, const TrainOptions& o, const Layout& l);

// Forward FLOPs of one micro-batch: one layer (2 b s P_layer + 4 b s^2 h) and the output layer (2 b s h V).
double layer_forward_flops(const ModelShape& m);
double logits_forward_flops(const ModelShape& m);
// Extra forward FLOPs one layer spends recomputing, per micro-batch: full = the layer, selective = the
// attention core (4 b s^2 h), none = 0.
double recompute_flops(const ModelShape& m, Recompute r);
// Model FLOPs of one step (forward and backward, no recompute): 3 (B/b) (L layer + logits).
double model_flops_per_step(const ModelShape& m);

// Bytes per NPU per step of each traffic kind, as the cost model takes them (job.comm): tp = the
// collectives of the slowest stage on the critical path, pp = the sends between neighbours, dp = the
// gradient bytes of the largest stage (one all-reduce).
struct Volumes {
  double tp = 0;
  double pp = 0;
  double dp = 0;
};
Volumes step_volumes(const ModelShape& m, const TrainOptions& o, const Layout& l);

// Seconds the placement needs for each kind of traffic (the cost model's cost.tp, .pp, .dp for `Volumes`).
struct CommTime {
  double tp = 0;
  double pp = 0;
  double dp = 0;  // one full all-reduce of the gradients
};

// With ZeRO-1, the gradients' reduce-scatter and the updated weights' all-gather, when the collective model
// prices them apart; without, each is half of CommTime::dp.
struct ZeroComm {
  double reduce_scatter = 0;
  double all_gather = 0;
};

struct StepTime {
  double compute = 0;
  double bubble = 0;
  double tp = 0;
  double pp = 0;
  double dp_exposed = 0;
  double total = 0;
  double tokens_per_s_per_npu = 0;
  double mfu = 0;  // model FLOPs / (time x NPUs x peak)
  double hfu = 0;  // with recompute FLOPs
};

// `peak` in FLOP/s per NPU; `efficiency` the fraction of it the layers' kernels reach.
StepTime step_time(const ModelShape& m, const TrainOptions& o, const Layout& l, double peak,
                   double efficiency, const CommTime& comm,
                   const std::optional<ZeroComm>& zero = std::nullopt);

}  // namespace ascend::topology
