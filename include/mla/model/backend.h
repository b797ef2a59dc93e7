#pragma once
// The operations a DeepSeek-V2 forward step needs, implemented once per device (CpuBackend, CudaBackend).
// DeepseekV2 (deepseek_v2.h) is the one model definition: it calls these in order and owns no math.
// Activations are backend memory (host for CPU, device for CUDA) in the backend's activation dtype (fp32 on
// the CPU, bf16 on CUDA; alloc_fp32 gives fp32 for the residual and logits), 2-d [rows, cols] with a
// contiguous last dim; a row stride (stride[0]) larger than cols is allowed, so column slices
// such as latent[:, :512] are views, not copies.
#include <cstdint>
#include <initializer_list>

#include "mla/core/status.h"
#include "mla/core/tensor.h"
#include "mla/model/batch.h"
#include "mla/model/weights.h"

namespace mla::model {

class Backend {
 public:
  virtual ~Backend() = default;

  // The weights in this backend's memory (what the model passes back into the ops below).
  virtual const ModelWeights& weights() const = 0;
  // Validates the batch against the caches, uploads token ids and positions, resets scratch memory.
  virtual Status begin_step(const ForwardBatch& batch) = 0;
  // Contiguous scratch activation, valid until the next begin_step.
  virtual TensorView alloc(int64_t rows, int64_t cols) = 0;
  // A scratch activation the backend keeps in fp32 whatever alloc() returns: the residual stream (a sum
  // of 2·L sublayer outputs that bf16 would round after every addition) and the logits. Every op that
  // takes those views accepts fp32. Backends whose activations are fp32 anyway need not override it.
  virtual TensorView alloc_fp32(int64_t rows, int64_t cols) { return alloc(rows, cols); }
  // Forgets a sequence's KV cache.
  virtual void release_sequence(int64_t seq_id) = 0;

  // out[t, hidden] = table[token_ids[t]]
  virtual Status embed(TensorView out) = 0;
  // out = x / rms(x) * w  (row-wise; out may alias x)
  virtual Status rmsnorm(const TensorView& x, const TensorView& w, float eps, TensorView out) = 0;
  // residual += x; out = rmsnorm(residual) * w   (the pre-norm block boundary, fused)
  virtual Status add_rmsnorm(const TensorView& x, TensorView residual, const TensorView& w, float eps,
                             TensorView out) = 0;
  // out[t, n] = x[t, k] · W[n, k]ᵀ
  virtual Status linear(const TensorView& x, const TensorView& w, TensorView out) = 0;
  // YaRN RoPE at the step's positions, in place, on the last 64 values of every q head
  // (q [t, h·192]) and of every latent row (latent [t, 576]: k_pe).
  virtual Status rope(TensorView q, TensorView latent) = 0;
  // Writes the step's latents into layer `layer`'s cache, then attention of q [t, h·192] over each
  // sequence's cached context (causal) → out [t, h·v].
  virtual Status mla_attention(int layer, const TensorView& q, const TensorView& latent,
                               const AttentionWeights& w, AttnPath path, TensorView out) = 0;
  // out = silu(gate) · up
  virtual Status silu_mul(const TensorView& gate, const TensorView& up, TensorView out) = 0;
  // out[s, cols] = x[batch.logits_rows[s], cols]
  virtual Status gather_logit_rows(const TensorView& x, TensorView out) = 0;
  // Routed experts (softmax top-k) plus shared experts: out[t, hidden].
  virtual Status moe(const TensorView& x, const MoeWeights& w, TensorView out) = 0;
};

}  // namespace mla::model
