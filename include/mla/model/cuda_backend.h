#pragma once
// The CUDA backend: bf16 weights and activations on one GPU, fp32 accumulation everywhere, an fp32
// residual stream, and a paged latent KV cache (64-token pages of 576 values, bf16 or fp8 e4m3, one pool
// per layer).
// Everything is allocated once in create(): weights, KV pages (from a page budget), the activation arena
// that alloc() hands out, the per-op scratch arena and the cuBLASLt workspace. A step allocates nothing.
//
// Attention: every row's latent is written to the cache first (concat_and_cache_mla). Decode rows (chunks
// of one token, or every row under AttnPath::kAbsorbed) attend through weight absorption: q_nope·W_UK per
// head, mla_decode over the paged cache (each row one s_q = 1 query over its first pos + 1 keys), ·W_UV.
// Prefill chunks (AttnPath::kAuto with more than one token, or kExpanded) gather their whole cached
// context, expand it with kv_b_proj and run prefill_attention (d_qk 192, d_v 128, causal, the chunk's
// queries being the context's last positions). With `prefill_attention` off, prefill chunks take the
// absorbed path too (the same math, reassociated), and kExpanded is refused.
#include <memory>
#include <vector>

#include "mla/core/kv_format.h"
#include "mla/core/stream.h"
#include "mla/model/backend.h"

namespace mla::model {

struct CudaBackendOptions {
  int64_t num_pages = 1024;              // KV pages (64 tokens each) per layer, shared by all sequences
  int64_t max_batch_tokens = 4096;       // tokens one step may hold
  // Arena behind alloc(), reset by begin_step. DeepseekV2 allocates per layer and nothing is freed within a
  // step, so a step needs about layers × tokens × (q + latent + attention out) plus the MLPs' temporaries:
  // V2-Lite at 4096 tokens ~1.5 GB, at 16384 tokens ~6 GB.
  size_t activation_bytes = size_t{1} << 30;
  size_t scratch_bytes = size_t{512} << 20;   // per-op temporaries (MoE sorting, decode q/out, plans)
  size_t gemm_workspace_bytes = size_t{32} << 20;
  // bf16, or fp8 (e4m3, vLLM/FlashMLA's per-tensor scheme: cache = satfinite(x / k_scale), decode q =
  // satfinite(q / q_scale); both products on FP8 tensor cores). fp16 and fp8_ds are not wired yet.
  KvFormat kv_format = KvFormat::kBf16;
  float k_scale = 1.f;  // fp8: one scale for every layer (calibration can come later)
  float q_scale = 1.f;  // fp8: the decode query's scale
  bool prefill_attention = true;         // expanded path for prefill chunks (see above)
};

class CudaBackend final : public Backend {
 public:
  // Uploads `host` (fp32 or bf16 host weights, as the loader returns them) as bf16 to the current device.
  static Status create(const ModelWeights& host, const CudaBackendOptions& opts, std::unique_ptr<CudaBackend>* out);
  ~CudaBackend() override;

  const ModelWeights& weights() const override;
  Status begin_step(const ForwardBatch& batch) override;
  TensorView alloc(int64_t rows, int64_t cols) override;
  TensorView alloc_fp32(int64_t rows, int64_t cols) override;
  void release_sequence(int64_t seq_id) override;
  int64_t cached_tokens(int64_t seq_id) const;
  Stream stream() const;
  int64_t free_pages() const;

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

  // Copies a device activation (bf16 or fp32, 2-d) into host floats, row-major [rows · cols]; synchronizes.
  Status download(const TensorView& v, std::vector<float>* out) const;

  struct State;  // device memory and step state (cuda_backend_state.h)

 private:
  explicit CudaBackend(std::unique_ptr<State> s);
  Status attention_absorbed(int layer, const TensorView& q, const TensorView& kv_b, TensorView out);
  Status attention_expanded(int layer, const TensorView& q, const TensorView& kv_b, TensorView out);
  std::unique_ptr<State> s_;
};

}  // namespace mla::model
