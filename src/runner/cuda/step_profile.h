#pragma once
// Where a step's time goes, by phase: a Backend that forwards every op to the CudaBackend and brackets it
// with CUDA events. Phases: attention split into its parts (the cache write; the absorbed decode rows:
// q·W_UK, mla_decode, ·W_UV; the prefill chunks' context expansion: gather + kv_b_proj; the prefill
// attention kernel) through the backend's AttentionProbe; MoE = router, routing, experts, combine; dense
// GEMMs = every linear(), lm_head included; small ops = embedding, norms, RoPE, SiLU, row gathers; sampling
// (timed by the runner). Host = wall time of the step minus the GPU time the events saw (staging,
// launches, waits).
// Turned on by MLA_PROFILE_DECODE=N: every N-th decode-only step and every mixed or prefill-only step run
// through it eagerly (mixed and prefill steps are eager anyway), and every decode step replayed from a CUDA
// graph is timed as a whole (events around the launch). The tables are printed to stderr when the runner
// is destroyed. The events serialise nothing but add a few µs per op.
#include <cuda_runtime_api.h>

#include <map>
#include <string>
#include <vector>

#include "mla/model/cuda_backend.h"

namespace mla::runner {

class ProfilingBackend final : public model::Backend, public model::AttentionProbe {
 public:
  enum Phase { kAttnWrite, kAttnDecode, kAttnExpand, kAttnPrefill, kMoe, kGemm, kSmall, kSampling, kPhases };
  static_assert(int(kAttnWrite) == int(kCacheWrite) && int(kAttnDecode) == int(kDecode) &&
                    int(kAttnExpand) == int(kExpand) && int(kAttnPrefill) == int(kPrefillKernel),
                "attention phases are the probe's parts");
  explicit ProfilingBackend(model::CudaBackend* be) : be_(be) {}
  ~ProfilingBackend() override;

  const model::ModelWeights& weights() const override { return be_->weights(); }
  Status begin_step(const model::ForwardBatch& b) override { return be_->begin_step(b); }
  TensorView alloc(int64_t r, int64_t c) override { return be_->alloc(r, c); }
  TensorView alloc_fp32(int64_t r, int64_t c) override { return be_->alloc_fp32(r, c); }
  void release_sequence(int64_t id) override { be_->release_sequence(id); }
  Status embed(TensorView out) override { return timed(kSmall, [&] { return be_->embed(out); }); }
  Status rmsnorm(const TensorView& x, const TensorView& w, float eps, TensorView out) override {
    return timed(kSmall, [&] { return be_->rmsnorm(x, w, eps, out); });
  }
  Status add_rmsnorm(const TensorView& x, TensorView r, const TensorView& w, float eps, TensorView out) override {
    return timed(kSmall, [&] { return be_->add_rmsnorm(x, r, w, eps, out); });
  }
  Status linear(const TensorView& x, const TensorView& w, TensorView out) override {
    return timed(kGemm, [&] { return be_->linear(x, w, out); });
  }
  Status rope(TensorView q, TensorView latent) override { return timed(kSmall, [&] { return be_->rope(q, latent); }); }
  // Timed part by part through mark() (the backend calls it around each part).
  Status mla_attention(int layer, const TensorView& q, const TensorView& latent, const model::AttentionWeights& w,
                       model::AttnPath path, TensorView out) override {
    be_->set_attention_probe(this);
    const Status st = be_->mla_attention(layer, q, latent, w, path, out);
    be_->set_attention_probe(nullptr);
    return st;
  }
  Status silu_mul(const TensorView& g, const TensorView& u, TensorView out) override {
    return timed(kSmall, [&] { return be_->silu_mul(g, u, out); });
  }
  Status gather_logit_rows(const TensorView& x, TensorView out) override {
    return timed(kSmall, [&] { return be_->gather_logit_rows(x, out); });
  }
  Status moe(const TensorView& x, const model::MoeWeights& w, TensorView out) override {
    return timed(kMoe, [&] { return be_->moe(x, w, out); });
  }
  Status sample(const TensorView& logits) { return timed(kSampling, [&] { return be_->sample(logits); }); }
  void mark(Part part, bool end) override { end ? stop() : start(static_cast<Phase>(part)); }

  // Waits for the step's events and adds their times (and the step's wall time) to the row `label`.
  void end_step(const std::string& label, int64_t tokens, int64_t decode_rows, double wall_ms);
  // A decode step replayed from the graph of `bucket`: events around the launch, then (after the step's
  // tokens are back) its GPU and wall time.
  void graph_launch_begin();
  void graph_launch_end();
  void end_graph_step(int bucket, int rows, double wall_ms);
  std::string report() const;

 private:
  template <class F>
  Status timed(Phase p, F&& f) {
    start(p);
    Status st = f();
    stop();
    return st;
  }
  void start(Phase p);
  void stop();
  struct Row {
    int64_t steps = 0, tokens = 0, decode_rows = 0;
    double ms[kPhases] = {};
    double wall = 0;
  };
  struct GraphRow {
    int64_t steps = 0, rows = 0;
    double gpu = 0, wall = 0;
  };
  model::CudaBackend* be_;
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> events_;
  std::vector<Phase> phases_;
  size_t used_ = 0;
  std::map<std::string, Row> rows_;
  cudaEvent_t graph_ev_[2] = {nullptr, nullptr};
  std::map<int, GraphRow> graph_rows_;
};

}  // namespace mla::runner
