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
#include <functional>
#include <memory>
#include <vector>

#include "mla/core/kv_format.h"
#include "mla/core/stream.h"
#include "mla/model/backend.h"
#include "mla/ops/sampling.h"

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
  // bf16; fp8 (e4m3, vLLM/FlashMLA's per-tensor scheme: cache = satfinite(x / k_scale), decode q =
  // satfinite(q / q_scale); both products on FP8 tensor cores); or fp8_ds (per-token tile scales, bf16 RoPE,
  // bf16 query). fp16 is not wired.
  KvFormat kv_format = KvFormat::kBf16;
  float k_scale = 1.f;  // fp8: one scale for every layer (calibration can come later)
  float q_scale = 1.f;  // fp8: the decode query's scale
  bool prefill_attention = true;         // expanded path for prefill chunks (see above)
  // Fixed step-input buffers (pinned staging + device twin) are sized from these once: a step's block
  // tables hold at most max_num_seqs rows (more when the arrays still fit, e.g. forced absorbed prefill) of
  // max_pages_per_seq pages; CUDA-graph steps use max_pages_per_seq as their fixed table width.
  int64_t max_num_seqs = 256;
  int64_t max_pages_per_seq = 0;  // 0: ceil(max_position_embeddings / 64), at most num_pages
};

// Profiling hook (MLA_PROFILE_DECODE): told, on the host, when each part of mla_attention is about to be
// enqueued on the stream and when it has been; the probe records CUDA events there.
class AttentionProbe {
 public:
  enum Part { kCacheWrite, kDecode, kExpand, kPrefillKernel, kParts };  // kExpand: gather + kv_b_proj
  virtual ~AttentionProbe() = default;
  virtual void mark(Part part, bool end) = 0;
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

  // ---- Sampling on the device and CUDA-graph steps (CudaModelRunner) ----
  // Per-row sampling parameters of the next step's logits rows; the next begin_step stages them with the
  // step's inputs (one upload).
  void set_sampling(std::vector<SamplingRow> rows);
  // sample_tokens over the step's logits [rows, vocab] fp32 into fixed device memory, then an async copy
  // of the ids into pinned host memory. No host sync: graph-capturable.
  Status sample(const TensorView& logits);
  // Waits for the stream and returns the step's sampled ids (padding rows dropped); a NaN/inf row is an
  // error naming the row.
  Status read_samples(std::vector<int32_t>* tokens);
  // The host half of begin_step for a decode-only batch padded to `rows` rows (padding: token 0, position
  // 0, cache slot -1, seqlen 1 on the first sequence's first page, greedy sampling), its block table at
  // graph_table_width(). Until end_padded_step(), begin_step(batch of `rows` tokens) only plans the
  // decode: a captured graph replays exactly that. commit_step() marks the staged tokens cached (what the
  // last layer does when run eagerly).
  Status stage_padded_decode(const ForwardBatch& batch, int64_t rows);
  void commit_step();
  void end_padded_step();
  int64_t graph_table_width() const;
  int64_t pages_of(int64_t seq_id) const;  // pages the backend holds for the sequence
  void set_attention_probe(AttentionProbe* probe);  // null: off

  // ---- Start-up memory sizing (CudaModelRunner, cuda_backend_memory.cpp) ----
  // High-water mark of the activation arena since create(): after a max-size step, what steps need.
  size_t activation_peak() const;
  size_t activation_capacity() const;
  size_t kv_cache_bytes() const;
  int64_t num_pages() const;
  // Frees the KV pool and the activation arena, asks `num_pages(activation_bytes)` how many pages to
  // allocate now (the caller measures free memory), then allocates both anew. No sequence may hold pages.
  Status resize_cache(size_t activation_bytes, const std::function<int64_t(size_t)>& num_pages);

  struct State;  // device memory and step state (cuda_backend_state.h)

 private:
  explicit CudaBackend(std::unique_ptr<State> s);
  Status attention_absorbed(int layer, const TensorView& q, const TensorView& kv_b, TensorView out);
  Status attention_expanded(int layer, const TensorView& q, const TensorView& kv_b, TensorView out);
  Status stage(const ForwardBatch& batch, int64_t pad_rows);
  Status plan_step();
  std::unique_ptr<State> s_;
};

}  // namespace mla::model
