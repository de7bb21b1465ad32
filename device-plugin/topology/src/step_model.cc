#include "ascend/topology/step_model.h"

#include <algorithm>

namespace ascend::topology {

namespace {

constexpr double kBf16 = 2;        // bytes per weight, gradient and activation element
constexpr double kAdamBytes = 12;  // fp32 master weights, momentum and variance

double sbh(const ModelShape& m) {
  return static_cast<double>(m.seq_len) * m.micro_batch * m.hidden;
}

double layer_params(const ModelShape& m) {
  return (m.params - 2.0 * m.vocab * m.hidden) / m.layers;
}

int last_stage(const Layout& l) {
  return l.pp - 1;
}

// The fp32 logits of one micro-batch, kept by the last stage for the cross entropy.
double logits_bytes(const ModelShape& m, int tp) {
  return 4.0 * m.seq_len * m.micro_batch * static_cast<double>(m.vocab) / tp;
}

// Full recompute re-runs one layer at a time in the backward pass: that layer's full activations.
double recompute_working_bytes(const ModelShape& m, const TrainOptions& o, int tp) {
  if (o.recompute != Recompute::kFull) return 0;
  TrainOptions none = o;
  none.recompute = Recompute::kNone;
  return activation_bytes_per_layer(m, none, tp);
}

// Hardware FLOPs of one micro-batch on `stage`: its layers forward, backward (2x) and recompute, and the
// output layer on the last stage.
double stage_flops(const ModelShape& m, const TrainOptions& o, const Layout& l, int stage) {
  double per_layer = 3 * layer_forward_flops(m) + recompute_flops(m, o.recompute);
  double f = stage_layers(m.layers, l.pp, stage) * per_layer;
  if (stage == last_stage(l)) f += 3 * logits_forward_flops(m);
  return f;
}

// The gradient reduction overlaps the backward pass of the last micro-batch except its last bucket (one
// layer's gradients); with ZeRO-1 it is a reduce-scatter (half the volume) and the all-gather of the
// updated weights after the optimizer step (the other half) is exposed.
double exposed_dp(const ModelShape& m, const TrainOptions& o, const Layout& l, double rate,
                  const CommTime& comm, const std::optional<ZeroComm>& zero) {
  double all_reduce = comm.dp;
  if (l.dp < 2 || all_reduce <= 0) return 0;
  int buckets = std::max(1, stage_layers(m.layers, l.pp, 0));
  double backward = (2 * layer_forward_flops(m) + recompute_flops(m, o.recompute)) * buckets / l.v / rate;
  double overlapped = o.optimizer_parallel ? (zero ? zero->reduce_scatter : all_reduce / 2) : all_reduce;
  double exposed = std::max(overlapped / buckets, overlapped - backward);
  return o.optimizer_parallel ? exposed + (zero ? zero->all_gather : all_reduce / 2) : exposed;
}

}  // namespace

std::string_view to_string(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "none";
}

Result<Recompute> parse_recompute(std::string_view s) {
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    if (s == to_string(r)) return r;
  }
  return Error::invalid("unknown recompute '" + std::string(s) + "' (use none, selective or full)");
}

int micro_batches(const ModelShape& m, const Layout& l) {
  return m.global_batch / (m.micro_batch * l.dp);
}

int stage_layers(int layers, int pp, int stage) {
  return layers / pp + (stage < layers % pp ? 1 : 0);
}

double stage_params(const ModelShape& m, const Layout& l, int stage) {
  double p = stage_layers(m.layers, l.pp, stage) * layer_params(m);
  double embedding = static_cast<double>(m.vocab) * m.hidden;
  if (stage == 0) p += embedding;
  if (stage == last_stage(l)) p += embedding;
  return p / l.tp;
}

double activation_bytes_per_layer(const ModelShape& m, const TrainOptions& o, int tp) {
  double t = tp;
  double attention = 5.0 * m.heads * m.seq_len / m.hidden;  // softmax, its dropout mask and output
  double x = sbh(m);
  switch (o.recompute) {
    case Recompute::kNone:
      return o.sequence_parallel ? x * (34 + attention) / t : x * (10 + 24 / t + attention / t);
    case Recompute::kSelective:
      return o.sequence_parallel ? x * 34 / t : x * (10 + 24 / t);
    case Recompute::kFull:
      return o.sequence_parallel ? x * kBf16 / t : x * kBf16;
  }
  return 0;
}

double in_flight(int pp, int v, int micro_batches, int stage) {
  if (v <= 1) return std::min(pp - stage, micro_batches);
  int chunks = 2 * (pp - stage - 1) + (v - 1) * pp + 1;  // Megatron's interleaved warm-up, plus one
  return static_cast<double>(std::min(chunks, micro_batches * v)) / v;
}

Memory stage_memory(const ModelShape& m, const TrainOptions& o, const Layout& l, int stage) {
  Memory r;
  double params = stage_params(m, l, stage);
  r.stage = stage;
  r.weights = kBf16 * params;
  r.gradients = kBf16 * params;
  r.optimizer = kAdamBytes * params / (o.optimizer_parallel ? l.dp : 1);
  r.in_flight = in_flight(l.pp, l.v, micro_batches(m, l), stage);
  r.activations = activation_bytes_per_layer(m, o, l.tp) * stage_layers(m.layers, l.pp, stage) * r.in_flight +
                  recompute_working_bytes(m, o, l.tp);
  if (stage == last_stage(l)) r.activations += logits_bytes(m, l.tp);
  r.total = r.weights + r.gradients + r.optimizer + r.activations;
  return r;
}

Memory peak_memory(const ModelShape& m, const TrainOptions& o, const Layout& l) {
  Memory first = stage_memory(m, o, l, 0);
  if (l.pp == 1) return first;
  Memory last = stage_memory(m, o, l, last_stage(l));
  return last.total > first.total ? last : first;
}

double layer_forward_flops(const ModelShape& m) {
  double tokens = static_cast<double>(m.micro_batch) * m.seq_len;
  return 2 * tokens * layer_params(m) + 4 * tokens * m.seq_len * m.hidden;
}

double logits_forward_flops(const ModelShape& m) {
  return 2.0 * m.micro_batch * m.seq_len * static_cast<double>(m.hidden) * m.vocab;
}

double recompute_flops(const ModelShape& m, Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return 0;
    case Recompute::kSelective:
      return 4.0 * m.micro_batch * m.seq_len * static_cast<double>(m.seq_len) * m.hidden;
    case Recompute::kFull:
      return layer_forward_flops(m);
  }
  return 0;
}

double model_flops_per_step(const ModelShape& m) {
  double micro = static_cast<double>(m.global_batch) / m.micro_batch;
  return 3 * micro * (m.layers * layer_forward_flops(m) + logits_forward_flops(m));
}

Volumes step_volumes(const ModelShape& m, const TrainOptions& o, const Layout& l) {
  Volumes v;
  double micro = micro_batches(m, l);
  double activation = kBf16 * sbh(m);
  if (l.tp > 1) {
    // Per layer and micro-batch: 2 all-reduces forward, 2 backward (with sequence parallelism 4 all-gathers
    // and 4 reduce-scatters, the same bytes), 2 more for the recomputed forward.
    int collectives = o.recompute == Recompute::kFull ? 6 : 4;
    v.tp = collectives * activation * stage_layers(m.layers, l.pp, 0) * micro;
  }
  if (l.pp > 1) {
    // One activation forward and one gradient back per virtual stage and micro-batch, each rank sending its
    // 1/t slice (sequence parallelism, or Megatron's scatter/gather), plus the pipeline's fill.
    v.pp = 2 * activation / l.tp * (micro * l.v + l.pp - 1);
  }
  if (l.dp > 1) {
    v.dp = kBf16 * std::max(stage_params(m, l, 0), stage_params(m, l, last_stage(l)));
  }
  return v;
}

StepTime step_time(const ModelShape& m, const TrainOptions& o, const Layout& l, double peak,
                   double efficiency, const CommTime& comm, const std::optional<ZeroComm>& zero) {
  StepTime st;
  double rate = l.tp * peak * efficiency;
  double micro = micro_batches(m, l);
  double slowest = std::max(stage_flops(m, o, l, 0), stage_flops(m, o, l, last_stage(l)));
  st.compute = micro * slowest / rate;
  st.tp = comm.tp;
  st.pp = comm.pp;
  st.bubble = (l.pp - 1) / (micro * l.v) * (st.compute + st.tp);
  st.dp_exposed = exposed_dp(m, o, l, rate, comm, zero);
  st.total = st.compute + st.bubble + st.tp + st.pp + st.dp_exposed;
  double npus = static_cast<double>(l.tp) * l.pp * l.dp;
  double model = model_flops_per_step(m);
  double recompute = recompute_flops(m, o.recompute) * m.layers * m.global_batch / m.micro_batch;
  st.tokens_per_s_per_npu = static_cast<double>(m.global_batch) * m.seq_len / (st.total * npus);
  st.mfu = model / (st.total * npus * peak);
  st.hfu = (model + recompute) / (st.total * npus * peak);
  return st;
}

}  // namespace ascend::topology
