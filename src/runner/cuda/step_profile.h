#pragma once
// Where one eager decode step's time goes, by phase: a Backend that forwards every op to the CudaBackend
// and brackets it with CUDA events (attention = the whole mla_attention op incl. its absorbed GEMMs and
// cache write; MoE = router, routing, experts, combine; dense GEMMs = every linear(), lm_head included;
// small ops = embedding, norms, RoPE, SiLU, row gathers). Sampling is timed by the runner. Host = wall time
// of the step minus the GPU time the events saw (staging, launches, waits). Turned on by
// MLA_PROFILE_DECODE=N (every N-th decode-only step runs through it, eagerly); the table is printed to
// stderr when the runner is destroyed. The events serialise nothing but add a few µs per op.
#include <cuda_runtime_api.h>

#include <map>
#include <string>
#include <vector>

#include "mla/model/cuda_backend.h"

namespace mla::runner {

class ProfilingBackend final : public model::Backend {
 public:
  enum Phase { kAttention, kMoe, kGemm, kSmall, kSampling, kPhases };
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
  Status mla_attention(int layer, const TensorView& q, const TensorView& latent, const model::AttentionWeights& w,
                       model::AttnPath path, TensorView out) override {
    return timed(kAttention, [&] { return be_->mla_attention(layer, q, latent, w, path, out); });
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

  // Waits for the step's events and adds their times (and the step's wall time) to the row of `batch`.
  void end_step(int batch, double wall_ms);
  std::string report() const;

 private:
  template <class F>
  Status timed(Phase p, F&& f) {
    if (used_ == events_.size()) {
      cudaEvent_t a, b;
      cudaEventCreate(&a), cudaEventCreate(&b);
      events_.push_back({a, b});
    }
    auto [a, b] = events_[used_];
    const cudaStream_t s = reinterpret_cast<cudaStream_t>(be_->stream());
    cudaEventRecord(a, s);
    Status st = f();
    cudaEventRecord(b, s);
    phases_.push_back(p);
    ++used_;
    return st;
  }
  struct Row {
    int steps = 0;
    double ms[kPhases] = {};
    double wall = 0;
  };
  model::CudaBackend* be_;
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> events_;
  std::vector<Phase> phases_;
  size_t used_ = 0;
  std::map<int, Row> rows_;
};

}  // namespace mla::runner
