#pragma once
// The CPU backend: fp32 activations, weights fp32 or bf16 in host memory, float accumulation, and a
// simple per-sequence latent KV cache ([tokens, 576] fp32 per layer). The reference the CUDA backend
// is checked against, and what CI runs end to end.
#include <map>
#include <memory>
#include <vector>

#include "mla/model/backend.h"
#include "mla/model/rope.h"

namespace mla::model {

class CpuBackend final : public Backend {
 public:
  // Checks that every weight is present, host fp32/bf16 and of its spec's shape.
  static Status create(ModelWeights weights, std::unique_ptr<CpuBackend>* out);

  const ModelWeights& weights() const override { return w_; }
  Status begin_step(const ForwardBatch& batch) override;
  TensorView alloc(int64_t rows, int64_t cols) override;
  void release_sequence(int64_t seq_id) override { cache_.erase(seq_id); }
  // Tokens cached for a sequence (all layers; a step that failed part-way is not counted).
  int64_t cached_tokens(int64_t seq_id) const;

  Status embed(TensorView out) override;
  Status rmsnorm(const TensorView& x, const TensorView& w, float eps, TensorView out) override;
  Status add_rmsnorm(const TensorView& x, TensorView residual, const TensorView& w, float eps,
                     TensorView out) override;
  Status linear(const TensorView& x, const TensorView& w, TensorView out) override;
  Status rope(TensorView q, TensorView latent) override;
  Status mla_attention(int layer, const TensorView& q, const TensorView& latent, const AttentionWeights& w,
                       AttnPath path, TensorView out) override;
  Status silu_mul(const TensorView& gate, const TensorView& up, TensorView out) override;
  Status gather_logit_rows(const TensorView& x, TensorView out) override;
  Status moe(const TensorView& x, const MoeWeights& w, TensorView out) override;

 private:
  explicit CpuBackend(ModelWeights w);
  ModelWeights w_;
  RopeTable rope_;
  float softmax_scale_;
  ForwardBatch batch_;            // the current step
  std::vector<int64_t> positions_;  // [t]
  std::vector<std::unique_ptr<float[]>> arena_;
  std::map<int64_t, std::vector<std::vector<float>>> cache_;  // seq → layer → [len · 576]
};

}  // namespace mla::model
